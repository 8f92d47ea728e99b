"""`rc1 eval`, `rc1 report` and `rc1 scale run`: evaluation, the RC1 report, the gated pool expansion."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import command_group, print_checks, workspace
from rc1.runtime.fmt import fmt_pct, fmt_pp, fmt_pp_ci


def _fmt_rate(part: dict | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    lo, hi = (f"{100 * b:.1f}" for b in part["ci95"])
    return f"{fmt_pct(part['rate'])} [{lo}, {hi}] (n={part['n']})"


def _fmt_delta(d: dict | None) -> str:
    if not d or d.get("delta_pp") is None:
        return "n/a"
    return f"{fmt_pp(d['delta_pp'])}, 95% CI {fmt_pp_ci(d['ci95_pp'])}"


def _items_eval(ws, cfg, items: str, **kw) -> None:
    from rc1.eval.harness import run_items_eval

    path, rep = run_items_eval(ws, cfg, items, progress=lambda m: typer.echo(f"  {m}"), **kw)
    st = rep["set"]
    typer.echo(f"{st['path']} (n={st['n']}, sha256 {st['sha256'][:12]}); not judged by any gate:")
    typer.echo(f"  base     success {_fmt_rate(rep['base']['success'])}")
    maj = rep["majority"]
    where = {"training": "the training split's commonest", "evaluated items": "on these items' own labels"}
    typer.echo(f"  majority-class baseline {_fmt_rate(maj['overall'])} ("
               + ", ".join(f"{t} '{m['answer']}': {m['answer_set']} answers, {where[m['source']]}"
                           for t, m in maj["by_task"].items()) + ")")
    for run in rep["runs"]:
        seed = f" seed {run['seed_index']}" if len(rep["runs"]) > 1 else ""
        typer.echo(f"  trained{seed} success {_fmt_rate(run['trained']['success'])}  ({run['checkpoint']['path']})")
        typer.echo(f"    delta vs base      {_fmt_delta(run['delta']['success'])}")
        typer.echo(f"    delta vs majority  {_fmt_delta(run['vs_majority']['success'])}")
    pooled = rep["pooled"]
    if pooled and len(rep["runs"]) > 1:
        p = pooled["success"]
        typer.echo(f"  pooled over {len(rep['runs'])} seeds: {fmt_pp(p['delta_pp'])}, 95% CI {fmt_pp_ci(p['ci95_pp'])}")
    typer.echo(f"wrote {ws.rel(path)}")


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")],
        checkpoint: Annotated[str, typer.Option(help="checkpoint directory, a run directory, or 'latest' (of every "
                                                     "seed run that has one)")] = "latest",
        seed_index: Annotated[Optional[int], typer.Option("--seed-index", min=0, help="only this seed's training run")] = None,
        base_only: Annotated[bool, typer.Option("--base-only", help="evaluate the base model only")] = False,
        n: Annotated[Optional[int], typer.Option("--n", min=1, help="held-out items (stratified; default eval.n_shadow)")] = None,
        batch_size: Annotated[int, typer.Option(min=1, help="episodes generated together")] = 32,
        shadow_only: Annotated[bool, typer.Option("--shadow-only", help="the held-out set only: skip the dev split "
                                                                         "(then best/ is not updated)")] = False,
        items: Annotated[Optional[str], typer.Option("--items", help="only this item file (JSONL: id, task, messages, "
                                                                     "answer), e.g. your own test set → "
                                                                     "reports/eval_items/; no gate reads it")] = None,
    ) -> None:
        """Greedy episodes of the base model and the trained run(s) on the held-out set and the dev split →
        reports/eval_<ts>.json; best/ is chosen on the dev split. With --items FILE: on that file only, reported
        beside the base model and the majority-class answer, never judged by a gate."""
        from rc1.config.load import load_train_config
        from rc1.eval.harness import HELDOUT, run_eval, run_view
        from rc1.runtime.errors import ConfigError
        from rc1.runtime.logs import setup_logging

        ws = workspace().ensure()
        cfg = load_train_config(config, ws)
        setup_logging(ws, console=False)
        if items is not None:
            if n is not None or shadow_only:
                raise ConfigError("--items evaluates that file whole: --n and --shadow-only apply to the held-out set")
            _items_eval(ws, cfg, items, checkpoint=checkpoint, base_only=base_only, seed_index=seed_index,
                        batch_size=batch_size)
            return
        path, rep = run_eval(ws, cfg, checkpoint=checkpoint, base_only=base_only, n=n, batch_size=batch_size,
                             config_path=config, shadow_only=shadow_only, seed_index=seed_index,
                             progress=lambda m: typer.echo(f"  {m}"))
        held_set = rep["sets"][HELDOUT]
        dt = rep["dtype"]
        typer.echo(f"held-out ({held_set['path']}, n={held_set['n']}); eval dtype {dt['eval']} "
                   f"(eval.dtype {dt['requested']}), training dtype {', '.join(dt['train'] or ['n/a'])}:")
        view = run_view(rep, None, HELDOUT)
        mde = view["mde"]["overall"]
        typer.echo(f"  base     success {_fmt_rate(view['base']['success'])}"
                   + (f"; detectable increase (80% power) {100 * mde['mde']:.1f} pp" if mde["mde"] is not None else ""))
        maj = view["majority"]
        typer.echo(f"  majority-class baseline {_fmt_rate(maj['overall'])} ("
                   + ", ".join(f"{t} '{m['answer']}' {100 * m['rate']:.1f}%" for t, m in maj["by_task"].items())
                   + "; on these items' own labels)")
        for run in rep["runs"]:
            v = run_view(rep, run, HELDOUT)
            seed = f" seed {run['seed_index']}" if len(rep["runs"]) > 1 else ""
            end = run["training"]
            typer.echo(f"  trained{seed} success {_fmt_rate(v['trained']['success'])}  ({run['checkpoint']['path']}; "
                       f"run ended: {end['reason'] or 'unknown'}{', STOPPED EARLY' if end['stopped_early'] else ''})")
            typer.echo(f"    delta vs base      {_fmt_delta(v['delta']['success'])}")
            typer.echo(f"    delta vs majority  {_fmt_delta(v['vs_majority']['success'])}")
            best = run.get("best") or {}
            typer.echo(f"    best/ (dev {best.get('metric')}) "
                       + (f"updated: {best['path']}" if best.get("updated") else f"unchanged ({best.get('reason')})"))
        if rep.get("spread"):
            d = rep["spread"][HELDOUT]["delta_pp"]
            typer.echo(f"  across {d['n']} seeds: delta min {d['min']:+.1f} / mean {d['mean']:+.1f} / max {d['max']:+.1f} pp")
        thr = rep["throughput"]
        b, gen = thr["base"], thr["base"].get("generated")
        typer.echo(f"  base: {b['episodes']} episodes; " + "; ".join(
            ([f"cached ({', '.join(b['cached_sets'])})"] if b.get("cached_sets") else [])
            + ([f"generated {gen['episodes']} in {gen['seconds']:.1f} s, {gen['episodes_per_s']:.2f} episodes/s"]
               if gen else [])))
        for run, t in zip(rep["runs"], thr["runs"]):
            typer.echo(f"  {run['checkpoint']['path']}: {t['episodes']} episodes, {t['seconds']:.1f} s, "
                       f"{t['episodes_per_s']:.2f} episodes/s")
        typer.echo(f"wrote {ws.rel(path)}")

    @app.command("drift")
    def drift_cmd(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")],
        seed_index: Annotated[Optional[int], typer.Option("--seed-index", min=0, help="only this seed's training run "
                                                                                      "(default: every seed)")] = None,
    ) -> None:
        """How far each trained run's latest checkpoint drifted from the reference: exact per-token KL on fixed
        prompts with a prompt-level bootstrap CI → reports/drift/seed_<i>.json (the training_done gate reads it)."""
        from rc1.config.load import load_run_gates, load_train_config
        from rc1.eval.drift import measure_drift
        from rc1.runtime.logs import setup_logging

        ws = workspace().ensure()
        cfg = load_train_config(config, ws)
        td = load_run_gates(cfg, ws).training_done
        setup_logging(ws, console=False)
        target = cfg.effective_target_kl
        bound = td.kl_tolerance * target if target is not None else None
        indices = [seed_index] if seed_index is not None else list(range(len(cfg.seed_list)))
        for i in indices:
            path, rep = measure_drift(ws, cfg, i, n_prompts=td.drift_prompts, samples=td.drift_samples, bound=bound,
                                      confidence=td.drift_confidence, progress=lambda m: typer.echo(f"  {m}"))
            tok, seq = rep["per_token"], rep["per_sequence"]
            ci = tok["ci"] or [float("nan")] * 2
            verdict = ("" if bound is None else
                       " — ABOVE the bound (CI lower bound)" if ci[0] > bound else
                       " — point estimate above the bound, CI reaches under it (warning)" if tok["mean"] > bound else
                       " — within the bound")
            typer.echo(f"seed {i} ({rep['checkpoint']['path']}): per-token KL {tok['mean']:.4f} nats, "
                       f"{round(100 * tok['confidence'])}% CI [{ci[0]:.4f}, {ci[1]:.4f}]; per sequence "
                       f"{seq['mean']:.3f}; bound {bound if bound is None else f'{bound:.4g}'}{verdict}")
            typer.echo(f"  {rep['prompts']['n']} prompts x {rep['samples_per_prompt']} answers, {rep['tokens']} tokens, "
                       f"{sum(rep['seconds'].values()):.1f} s; wrote {ws.rel(path)}")

    @app.command("report")
    def report_cmd(
        config: Annotated[Optional[str], typer.Option("--config", "-c", help="run config (relative to the workspace)")] = None,
    ) -> None:
        """(Re)build reports/rc1/rc1_report.md with its PNG plots from the JSON reports."""
        from rc1.config.load import load_train_config
        from rc1.report.build import build_report

        ws = workspace().ensure()
        cfg = load_train_config(config, ws) if config else None
        path = build_report(ws, cfg, config_path=config)
        typer.echo(f"wrote {ws.rel(path)}")

    scale = command_group(app, "scale", "Gated pool expansion (scale_1000, scale_5000).")

    @scale.command("run")
    def scale_run(
        stage: Annotated[str, typer.Option("--stage", help="scale_1000 or scale_5000")],
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")] = "configs/local.yaml",
    ) -> None:
        """Run one expansion stage with its before/after checks (no state change); exit 3 when a check fails."""
        from rc1.config.load import load_run_gates, load_train_config
        from rc1.data.expansion import builder
        from rc1.gates.base import GateContext
        from rc1.gates.registry import run_area
        from rc1.runtime.errors import ConfigError, GateRefused

        ws = workspace().ensure()
        cfg = load_train_config(config, ws)
        gates = load_run_gates(cfg, ws)
        if stage not in gates.scale.stages:
            raise ConfigError(f"--stage {stage!r}: unknown stage; known: {', '.join(gates.scale.stages)}")
        # this command owns the expansion: it hands the gate the builder (the gate itself only reads and measures)
        ctx = GateContext(ws=ws, gates=gates, round=stage, config=cfg, config_path=ws.path(config),
                          extras={"progress": lambda m: typer.echo(f"  {m}"), "expand": builder(ws, cfg, gates.pool)})
        res = run_area("scale", ctx)
        print_checks([res])
        if not res.passed:
            raise GateRefused(f"{stage}: {len(res.failing)} check(s) failed")
