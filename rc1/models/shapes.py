"""Model shapes without weights: the numbers memory planning needs, and random-weight models of a shape.

`shape_of(base)` answers offline: a local directory's config.json, the HF cache's config.json of a
hub id (never a download), or the table below. An unknown hub id that is not in the local HF
cache gives None (the resources gate then says "not measurable", never "pass").

`random:qwen3-4b` is a random-weight model of Qwen3-4B's exact shape (bf16 safetensors, sharded,
written tensor by tensor so building it never holds the whole model in memory), with the
SmolLM2 tokenizer of `random:qwen3-tiny`: ids past that tokenizer's vocabulary exist in the
embedding (the shape is exact) and decode to nothing. Built once into the model cache.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from rc1.models.tiny import TINY_SHAPE


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer (Llama / Qwen2 / Qwen3 family): SwiGLU MLP, GQA attention, RMSNorm."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qk_norm: bool                 # Qwen3 normalises q and k per head
    source: str = ""              # where these numbers come from

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear layer of one decoder layer, by module name."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def layer_linear_params(self) -> int:
        return sum(a * b for a, b in self.linear_shapes().values())

    @property
    def layer_norm_params(self) -> int:
        return 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """lm_head parameters beyond the embedding (0 when tied)."""
        return 0 if self.tied else self.vocab * self.hidden

    @property
    def params(self) -> int:
        return (self.layers * (self.layer_linear_params + self.layer_norm_params) + self.embedding_params
                + self.head_params + self.hidden)

    def lora_params(self, r: int, targets: list[str]) -> int:
        """Trainable parameters of LoRA rank r on `targets` (names not in this architecture are ignored)."""
        shapes = self.linear_shapes()
        return self.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets if t in shapes)

    def with_layers(self, layers: int) -> "ModelShape":
        return replace(self, layers=layers, name=f"{self.name} ({layers} layers)")

    def to_dict(self) -> dict:
        return {"name": self.name, "hidden_size": self.hidden, "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim,
                "intermediate_size": self.intermediate, "vocab_size": self.vocab, "tie_word_embeddings": self.tied,
                "params": self.params, "source": self.source}

    @classmethod
    def from_hf_config(cls, cfg: dict, *, name: str, source: str) -> "ModelShape | None":
        """The shape in an HF config.json (a multimodal config's text_config), or None if it is not one."""
        cfg = cfg.get("text_config") or cfg
        try:
            hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
            return cls(name=name, hidden=hidden, layers=int(cfg["num_hidden_layers"]), heads=heads,
                       kv_heads=int(cfg.get("num_key_value_heads") or heads),
                       head_dim=int(cfg.get("head_dim") or hidden // heads),
                       intermediate=int(cfg["intermediate_size"]), vocab=int(cfg["vocab_size"]),
                       tied=bool(cfg.get("tie_word_embeddings", True)),
                       qk_norm=str(cfg.get("model_type", "")).startswith("qwen3"), source=source)
        except (KeyError, TypeError, ValueError):
            return None


# Qwen3-4B: the values of config.json as published at huggingface.co/Qwen/Qwen3-4B-Thinking-2507
# (identical layer shapes in Qwen/Qwen3-4B and Qwen/Qwen3-4B-Instruct-2507): hidden_size 2560,
# num_hidden_layers 36, num_attention_heads 32, num_key_value_heads 8, head_dim 128,
# intermediate_size 9728, vocab_size 151936, tie_word_embeddings true, model_type qwen3,
# rms_norm_eps 1e-6. (Thinking-2507 also has max_position_embeddings 262144 and rope_theta 5e6;
# they do not change the memory of a step and are kept in QWEN3_4B_EXTRA for the random build.)
QWEN3_4B = ModelShape(name="qwen3-4b", hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128,
                      intermediate=9728, vocab=151936, tied=True, qk_norm=True,
                      source="config.json of Qwen/Qwen3-4B-Thinking-2507 as published on the HF hub")
QWEN3_4B_EXTRA = {"rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "rope_theta": 5_000_000.0}
# SmolLM2-135M-Instruct: the config the embedded GGUF converts to (rc1.models.embedded).
SMOLLM2_135M = ModelShape(name="smollm2-135m-instruct", hidden=576, layers=30, heads=9, kv_heads=3, head_dim=64,
                          intermediate=1536, vocab=49152, tied=True, qk_norm=False,
                          source="config.json of the converted embedded GGUF (HuggingFaceTB/SmolLM2-135M-Instruct)")
# random:qwen3-tiny: rc1.models.tiny's shape; vocab = the SmolLM2 tokenizer (49152) + <think>, </think>.
QWEN3_TINY = ModelShape(name="qwen3-tiny", hidden=TINY_SHAPE["hidden_size"], layers=TINY_SHAPE["num_hidden_layers"],
                        heads=TINY_SHAPE["num_attention_heads"], kv_heads=TINY_SHAPE["num_key_value_heads"],
                        head_dim=TINY_SHAPE["head_dim"], intermediate=TINY_SHAPE["intermediate_size"],
                        vocab=49154, tied=True, qk_norm=True, source="rc1.models.tiny")

SHAPES: dict[str, ModelShape] = {s.name: s for s in (QWEN3_4B, SMOLLM2_135M, QWEN3_TINY)}
# model.base values whose shape is known without any file
KNOWN_BASES: dict[str, ModelShape] = {
    "Qwen/Qwen3-4B-Thinking-2507": QWEN3_4B,
    "embedded:smollm2-135m-instruct": SMOLLM2_135M,
    "random:qwen3-tiny": QWEN3_TINY,
    "random:qwen3-4b": QWEN3_4B,
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def shape_of(base: str, revision: str | None = None) -> ModelShape | None:
    """The shape of `model.base`, found offline; None when it cannot be known without a download."""
    local = Path(base).expanduser()
    if local.is_dir():
        try:
            cfg = json.loads((local / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return ModelShape.from_hf_config(cfg, name=local.name, source=f"{local.name}/config.json")
    if _HUB_ID.match(base):
        cached = _hub_cached_config(base, revision)
        if cached is not None:
            shape = ModelShape.from_hf_config(cached, name=base, source=f"config.json of {base} in the local HF cache")
            if shape is not None:
                return shape
    return KNOWN_BASES.get(base)


def _hub_cached_config(repo_id: str, revision: str | None) -> dict | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json", revision=revision)
        if isinstance(path, str):
            return json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception:  # a broken cache entry is the same as none: fall back to the table
        return None
    return None


# ----------------------------------------------------------------------------- random-weight builds
RANDOM_4B_NAME = "random-qwen3-4b"
RANDOM_4B_SEED = 4242
RANDOM_BUILDER_VERSION = 1
SHARD_BYTES = 2 * 2**30
INIT_STD = 0.02  # transformers' initializer_range for Qwen3


def hf_config(shape: ModelShape, *, bos: int | None, eos: int, pad: int, **extra):
    """A transformers Qwen3Config of `shape` (Qwen3 architecture)."""
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                       num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                       intermediate_size=shape.intermediate, tie_word_embeddings=shape.tied, bos_token_id=bos,
                       eos_token_id=eos, pad_token_id=pad, **extra)


def _write_shards(out: Path, specs: list[tuple[str, tuple[int, ...]]], make, shard_bytes: int) -> dict:
    """Save tensors `make(name, index)` (bf16, shapes `specs`) as sharded safetensors plus the index;
    at most one shard is in memory at a time. Returns the index."""
    import math

    from safetensors.torch import save_file

    shards: list[list[int]] = [[]]
    size = 0
    for i, (_, shp) in enumerate(specs):
        nbytes = 2 * math.prod(shp)
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(i)
        size += nbytes
    index = {"metadata": {"total_size": sum(2 * math.prod(s) for _, s in specs)}, "weight_map": {}}
    for k, group in enumerate(shards, 1):
        fname = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        tensors = {specs[i][0]: make(specs[i][0], i) for i in group}
        save_file(tensors, str(out / fname), metadata={"format": "pt"})
        index["weight_map"].update({n: fname for n in tensors})
        del tensors
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return index


def write_random_checkpoint(out: Path, config, *, seed: int, shard_bytes: int = SHARD_BYTES) -> dict:
    """Random bf16 weights for `config`, saved as sharded safetensors one shard at a time.

    Linear and embedding weights ~ N(0, INIT_STD), norms 1 (as transformers initialises them). The
    parameter names and shapes come from the model built on the meta device (no memory). Each
    tensor has its own generator seeded from (seed, index): the same seed gives the same files.
    """
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    specs = [(n, tuple(p.shape)) for n, p in meta.named_parameters()]  # tied weights appear once
    del meta

    def make(name: str, i: int):
        if name.endswith("norm.weight"):
            return torch.ones(specs[i][1], dtype=torch.bfloat16)
        g = torch.Generator().manual_seed(seed * 100_003 + i)
        return torch.empty(specs[i][1], dtype=torch.bfloat16).normal_(0.0, INIT_STD, generator=g)

    return _write_shards(out, specs, make, shard_bytes)


def write_random_model(out: Path, shape: ModelShape, tok, *, seed: int, **extra) -> None:
    """A random-weight model directory of `shape` with tokenizer `tok`: config, generation config, bf16 weights
    (write_random_checkpoint) and the tokenizer. random:qwen3-4b is built with it, and so is the same model on a
    machine without the SmolLM2 GGUF its tokenizer is read from (scripts/gpu_check.sh, from a saved tokenizer)."""
    from transformers import GenerationConfig

    config = hf_config(shape, bos=tok.bos_token_id, eos=tok.eos_token_id, pad=tok.pad_token_id, **extra)
    config.dtype = "bfloat16"
    config.save_pretrained(str(out))
    GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id).save_pretrained(str(out))
    write_random_checkpoint(out, config, seed=seed)
    tok.save_pretrained(str(out))


def _build_random_4b(out: Path) -> None:
    from rc1.models.tiny import build_tiny_tokenizer

    write_random_model(out, QWEN3_4B, build_tiny_tokenizer(), seed=RANDOM_4B_SEED, **QWEN3_4B_EXTRA)


def ensure_random_4b() -> Path:
    """The cached `random:qwen3-4b` directory (built on first use: ~8 GB of bf16 safetensors)."""
    from rc1.models.cache import cached_dir
    from rc1.models.embedded import _gguf_meta, gguf_path

    meta = {"builder": RANDOM_BUILDER_VERSION, "seed": RANDOM_4B_SEED, "shape": QWEN3_4B.to_dict(),
            "extra": QWEN3_4B_EXTRA, "tokenizer": _gguf_meta(gguf_path())}
    return cached_dir(RANDOM_4B_NAME, _build_random_4b, meta)


def layer_view(src: Path, layers: int, out: Path, shard_bytes: int = SHARD_BYTES) -> Path:
    """A model directory holding the first `layers` decoder layers of the safetensors model `src`.

    config.json says `layers`; the kept tensors are copied (one shard in memory at a time); the
    tokenizer and other files are symlinks into `src`. What the memory bench loads to measure with
    fewer layers than the model has.
    """
    from safetensors import safe_open

    out.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    total = int(cfg["num_hidden_layers"])
    if not 1 <= layers <= total:
        raise ValueError(f"layers must be in [1, {total}] (got {layers})")
    cfg["num_hidden_layers"] = layers
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:layers]
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    weight_map = json.loads((src / "model.safetensors.index.json").read_text())["weight_map"]
    layer_re = re.compile(r"\.layers\.(\d+)\.")
    keep = [n for n in weight_map if not (m := layer_re.search(n)) or int(m.group(1)) < layers]
    specs = []
    for n in keep:
        with safe_open(str(src / weight_map[n]), framework="pt") as fh:
            specs.append((n, tuple(fh.get_slice(n).get_shape())))

    def make(name: str, i: int):
        with safe_open(str(src / weight_map[name]), framework="pt") as fh:
            return fh.get_tensor(name).clone()

    _write_shards(out, specs, make, shard_bytes)
    for f in src.iterdir():
        if not f.name.startswith(("model", "config.json", "rc1_manifest")) and not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    return out
