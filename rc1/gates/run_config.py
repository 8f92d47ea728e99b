"""Run-config consistency (SPEC §3): simulate, live_mode, dataset mix, steps, target_kl, seeds, finetune."""

from __future__ import annotations

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence


def evaluate(ctx: GateContext) -> GateResult:
    res = GateResult("run_config")
    cfg, t = ctx.config, ctx.gates.run_config
    if cfg is None:
        res.checks.append(Check("run config", None, "given", False,
                                "no run config: pass --config (e.g. configs/local.yaml)"))
        return res
    if ctx.config_path is not None and ctx.config_path.exists():
        res.evidence.append(Evidence.of(ctx.ws, ctx.config_path))
    gates_rel = ctx.extras.get("gates_path_rel")
    if gates_rel and ctx.ws.path(gates_rel).exists():
        res.evidence.append(Evidence.of(ctx.ws, gates_rel))

    res.checks.append(Check.equals("simulate", cfg.simulate, t.simulate))
    res.checks.append(Check.equals("live_mode", cfg.live_mode, t.live_mode))
    mix = cfg.datasets.mix
    worst = max((abs(mix.get(task, 0.0) - share) * 100 for task, share in t.mix.items()), default=0.0)
    res.checks.append(Check.at_most("datasets.mix deviation (pp)", round(worst, 4), t.mix_tol_pp,
                                    f"mix {mix} vs target {t.mix}"))
    res.checks.append(Check.at_least("steps", cfg.total_steps, t.min_steps))
    kl = cfg.effective_target_kl
    res.checks.append(Check.within("target_kl", kl, t.target_kl_min, t.target_kl_max))
    res.checks.append(Check.at_least("seeds", len(cfg.seed_list), t.min_seeds,
                                     f"seeds {cfg.seed_list}: one training run each (rc1 train --seed-index i); "
                                     "training_done checks that each ran"))
    if t.finetune_method is not None:
        res.checks.append(Check.equals("finetune.method", cfg.finetune.method, t.finetune_method))
    if ctx.gates.profile != "production":
        res.notes.append(f"profile {ctx.gates.profile!r}: thresholds scaled for a laptop ({ctx.gates.note})")
    return res
