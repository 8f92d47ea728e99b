"""Resources: free disk, whether the fine-tune method runs on this device, and whether a step fits its memory.

- free disk (GB) in the workspace.
- fine-tune support on <device>: rc1.models.loader.check_finetune_support (QLoRA where bitsandbytes
  cannot run 4-bit on the device is refused here, naming `finetune.method: lora`; flash-attention
  off CUDA; a model base that cannot be found).
- step memory (GB): rc1.models.memory's estimate of the peak of one training micro-step of the
  pure PyTorch engine for the run config (every row data.max_length tokens, as many generated tokens
  as model.max_new_tokens x the episode's turns allow), against `memory_max_fraction` of the
  device's memory (GPU memory on CUDA, unified memory on MPS, RAM on a CPU). A plan that does not
  fit is refused with the estimate, the memory there is, and the config changes that would fit.
  A base whose shape cannot be known offline is "not measurable", never a pass.

The machine is the one the run would use (`run.device_pref`), or `ctx.extras["machine"]` (a
`Machine`) to judge a plan for another machine.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass

from rc1.gates.base import Check, GateContext, GateResult

log = logging.getLogger("rc1.gates.resources")

MEMORY_CHECK = "step memory (GB)"


@dataclass(frozen=True)
class Machine:
    device: str           # cpu | cuda | mps
    precision: str        # compute dtype of the training forward: fp32 | bf16 | fp16
    memory_bytes: float   # what a training process there can use

    @property
    def label(self) -> str:
        what = {"cuda": "GPU memory", "mps": "unified memory (MPS working set)"}.get(self.device, "RAM")
        return f"{self.device} {what} {self.memory_bytes / 1e9:.1f} GB"


def this_machine(cfg) -> Machine:
    """The device `cfg` would train on, its training precision and its memory."""
    from rc1.runtime.device import (
        dtype_for,
        get_device,
        precision_name,
        total_memory_bytes,
    )

    device = get_device(cfg.run.device_pref)
    return Machine(device.type, precision_name(dtype_for(device, cfg.run.mixed_precision)), total_memory_bytes(device))


def evaluate(ctx: GateContext) -> GateResult:
    root = ctx.ws.root
    probe = root if root.exists() else next((p for p in root.parents if p.exists()), root)
    free_gb = shutil.disk_usage(probe).free / 1e9
    res = GateResult("resources", [Check.greater("free disk (GB)", round(free_gb, 2),
                                                 ctx.gates.resources.min_free_disk_gb,
                                                 f"at {ctx.ws.rel(probe) or '.'}")])
    cfg = ctx.config
    threshold = f"<= {ctx.gates.resources.memory_max_fraction:g} x device memory"
    if cfg is None:
        res.checks.append(Check.not_measurable(MEMORY_CHECK, threshold, "no run config: pass --config"))
        return res
    machine = ctx.extras.get("machine") or this_machine(cfg)
    res.checks.append(_support_check(cfg, machine))
    res.checks.append(_memory_check(cfg, machine, ctx.gates.resources.memory_max_fraction))
    return res


def _support_check(cfg, machine: Machine) -> Check:
    from rc1.models.loader import check_finetune_support

    problems = check_finetune_support(cfg, machine.device)
    name = f"fine-tune support on {machine.device}"
    return Check(name, "ok" if not problems else f"{len(problems)} problem(s)", "none", not problems,
                 "; ".join(problems) if problems else f"finetune.method {cfg.finetune.method} runs on {machine.device}")


def multi_turn_mode(cfg) -> str:
    """strategy.multi_turn as training will resolve it: `auto` reads the chat template (split_turns where it
    rewrites history, as Qwen3's does; concat otherwise), and stays the worst case (split_turns) when the
    tokenizer cannot be loaded offline."""
    if cfg.strategy.multi_turn != "auto":
        return cfg.strategy.multi_turn
    from rc1.envs.env import ChatFormat, resolve_multi_turn
    from rc1.models.loader import load_tokenizer

    try:
        return resolve_multi_turn("auto", ChatFormat(load_tokenizer(cfg.model.base, cfg.model.revision)))
    except Exception as exc:  # noqa: BLE001 - any failure to read the template means: assume the worst case
        log.info("resources: chat template of %s not readable offline (%s): memory judged for split_turns",
                 cfg.model.base, exc)
        return "split_turns"


def _memory_check(cfg, machine: Machine, fraction: float) -> Check:
    from rc1.models.loader import qlora_error
    from rc1.models.memory import (
        CALIBRATION,
        GB,
        estimate,
        knobs_that_fit,
        plan_from_config,
    )
    from rc1.models.shapes import shape_of

    budget = fraction * machine.memory_bytes
    threshold = f"<= {budget / GB:.1f} ({fraction:g} x {machine.label})"
    shape = shape_of(cfg.model.base, cfg.model.revision)
    if shape is None:
        return Check.not_measurable(MEMORY_CHECK, threshold,
                                    f"the shape of model.base {cfg.model.base!r} is not known offline (no local "
                                    "config.json, not in the HF cache, not in rc1.models.shapes' table)")
    mode = multi_turn_mode(cfg)
    plan = plan_from_config(cfg, device=machine.device, precision=machine.precision, multi_turn=mode)
    est = estimate(shape, plan)
    peak = round(est.peak_gb, 1)
    detail = (f"{shape.name} ({shape.params / 1e9:.2f}B params), {plan.describe()}; peak in the {est.peak_phase}: "
              f"{est.largest_terms(4)} GB; calibration: {CALIBRATION.get(machine.device, CALIBRATION['cpu']).source}")
    if est.peak_bytes <= budget:
        return Check(MEMORY_CHECK, peak, threshold, True, detail)
    methods = ("lora", "qlora") if qlora_error(machine.device) is None else ("lora",)
    knobs = knobs_that_fit(cfg, shape, device=machine.device, precision=machine.precision, budget_bytes=budget,
                           methods=methods, multi_turn=mode)
    fix = ("fits with: " + "; ".join(str(k) for k in knobs)) if knobs else "no change of micro-batch, method, generations, " \
        "completion length, turns or checkpointing makes it fit this machine"
    return Check(MEMORY_CHECK, peak, threshold, False,
                 f"estimated {peak} GB does not fit {machine.label} (budget {budget / GB:.1f} GB); {fix}. {detail}")
