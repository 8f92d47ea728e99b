"""`rc1 bench memory --shape qwen3-4b`: peak memory of one GRPO step, QLoRA / LoRA / full fine-tuning.

The model is `random:<shape>` (rc1.models.shapes: random weights of the exact shape, built once,
never downloaded), loaded by rc1's own loader (nf4 quantization as it loads for QLoRA). The step
is rc1's own: PurePTEngine.setup / forward / backward / optimizer_step with the strategy's loss
(GRPOStrategy.loss, or PPOStrategy.loss with --strategy ppo) on a synthetic batch shaped like a
rollout: every row `seq_len` tokens, the last `action_tokens` of each generated. Rows do not share
their prompt, so the engine's plain forward runs (its shared-prompt forward cannot run under
gradient checkpointing).

Each point runs in a fresh process: setup, one warm-up step (AdamW allocates its state in the
first optimizer step), then the measured step, phase by phase (the strategy's reference forward,
forward + backward, optimizer step). Peak = the largest phase peak: the process's peak RSS (Linux
VmHWM, reset before each phase) on a CPU; torch's allocator peak (max_memory_reserved; allocated
is reported too) on CUDA. On a CPU the warm-up is skipped (a step takes minutes there): the first
step is measured and the AdamW state bytes, counted from the optimizer's tensors after it, are
added to the phases before its optimizer step; the JSON says which.

What the machine cannot hold (--budget-gb; default half the RAM, 0.85 of a GPU) or run in reasonable time (a
CPU) is measured with fewer layers and shorter batches, and the production figure is
extrapolated: rc1.models.memory's arithmetic with its per-token factors fitted (non-negative least
squares) to the measured points. Every figure is labelled `measured` or `extrapolated`, with the
fit's inputs and residuals.

Production settings come from a run config (default configs/ppo_scale.yaml): prompts_per_step x
num_generations rows, model.max_new_tokens generated tokens per row in one turn, rows of
data.max_length tokens, gradient checkpointing and LoRA r / targets as configured.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rc1.models.memory import (
    CALIBRATION,
    GB,
    Calibration,
    MemoryPlan,
    episode_turns,
    estimate,
    plan_from_config,
    with_setting,
)
from rc1.models.shapes import SHAPES, ModelShape
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError

SHAPE_BASES = {"qwen3-4b": "random:qwen3-4b", "qwen3-tiny": "random:qwen3-tiny",
               "smollm2-135m-instruct": "embedded:smollm2-135m-instruct"}  # the embedded default's model
METHODS = ("qlora", "lora", "full")
CPU_FULL_DEPTH_TOKENS = 256   # a 4B step on 2 CPU cores: ~5 min per 256 tokens


@dataclass(frozen=True)
class Point:
    """One measured step: a method, a layer count and a batch."""

    method: str
    layers: int
    sequences: int
    seq_len: int
    action_tokens: int
    gradient_checkpointing: bool = True
    warmup: bool = True            # False: first step + AdamW state bytes (full-depth points on a CPU)
    micro_batch_size: int | None = None   # rows per forward/backward (run.micro_batch_size); None: all at once

    @property
    def label(self) -> str:
        micro = f" micro={self.micro_batch_size}" if self.micro_batch_size else ""
        return (f"{self.method} L={self.layers} {self.sequences}x{self.seq_len} ({self.action_tokens} gen) "
                f"gc={'on' if self.gradient_checkpointing else 'off'}{micro}")


# ----------------------------------------------------------------------------- child process
def _rss_peak_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _reset_rss_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:  # "5": reset the peak RSS to the current RSS (Linux >= 4.0)
        fh.write("5")


def _model_tensor_bytes(model) -> int:
    """Bytes of the model's parameters and buffers, nf4 quantization state included (each storage once)."""
    import torch

    seen: set[int] = set()
    total = 0

    def add(t) -> None:
        nonlocal total
        if torch.is_tensor(t) and t.device.type != "meta" and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += t.untyped_storage().nbytes()

    for t in list(model.parameters()) + list(model.buffers()):
        add(t)
        qs = getattr(t, "quant_state", None)
        for st in (qs, getattr(qs, "state2", None)):
            for name in ("absmax", "code", "offset"):
                add(getattr(st, name, None))
    return total


def _synthetic_batch(engine, point: Point, vocab: int, seed: int):
    """A rollout-shaped batch: rows of seq_len random tokens, the last action_tokens generated; each row an
    episode of its own (one turn)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    B, T, A = point.sequences, point.seq_len, point.action_tokens
    ids = torch.randint(0, vocab, (B, T), generator=g)
    attn = torch.ones((B, T), dtype=torch.long)
    act = torch.zeros((B, T - 1), dtype=torch.float32)
    act[:, T - 1 - A:] = 1.0  # shifted grid: position t scores token t+1
    from rc1.engines.contract import PlanTensors

    return PlanTensors(**engine.to_device({"input_ids": ids, "attention_mask": attn, "action_mask": act,
                                           "episode": torch.arange(B)}))


def _plan(engine, strategy, strategy_name: str, t):
    """The StepPlan the strategy would hand the recipe for batch `t` (its plan() without the rollout)."""
    import torch

    from dataclasses import replace

    from rc1.engines.contract import StepPlan
    from rc1.strategies.common import forward_rows
    from rc1.strategies.rl_math import token_weights

    B = t.rows
    g = torch.Generator().manual_seed(1)
    kw = {"temperature": engine.cfg.model.temperature}
    micro = engine.micro_batch_size  # the plan's forwards run in the loss's micro-batches, as the strategies' do
    t = replace(t, token_weight=token_weights(t.action_mask))
    with torch.no_grad():
        if strategy_name == "ppo":
            cur = forward_rows(engine, t, micro, hidden=True, **kw)
            ref = forward_rows(engine, t, micro, reference=True, **kw).logp
            mask = t.action_mask
            t = replace(t, old_logp=cur.logp, old_values=strategy.values(cur.hidden), ref_logp=ref,
                        advantages=engine.to_device(torch.randn(mask.shape, generator=g)) * mask,
                        returns=engine.to_device(torch.randn(mask.shape, generator=g)) * mask)
        else:
            t = replace(t, advantages=engine.to_device(torch.randn(B, generator=g)))
            if strategy.measure_kl:
                t = replace(t, ref_logp=forward_rows(engine, t, micro, reference=True, **kw).logp)
    return StepPlan(tensors=t, loss_fn=strategy.loss)


def measure_point(point: Point, base_dir: str, settings: dict, device_pref: list[str]) -> dict:
    """Child process: set the engine up on `base_dir` and measure one step's peak (see the module docstring)."""
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.engines.pure_pt import PurePTEngine
    from rc1.strategies.grpo import GRPOStrategy
    from rc1.strategies.ppo import PPOStrategy

    t0 = time.perf_counter()
    strategy_name = settings["strategy"]
    cfg = TrainConfig.model_validate({
        "run": {"device_pref": device_pref, "max_steps": 10, "mixed_precision": "auto",
                "micro_batch_size": point.micro_batch_size},
        "model": {"base": base_dir, "gradient_checkpointing": point.gradient_checkpointing,
                  "max_new_tokens": point.action_tokens,
                  "lora": {"enable": point.method != "full", "r": settings["lora_r"], "alpha": 2 * settings["lora_r"],
                           "dropout": settings["lora_dropout"], "target_modules": settings["lora_targets"]}},
        "finetune": {"method": point.method},
        "data": {"max_length": point.seq_len},
        "strategy": {"name": strategy_name, "num_generations": 2, "prompts_per_step": max(1, -(-point.sequences // 2)),
                     "kl_coef": settings["kl_coef"]},
        "engine": {"lr": 1e-6}})
    engine = PurePTEngine()
    engine.setup(cfg)
    device = engine.device
    strategy = (PPOStrategy if strategy_name == "ppo" else GRPOStrategy)(cfg, None)
    strategy.attach(engine.policy())
    setup_s = time.perf_counter() - t0
    rss_after_setup = _rss_bytes()
    tensors_after_setup = _model_tensor_bytes(engine.model) + (
        _model_tensor_bytes(engine.reference_model) if engine.reference_model is not None else 0)
    vocab = int(engine.model.config.get_text_config().vocab_size)
    batch = _synthetic_batch(engine, point, vocab, seed=0)

    def step(measure: bool) -> dict[str, float]:
        """One step (the strategy's plan, backward, optimizer step); with `measure`, each phase's peak."""
        peaks: dict[str, float] = {}
        phases = (("plan (reference forward)", lambda: _plan(engine, strategy, strategy_name, batch)),
                  ("forward + backward", lambda: engine.backward(plan, scale=1.0)),
                  ("optimizer step", engine.optimizer_step))
        plan = None
        for name, fn in phases:
            if measure:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                _reset_rss_peak()
            res = fn()
            if name.startswith("plan"):
                plan = res
            if measure:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                    peaks[name] = torch.cuda.max_memory_reserved(device) / GB
                    peaks[name + " (allocated)"] = torch.cuda.max_memory_allocated(device) / GB
                else:
                    peaks[name] = _rss_peak_bytes() / GB
        return peaks

    warm_s = 0.0
    if point.warmup:
        t1 = time.perf_counter()
        step(measure=False)
        warm_s = time.perf_counter() - t1
    rss_before = _rss_bytes()
    t1 = time.perf_counter()
    peaks = step(measure=True)
    step_s = time.perf_counter() - t1
    adam = sum(v.numel() * v.element_size() for st in engine.optimizer.state.values() for v in st.values()
               if torch.is_tensor(v) and v.dim() > 0) / GB
    if not point.warmup:  # the first step ran its forward/backward without AdamW state; the steady state holds it
        for k in list(peaks):
            if not k.startswith("optimizer"):
                peaks[k] += adam
    main = [k for k in peaks if not k.endswith("(allocated)")]
    phase = max(main, key=lambda k: peaks[k])
    out = {"point": asdict(point), "label": point.label, "device": str(device), "precision": engine.precision,
           "peak_gb": peaks[phase], "peak_phase": phase, "phase_peaks_gb": {k: round(v, 3) for k, v in peaks.items()},
           "peak_measure": ("torch.cuda.max_memory_reserved" if device.type == "cuda" else "peak RSS (VmHWM)")
                           + " per phase of the measured step"
                           + ("" if point.warmup else "; first step, AdamW state bytes added to the phases before "
                                                      "the optimizer step"),
           "rss_after_setup_gb": rss_after_setup / GB, "model_tensors_gb": tensors_after_setup / GB,
           "rss_before_step_gb": rss_before / GB, "adam_state_gb": adam,
           "setup_s": round(setup_s, 1), "warmup_step_s": round(warm_s, 1), "step_s": round(step_s, 1)}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


class PointFailed(RuntimeError):
    pass


def _child_main(conn, fn, args) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as exc:  # reported to the parent as one line: an OOM is a result, not a crash
        conn.send(("error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"))
    finally:
        conn.close()


def _in_child(fn, *args):
    """fn(*args) in a fresh spawned process (a clean peak); PointFailed when it raises or is killed (OOM killer)."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(send, fn, args))
    proc.start()
    send.close()
    try:
        status, value = recv.recv()
    except EOFError:
        proc.join()
        raise PointFailed(f"the measuring process died (exit code {proc.exitcode}"
                          f"{', killed by signal %d: out of memory?' % -proc.exitcode if (proc.exitcode or 0) < 0 else ''})")
    proc.join()
    if status != "ok":
        raise PointFailed(value)
    return value


# ----------------------------------------------------------------------------- plans, fit
def point_plan(point: Point, device: str, precision: str, settings: dict) -> MemoryPlan:
    rows = min(point.sequences, point.micro_batch_size or point.sequences)
    return MemoryPlan(method=point.method, device=device, precision=precision, sequences=rows,
                      batch_rows=point.sequences, seq_len=point.seq_len, action_tokens=point.action_tokens,
                      gen_rows=0, gen_prompts=0,
                      gradient_checkpointing=point.gradient_checkpointing, lora_r=settings["lora_r"],
                      lora_targets=tuple(settings["lora_targets"]),
                      reference=settings["strategy"] == "ppo" or settings["kl_coef"] > 0,
                      value_head=settings["strategy"] == "ppo")


FACTORS = ("overhead_bytes", "layer_gc", "layer_nogc", "logits_copies", "embedding_grad_copies")


def fit_calibration(shape: ModelShape, rows: list[dict], device: str, precision: str, settings: dict,
                    base: Calibration) -> tuple[Calibration, list[dict]]:
    """Fit the factors the arithmetic cannot count (rc1.models.memory.Calibration) to the measured peaks:
    least squares on relative errors, factors >= 0; a factor that no measured point depends on keeps
    its prior value. Returns the fitted calibration and every point's error before and after."""
    import numpy as np
    from scipy.optimize import least_squares

    plans = [(shape.with_layers(r["point"]["layers"]), point_plan(Point(**r["point"]), device, precision, settings))
             for r in rows]
    measured = np.array([r["peak_gb"] * GB for r in rows])
    scale = np.array([GB] + [1.0] * (len(FACTORS) - 1))  # overhead in GB, the rest are plain factors
    prior = np.array([getattr(base, f) for f in FACTORS]) / scale

    def predict(x) -> np.ndarray:
        cal = replace(base, **dict(zip(FACTORS, x * scale)))
        return np.array([estimate(s, p, cal).train_bytes for s, p in plans])

    p0 = predict(prior)
    free = [j for j in range(len(FACTORS))
            if np.any(np.abs(predict(prior + np.eye(len(FACTORS))[j]) - p0) > 1e3)]

    def residuals(z) -> np.ndarray:
        x = prior.copy()
        x[free] = z
        return predict(x) / measured - 1.0

    x = prior.copy()
    if free:  # the peak is a max over phases, so the cost has kinks: start from several points, keep the best
        starts = [np.maximum(prior[free], 1e-3) * k for k in (1.0, 0.5, 2.0)] + [np.ones(len(free))]
        best = min((least_squares(residuals, x0, bounds=(0, np.inf)) for x0 in starts), key=lambda r: r.cost)
        x[free] = best.x
    fitted = replace(base, **dict(zip(FACTORS, (float(v) for v in x * scale))),
                     source=f"fitted by rc1 bench memory on {len(rows)} measured steps ({device}, {precision})")
    after, before = predict(x), p0
    points = [{"label": r["label"], "measured_gb": round(r["peak_gb"], 3),
               "fitted_estimate_gb": round(a / GB, 3), "error_pct": round(100 * (a / GB - r["peak_gb"]) / r["peak_gb"], 1),
               "shipped_estimate_gb": round(b / GB, 3),
               "shipped_error_pct": round(100 * (b / GB - r["peak_gb"]) / r["peak_gb"], 1)}
              for r, a, b in zip(rows, after, before)]
    return fitted, points


# ----------------------------------------------------------------------------- the grid
def calibration_points(shape: ModelShape, methods: tuple[str, ...], quick: bool, warmup: bool) -> list[Point]:
    """Reduced-depth points that separate the fitted factors: tokens per row, generated tokens (logits),
    layers, checkpointing on and off. Sized for minutes per point on 2 CPU cores at the 4B shape."""
    L = 1 if shape.layers > 4 else min(2, shape.layers)
    main = "lora" if "lora" in methods else methods[0]
    if quick:  # one point per method, then one per factor: the logits (which rule long completions), the layers
        grid = [Point(m, L, 4, 64, 16, warmup=warmup) for m in methods]
        grid += [Point(main, L, 4, 512, 448, warmup=warmup), Point(main, L, 4, 512, 32, warmup=warmup),
                 Point(main, L, 4, 256, 32, gradient_checkpointing=False, warmup=warmup)]
        return grid
    grid = []
    for m in methods:
        grid += [Point(m, L, 4, 256, 64, warmup=warmup), Point(m, L, 4, 512, 128, warmup=warmup)]
    grid += [Point(main, L, 4, 256, 192, warmup=warmup),          # generated-token heavy: the logits
             Point(main, L, 2, 1024, 32, warmup=warmup),          # token heavy: the layer activations
             Point(main, L, 4, 256, 64, gradient_checkpointing=False, warmup=warmup),
             Point(main, L, 4, 512, 128, gradient_checkpointing=False, warmup=warmup)]
    if shape.layers >= 2 * L:
        grid.append(Point(main, 2 * L, 4, 512, 128, warmup=warmup))
    return grid


def full_depth_point(shape: ModelShape, method: str, prod: MemoryPlan, device: str, precision: str,
                     settings: dict, budget: float, cal: Calibration) -> Point | None:
    """The production step of `method` at full depth, halved (rows, then lengths) until it fits the budget
    (and, on a CPU, CPU_FULL_DEPTH_TOKENS tokens); None when even 1 row x 64 tokens does not fit."""
    p = Point(method, shape.layers, prod.sequences, prod.seq_len, prod.action_tokens,
              prod.gradient_checkpointing, warmup=device != "cpu")
    while True:
        fits = estimate(shape, point_plan(p, device, precision, settings), cal).train_bytes <= budget
        small_enough = device != "cpu" or p.sequences * p.seq_len <= CPU_FULL_DEPTH_TOKENS
        if fits and small_enough:
            return p
        if p.sequences > 2:
            p = replace(p, sequences=p.sequences // 2)
        elif p.seq_len > 64:
            p = replace(p, seq_len=p.seq_len // 2, action_tokens=max(8, p.action_tokens // 2))
        else:
            return None


def config_worst_point(cfg, shape: ModelShape, device: str, precision: str) -> Point:
    """The worst step the config allows (what the resources gate judges: every row data.max_length tokens, every
    turn of the longest episodes), at full depth, in the config's micro-batches."""
    from rc1.gates.resources import multi_turn_mode

    plan = plan_from_config(cfg, device=device, precision=precision, multi_turn=multi_turn_mode(cfg))
    return Point(cfg.finetune.method, shape.layers, plan.batch_rows, plan.seq_len, plan.action_tokens,
                 plan.gradient_checkpointing, warmup=device != "cpu", micro_batch_size=cfg.run.micro_batch_size)


def production_results(shape: ModelShape, prod: dict[str, MemoryPlan], measured: list[dict],
                       fitted: Calibration) -> dict[str, dict]:
    """Per method: the production step's peak, `measured` when that exact step ran at full depth, else
    `extrapolated` (the estimate with the fitted calibration); which memory sizes it fits (0.9 x)."""
    results = {}
    for m, plan in prod.items():
        same = [r for r in measured if Point(**r["point"]) == Point(m, shape.layers, plan.sequences, plan.seq_len,
                                                                     plan.action_tokens, plan.gradient_checkpointing,
                                                                     r["point"]["warmup"])]
        e = estimate(shape, plan, fitted)
        peak = same[0]["peak_gb"] if same else e.train_bytes / GB
        results[m] = {"peak_gb": round(peak, 2), "kind": "measured" if same else "extrapolated",
                      "generation_gb_estimate": round(e.generation_bytes / GB, 2),
                      "fits_0.9x": {f"{n} GB": max(peak * GB, e.generation_bytes) <= 0.9 * n * GB
                                    for n in (16, 24, 32, 80)},
                      "largest_terms_gb": e.largest_terms(4), "estimate": e.to_dict()}
        depth = [r for r in measured if r["point"]["method"] == m and r["point"]["layers"] == shape.layers]
        if depth:
            results[m]["full_depth_measured"] = []
            for r in depth:
                p = r["point"]
                at = replace(plan, sequences=p["sequences"], seq_len=p["seq_len"], action_tokens=p["action_tokens"])
                results[m]["full_depth_measured"].append({
                    "label": r["label"], "peak_gb": round(r["peak_gb"], 3),
                    "estimate_gb": round(estimate(shape, at, fitted).train_bytes / GB, 3), "step_s": r["step_s"]})
    return results


# ----------------------------------------------------------------------------- run
def _production_config(ws, config: str | None):
    from rc1.config.load import load_train_config

    path = config or "configs/ppo_scale.yaml"
    if config is None and not ws.path(path).exists():
        path = str(Path(__file__).resolve().parents[2] / path)
    return load_train_config(path, ws), str(path)


def _production_settings(cfg) -> dict:
    s, m = cfg.strategy, cfg.model
    return {"prompts_per_step": s.prompts_per_step, "num_generations": s.num_generations,
            "max_new_tokens": m.max_new_tokens, "max_length": cfg.data.max_length,
            "gradient_checkpointing": m.gradient_checkpointing, "lora_r": m.lora.r,
            "lora_targets": list(m.lora.target_modules), "lora_dropout": m.lora.dropout, "kl_coef": s.kl_coef,
            "config_strategy": s.name, "finetune_method": cfg.finetune.method,
            "episode_turns": episode_turns(cfg), "multi_turn": s.multi_turn}


def _device(device: str | None):
    from rc1.runtime.device import dtype_for, get_device

    pref = [device] if device else ["cuda", "mps", "cpu"]
    dev = get_device(pref)
    if device and dev.type != device:
        raise ConfigError(f"--device {device}: not available on this machine (found {dev.type})")
    import torch

    precision = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype_for(dev, "auto")]
    return dev.type, precision


def _machine_bytes(device: str) -> float:
    import psutil

    if device == "cuda":
        import torch

        return float(torch.cuda.get_device_properties(0).total_memory)
    return float(psutil.virtual_memory().total)


def run(ws, quick: bool = False, *, shape: str = "qwen3-4b", methods: list[str] | tuple[str, ...] = METHODS,
        config: str | None = None, max_new_tokens: int | None = None, group_size: int | None = None,
        prompts: int | None = None, max_length: int | None = None, gradient_checkpointing: bool | None = None,
        strategy: str = "grpo", budget_gb: float | None = None, device: str | None = None,
        full_depth: list[str] | tuple[str, ...] | None = None) -> dict:
    """`full_depth`: the methods whose production step is also measured at full depth (shrunk to the budget);
    default every method, none with `quick`."""
    if shape not in SHAPE_BASES:
        raise ConfigError(f"--shape {shape!r}: unknown; known: {', '.join(SHAPE_BASES)}")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ConfigError(f"--method {','.join(methods)}: expected some of {', '.join(METHODS)}")
    if strategy not in ("grpo", "ppo"):
        raise ConfigError(f"--strategy {strategy!r}: expected grpo or ppo")
    methods = tuple(m for m in METHODS if m in methods)
    full_depth = ((() if quick else methods) if full_depth is None else tuple(full_depth))
    if any(m not in methods for m in full_depth):
        raise ConfigError(f"--full-depth {','.join(full_depth)}: expected some of the measured methods "
                          f"({','.join(methods)}) or none")
    run_cfg, config_path = _production_config(ws, config)
    for dotted, val in (("model.max_new_tokens", max_new_tokens), ("strategy.num_generations", group_size),
                        ("strategy.prompts_per_step", prompts), ("data.max_length", max_length),
                        ("model.gradient_checkpointing", gradient_checkpointing)):
        if val is not None:
            run_cfg = with_setting(run_cfg, dotted, val)
    settings = _production_settings(run_cfg)
    if settings["max_new_tokens"] >= settings["max_length"]:
        raise ConfigError(f"max_new_tokens {settings['max_new_tokens']} must be below max_length {settings['max_length']}")
    settings["strategy"] = strategy
    dev, precision = _device(device)
    if dev == "mps" or (dev == "cpu" and not Path("/proc/self/clear_refs").exists()):
        raise ConfigError(f"rc1 bench memory measures peaks with Linux's resettable peak RSS (CPU) or torch's CUDA "
                          f"allocator; this {dev} machine has neither (the resources gate's estimate still applies)")
    machine = _machine_bytes(dev)
    # a CPU is shared with the rest of the machine; a GPU is the point's alone (its host copy is in RAM)
    budget = (budget_gb * GB) if budget_gb else (0.85 if dev == "cuda" else 0.5) * machine
    full_shape = SHAPES[shape]
    cal = CALIBRATION.get(dev, CALIBRATION["cpu"])

    from rc1.models.loader import resolve_base

    t0 = time.perf_counter()
    base_dir = resolve_base(SHAPE_BASES[shape])
    build_s = time.perf_counter() - t0
    rows = settings["prompts_per_step"] * settings["num_generations"]
    prod = {m: MemoryPlan(method=m, device=dev, precision=precision, sequences=rows, seq_len=settings["max_length"],
                          action_tokens=settings["max_new_tokens"], gen_rows=rows, gen_prompts=settings["prompts_per_step"],
                          gradient_checkpointing=settings["gradient_checkpointing"], lora_r=settings["lora_r"],
                          lora_targets=tuple(settings["lora_targets"]),
                          reference=strategy == "ppo" or settings["kl_coef"] > 0, value_head=strategy == "ppo")
            for m in methods}

    points = [p for m in full_depth
              if (p := full_depth_point(full_shape, m, prod[m], dev, precision, settings, budget, cal))]
    points += calibration_points(full_shape, methods, quick, warmup=dev != "cpu")
    worst_point = config_worst_point(run_cfg, full_shape, dev, precision)
    if worst_point.method in methods:  # the step the resources gate judges for the config, as configured
        points.insert(0, worst_point)
    skipped, failed, measured = [], [], []
    partial = ws.reports / "bench" / "memory.partial.json"  # the points so far, should a long run be cut off
    print(f"memory bench: {shape} ({full_shape.params / 1e9:.2f}B params) on {dev} ({precision}); "
          f"budget {budget / GB:.1f} GB of {machine / GB:.1f} GB; {len(points)} points")
    with tempfile.TemporaryDirectory(prefix="rc1-bench-memory-") as scratch:
        views: dict[int, str] = {full_shape.layers: str(base_dir)}
        for p in points:
            est = estimate(full_shape.with_layers(p.layers), point_plan(p, dev, precision, settings), cal).train_bytes
            if est * 1.15 > budget:
                skipped.append({"label": p.label, "estimate_gb": round(est / GB, 2), "why": "over the budget"})
                continue
            if p.layers not in views:
                from rc1.models.shapes import layer_view

                views[p.layers] = str(layer_view(Path(base_dir), p.layers, Path(scratch) / f"L{p.layers}"))
            try:
                r = _in_child(measure_point, p, views[p.layers], settings, [dev])
            except PointFailed as exc:
                failed.append({"label": p.label, "estimate_gb": round(est / GB, 2), "error": str(exc)})
                print(f"  {p.label:58} FAILED: {exc}")
                continue
            r["estimate_before_fit_gb"] = round(est / GB, 3)
            measured.append(r)
            atomic_write_json(partial, {"settings": settings, "measured": measured, "failed": failed})
            print(f"  {p.label:58} peak {r['peak_gb']:7.2f} GB (estimate {est / GB:6.2f}); step {r['step_s']:.0f} s, "
                  f"point {r['wall_s']:.0f} s")
    if not measured:
        raise ConfigError(f"no point fits the budget of {budget / GB:.1f} GB; raise --budget-gb")
    fitted, residuals = fit_calibration(full_shape, measured, dev, precision, settings, cal)
    from rc1.gates.resources import multi_turn_mode

    worst = {m: plan_from_config(with_setting(run_cfg, "finetune.method", m), device=dev, precision=precision,
                                 multi_turn=multi_turn_mode(run_cfg)) for m in methods}

    results = production_results(full_shape, prod, measured, fitted)
    out = {"area": "memory", "shape": full_shape.to_dict(), "device": dev, "precision": precision, "strategy": strategy,
           "config": config_path, "settings": settings,
           "production_step": f"{rows} rows x {settings['max_length']} tokens, {settings['max_new_tokens']} generated "
                              f"per row (one turn), gradient checkpointing "
                              f"{'on' if settings['gradient_checkpointing'] else 'off'}",
           "machine_memory_gb": round(machine / GB, 2), "budget_gb": round(budget / GB, 2),
           "model_build_or_verify_s": round(build_s, 1), "methods": results,
           "config_worst_case_gb": {m: round(estimate(full_shape, worst[m], fitted).peak_gb, 1) for m in methods},
           "config_worst_case_measured": next(({"label": r["label"], "peak_gb": round(r["peak_gb"], 3),
                                                "estimate_before_fit_gb": r["estimate_before_fit_gb"]}
                                               for r in measured if Point(**r["point"]) == worst_point), None),
           "config_worst_case": f"what the resources gate judges: {worst[methods[0]].describe()} "
                                f"({settings['episode_turns']} turns per episode, multi_turn {settings['multi_turn']})",
           "fit": {"calibration": asdict(fitted), "shipped_calibration": asdict(cal), "points": residuals},
           "measured": measured, "skipped": skipped, "failed": failed, "load_avg_1m": os.getloadavg()[0]}
    print(f"\nproduction step ({out['production_step']}) of {shape}, {dev} {precision}:")
    print(f"{'method':8} {'peak GB':>9}  {'kind':12} largest terms (GB)")
    for m, r in results.items():
        print(f"{m:8} {r['peak_gb']:9.1f}  {r['kind']:12} {r['largest_terms_gb']}")
    print(f"fit: {fitted.source}: overhead {fitted.overhead_bytes / GB:.2f} GB, layer_gc {fitted.layer_gc:.2f}, "
          f"layer_nogc {fitted.layer_nogc:.2f}, logits_copies {fitted.logits_copies:.2f}, embedding_grad_copies "
          f"{fitted.embedding_grad_copies:.2f}; worst point error "
          f"{max(abs(r['error_pct']) for r in residuals):.1f}%")
    return out

