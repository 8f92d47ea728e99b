"""What the eval runs on: its device and dtype, the base model, and a checkpoint resolved, verified and loaded
into the model it was trained from (full weights or a LoRA adapter)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

log = logging.getLogger("rc1.eval")


def eval_dtype(cfg: "TrainConfig", device):
    """The eval inference dtype (SPEC §6): `auto` is fp32 on a CPU, whatever the training precision, so the
    same config gives the same result on AVX2 and AVX512 machines; elsewhere the device policy. `bf16` on a
    CPU only where it is native (AVX512-BF16/AMX; emulated it is 3.3x slower), else fp32 with a warning."""
    import torch

    from rc1.runtime.device import dtype_for

    if cfg.eval.dtype == "fp32":
        return torch.float32
    if cfg.eval.dtype == "bf16":
        return torch.bfloat16 if device.type == "cuda" else dtype_for(device, "bf16")
    return dtype_for(device, "auto")


def torch_setup(cfg: "TrainConfig"):
    """(device, eval dtype) of this config, with run.threads applied."""
    import torch

    from rc1.runtime.device import get_device

    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    device = get_device(cfg.run.device_pref)
    return device, eval_dtype(cfg, device)


SHORT_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def dtype_info(cfg: "TrainConfig", device, dtype) -> dict:
    from rc1.runtime.device import cpu_bf16_supported

    name = str(dtype).replace("torch.", "")
    # the training end record's vocabulary (fp32 / bf16 / fp16), so the two dtypes read alike
    return {"eval": SHORT_DTYPE.get(name, name), "requested": cfg.eval.dtype, "device": str(device),
            "cpu_native_bf16": cpu_bf16_supported() if device.type == "cpu" else None}


def load_base(cfg: "TrainConfig", device, dtype):
    from rc1.models.loader import load_model

    return load_model(cfg, device=device, dtype=dtype, for_training=False)


def resolve_checkpoint(ws: Workspace, cfg: "TrainConfig", spec: str, *, run_dir: str | None = None) -> Path:
    """'latest' (the latest of `run_dir`, default cfg.checkpoint_dir), a run directory (its latest) or a step
    directory; verified."""
    from rc1.runtime.checkpoint import LATEST, read_latest, verify_checkpoint

    run_dir = run_dir or cfg.checkpoint_dir
    if spec == LATEST:
        target = read_latest(ws.path(run_dir))
        if target is None:
            raise ConfigError(f"{run_dir}: no `latest` checkpoint to evaluate (train first)")
    else:
        target = ws.path(spec)
        if (target / LATEST).exists() or (target / LATEST).is_symlink():
            target = read_latest(target)
    if target is None or not target.is_dir():
        raise ConfigError(f"checkpoint {spec}: no such checkpoint directory")
    verify_checkpoint(target)  # CheckpointError (a ConfigError) names the corrupt file
    return target.resolve()


def checkpoint_config(cfg: "TrainConfig", ckpt: Path) -> "TrainConfig":
    """The config the checkpoint was trained with: its model/finetune sections define the weights' layout."""
    from pydantic import ValidationError

    from rc1.config.schema import TrainConfig
    from rc1.runtime.checkpoint import META_CONFIG, read_meta

    saved = read_meta(ckpt).get(META_CONFIG)
    if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict):
        return cfg
    saved_base = saved["model"].get("base")
    if saved_base != cfg.model.base:
        raise ConfigError(f"checkpoint {ckpt.name} was trained from {saved_base!r}, "
                          f"but model.base is {cfg.model.base!r}; evaluate it with the config it was trained with")
    try:
        return TrainConfig.model_validate(saved)
    except ValidationError:  # a dump without the keys the trainer leaves out: take only what shapes the weights
        merged = {**cfg.model_dump(mode="json"), "model": saved["model"],
                  "finetune": saved.get("finetune", cfg.finetune.model_dump(mode="json"))}
        return TrainConfig.model_validate(merged)


def load_checkpoint_model(cfg: "TrainConfig", ckpt: Path, device, dtype):
    """Base model + the checkpoint's trainable weights (full weights or LoRA adapter), ready to generate."""
    import torch
    from safetensors.torch import load_file

    from rc1.models.loader import load_model
    from rc1.runtime.checkpoint import ADAPTER_FILE, MODEL_FILE, CheckpointError
    from rc1.runtime.device import to_device

    ccfg = checkpoint_config(cfg, ckpt)
    files = [f for f in (ADAPTER_FILE, MODEL_FILE) if (ckpt / f).exists()]
    if not files:
        raise CheckpointError(f"{ckpt}: holds neither {MODEL_FILE} nor {ADAPTER_FILE}")
    is_adapter = files[0] == ADAPTER_FILE
    # The trainer saved named_parameters() of the model load_model(for_training=True) builds; build the same
    # model so the names line up (peft-wrapped with LoRA), then copy the saved tensors in.
    model, tok = load_model(ccfg, device=device, dtype=dtype, for_training=is_adapter)
    weights = load_file(str(ckpt / files[0]))
    named = dict(model.named_parameters())
    unknown = sorted(set(weights) - set(named))
    if unknown:
        raise CheckpointError(f"{ckpt}: weights do not fit {ccfg.model.base} (unexpected {unknown[:3]})")
    with torch.no_grad():
        for n, t in weights.items():
            named[n].copy_(to_device(t, named[n].device).to(named[n].dtype))
    if is_adapter and hasattr(model, "merge_and_unload") and ccfg.finetune.method != "qlora":
        model = model.merge_and_unload()
    disable = getattr(model, "activation_checkpointing_disable", None) or getattr(model, "gradient_checkpointing_disable", None)
    if disable is not None:
        disable()  # harmless when it was off; generation needs the KV cache
    model.config.use_cache = True
    model.eval()
    log.info("eval: loaded %s (%d tensors from %s)", ckpt, len(weights), files[0])
    model.rc1_loaded = {"weights_file": files[0], "tensors": len(weights), "merged_adapter": is_adapter}
    return model, tok
