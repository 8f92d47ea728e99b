"""Device and dtype policy (SPEC §6). Tensors move through `to_device`, never scattered `.to()`.

Device: the first available of the preference list (default mps, cuda, cpu).
dtype: fp16 on MPS, bf16 on CUDA where supported (else fp16), fp32 on CPU.
On MPS: no flash-attention and no torch.compile, with a warning at setup.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Iterable

log = logging.getLogger("rc1.device")


def _available(name: str) -> bool:
    import torch

    if name == "cpu":
        return True
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return False


def get_device(pref: Iterable[str] = ("mps", "cuda", "cpu")):
    import torch

    for name in pref:
        if _available(name):
            dev = torch.device(name)
            if name == "mps":
                msg = "MPS device: flash-attention and torch.compile are disabled"
                warnings.warn(msg, stacklevel=2)
                log.warning(msg)
            return dev
    return torch.device("cpu")


def cpu_bf16_supported() -> bool:
    """True on CPUs with native bf16 matrix instructions (AVX512-BF16 or AMX), where bf16 autocast is fast."""
    import torch

    probes = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    return any(bool(p()) for p in probes if p is not None)


def rollouts_from_bf16_copy(cfg, device_type: str, autocast_bf16: bool) -> bool:
    """Whether engine pure_pt samples its training rollouts from a bf16 copy of the policy on this device.

    Only on a CPU: under bf16 autocast always (autocast re-casts every weight at every decoded token, slower than
    the copy); under fp32 training when generation.rollout_dtype is bf16, or auto where the CPU has native bf16
    and the weights are not 4-bit (measured 1.78-1.99x the fp32 rollout's tok/s, docs/generation.md; with the
    capped KL controller and the drift bound, five seeds of configs/local.yaml passed every gate with it,
    docs/benchmarks.md 2026-11-28)."""
    if device_type != "cpu":
        return False
    if autocast_bf16:
        return True
    choice = cfg.generation.rollout_dtype
    if choice == "auto":
        return cfg.engine.name == "pure_pt" and cfg.finetune.method != "qlora" and cpu_bf16_supported()
    return choice == "bf16"


def dtype_for(device, mixed_precision: str = "auto"):
    """The training dtype for a device. An explicit request the device cannot honour falls back, logged."""
    import torch

    kind = getattr(device, "type", str(device))
    if mixed_precision in ("fp32", "no"):
        return torch.float32
    if kind == "cpu":
        if mixed_precision == "bf16" and cpu_bf16_supported():
            return torch.bfloat16  # autocast compute, fp32 master weights (opt-in: the CPU default is fp32)
        if mixed_precision not in ("auto",):
            log.warning("mixed_precision=%s requested on a CPU without AVX512-BF16/AMX: using fp32", mixed_precision)
        return torch.float32
    if kind == "mps":
        if mixed_precision == "bf16":
            log.warning("bf16 is unreliable on MPS: using fp16")
        return torch.float16
    if kind == "cuda":
        if mixed_precision == "fp16":
            return torch.float16
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def to_device(obj: Any, device, *, non_blocking: bool = False) -> Any:
    """Move a tensor, module, or (nested) dict/list/tuple of them to `device`."""
    import torch

    if isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return obj.to(device, non_blocking=non_blocking) if isinstance(obj, torch.Tensor) else obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device, non_blocking=non_blocking) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        moved = [to_device(v, device, non_blocking=non_blocking) for v in obj]
        return type(obj)(moved) if isinstance(obj, tuple) else moved
    if hasattr(obj, "to") and hasattr(obj, "data") and hasattr(obj, "keys"):  # transformers BatchEncoding
        return obj.to(device)
    return obj


def memory_used_mb(device=None) -> float:
    """Memory in use by this process on the device (CUDA/MPS allocator) or its RSS on CPU."""
    import torch

    kind = getattr(device, "type", str(device)) if device is not None else "cpu"
    if kind == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20
    if kind == "mps":
        return torch.mps.current_allocated_memory() / 2**20
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def peak_memory_mb(device=None) -> float:
    import torch

    kind = getattr(device, "type", str(device)) if device is not None else "cpu"
    if kind == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def total_memory_bytes(device) -> float:
    """The memory a training process on `device` can use: GPU memory on CUDA, the recommended
    working set of the unified memory on MPS (all of it when torch cannot say), total RAM on a CPU."""
    import psutil

    kind = getattr(device, "type", str(device))
    if kind == "cuda":
        import torch

        return float(torch.cuda.get_device_properties(device).total_memory)
    if kind == "mps":
        import torch

        recommended = getattr(torch.mps, "recommended_max_memory", None)
        if recommended is not None:
            return float(recommended())
    return float(psutil.virtual_memory().total)


def precision_name(dtype) -> str:
    """'fp32', 'bf16' or 'fp16' for a torch dtype."""
    import torch

    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))
