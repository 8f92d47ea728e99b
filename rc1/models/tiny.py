"""`random:qwen3-tiny`: a tiny Qwen3-architecture model with random weights, for fast tests.

Random weights from a fixed seed (so every build is identical), the REAL SmolLM2 tokenizer read
from the embedded GGUF (no network) plus `<think>`/`</think>` as added tokens, and a Qwen3-style
chat template: assistant turns may carry `<think>…</think>` reasoning (kept on the turns after the
last user message, stripped from older ones, as Qwen3 does), and `enable_thinking=False` opens
the assistant turn with an empty think block. vocab_size = len(tokenizer).

Built once into the model cache (`rc1.models.cache`); loading it afterwards takes well under a second.
"""

from __future__ import annotations

from pathlib import Path

TINY_NAME = "random-qwen3-tiny"
TINY_SEED = 1234
TINY_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
BUILDER_VERSION = 1

QWEN3_STYLE_TEMPLATE = (
    "{%- set ns = namespace(last_query_index=-1) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{%- set ns.last_query_index = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- set content = message['content'] -%}"
    "{%- if message['role'] == 'assistant' and loop.index0 < ns.last_query_index and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


def tiny_config(vocab_size: int, bos: int | None, eos: int, pad: int):
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=vocab_size, tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos,
                       pad_token_id=pad, rope_theta=10000.0, **TINY_SHAPE)


def build_tiny_model(config, seed: int = TINY_SEED):
    """The random-weight model for `config`, identical for the same seed (global RNG left untouched)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model


def build_tiny_tokenizer():
    from rc1.models.embedded import load_gguf_tokenizer

    tok = load_gguf_tokenizer()
    tok.add_tokens(["<think>", "</think>"])
    tok.chat_template = QWEN3_STYLE_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _build(out: Path) -> None:
    tok = build_tiny_tokenizer()
    config = tiny_config(len(tok), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    model = build_tiny_model(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))


def ensure_tiny() -> Path:
    from rc1.models.cache import cached_dir
    from rc1.models.embedded import _gguf_meta, gguf_path

    meta = {"builder": BUILDER_VERSION, "seed": TINY_SEED, "shape": TINY_SHAPE,
            "tokenizer": _gguf_meta(gguf_path())}
    return cached_dir(TINY_NAME, _build, meta)
