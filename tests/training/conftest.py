"""Shared fixtures: a tiny Qwen3 model dir built offline, a workspace with data and weights, configs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.workspace import WEIGHTS, arithmetic_items, make_workspace  # noqa: F401 (re-exported)


def _build_tiny(out: Path) -> None:
    """A 2-layer Qwen3 with a byte-level BPE tokenizer trained on a few strings, and a Qwen3-style template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from rc1.envs.protocol import system_prompt
    from rc1.models.tiny import QWEN3_STYLE_TEMPLATE

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [system_prompt(), "ANSWER: 42", "TOOL: calc 3+4", "What is 7 + 8? The answer is 15."] + [
        f"What is {a} + {b}? {a + b}" for a in range(12) for b in range(14)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   padding_side="left")
    fast.chat_template = QWEN3_STYLE_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
                      eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=True)
    Qwen3ForCausalLM(cfg).save_pretrained(out)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_model")
    _build_tiny(out)
    return out
