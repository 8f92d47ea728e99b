"""Run-config consistency (SPEC §3): simulate, live_mode, dataset mix, steps, target_kl, seeds, finetune,
and each custom task of the mix: its task file(s) exist and its verifier loads (the files and a workspace
verifier module are evidence, so editing them after the gate passed makes training refuse)."""

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
    worst = max((abs(mix.get(task, 0.0) - t.mix.get(task, 0.0)) * 100 for task in {*mix, *t.mix}), default=0.0)
    res.checks.append(Check.at_most("datasets.mix deviation (pp)", round(worst, 4), t.mix_tol_pp,
                                    f"mix {mix} vs target {t.mix}"))
    res.checks.extend(custom_task_checks(ctx, res))
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


def custom_task_checks(ctx: GateContext, res: GateResult) -> list[Check]:
    """One check per custom task in the mix: its files exist and its verifier resolves (a `python:`
    verifier is imported from the workspace or an installed package)."""
    from rc1.envs.verifiers import resolve_verifier, verifier_file
    from rc1.runtime.errors import ConfigError

    cfg, out = ctx.config, []
    for name, spec in cfg.datasets.tasks.items():
        if cfg.datasets.mix.get(name, 0.0) <= 0:
            continue
        files = [f for f in (spec.path, spec.heldout_path) if f]
        missing = [f for f in files if not ctx.ws.path(f).is_file()]
        res.evidence.extend(Evidence.of(ctx.ws, f) for f in files if f not in missing)
        problem = f"missing {', '.join(missing)}" if missing else ""
        if not problem:
            try:
                resolve_verifier(spec.verifier, root=ctx.ws.root)
            except ConfigError as exc:
                problem = exc.message
            module = verifier_file(spec.verifier, ctx.ws.root)
            if module is not None:
                res.evidence.append(Evidence.of(ctx.ws, module))
        out.append(Check(f"task {name}: files and verifier", spec.verifier, "files exist, verifier loads",
                         not problem, problem or ", ".join(files)))
    return out
