"""`rc1 eval`, `rc1 report` and `rc1 scale run`: evaluation, the RC1 report, the gated pool expansion."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import print_checks, workspace


def _fmt_rate(part: dict | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    lo, hi = part["ci95"]
    return f"{100 * part['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] (n={part['n']})"


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")],
        checkpoint: Annotated[str, typer.Option(help="checkpoint directory, a run directory, or 'latest'")] = "latest",
        base_only: Annotated[bool, typer.Option("--base-only", help="evaluate the base model only")] = False,
        n: Annotated[Optional[int], typer.Option("--n", min=1, help="evaluate the first N shadow items (default eval.n_shadow)")] = None,
        batch_size: Annotated[int, typer.Option(min=1, help="episodes generated together")] = 32,
        shadow_only: Annotated[bool, typer.Option("--shadow-only", help="skip eval_min (the held-out shadow set only)")] = False,
    ) -> None:
        """Greedy episodes of the base model and a checkpoint on the shadow set and eval_min → reports/ppo_eval_<ts>.json."""
        from rc1.config.load import load_train_config
        from rc1.eval.harness import HELDOUT, run_eval
        from rc1.runtime.logs import setup_logging

        ws = workspace().ensure()
        cfg = load_train_config(config, ws)
        setup_logging(ws, console=False)
        path, rep = run_eval(ws, cfg, checkpoint=checkpoint, base_only=base_only, n=n, batch_size=batch_size,
                             config_path=config, shadow_only=shadow_only, progress=lambda m: typer.echo(f"  {m}"))
        held = rep["results"][HELDOUT]
        typer.echo(f"held-out ({rep['sets'][HELDOUT]['path']}, n={rep['sets'][HELDOUT]['n']}):")
        typer.echo(f"  base    success {_fmt_rate(held['base']['success'])}")
        if held["trained"]:
            d = held["delta"]["success"]
            ci = d["ci95_pp"]
            typer.echo(f"  trained success {_fmt_rate(held['trained']['success'])}  ({rep['checkpoint']['path']})")
            typer.echo(f"  delta   {d['delta_pp']:+.1f} pp, 95% CI [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else "  delta   n/a")
            best = rep.get("best") or {}
            typer.echo(f"  best/   {'updated: ' + best['path'] if best.get('updated') else 'unchanged (' + str(best.get('reason')) + ')'}")
        for who, thr in rep["throughput"].items():
            if thr:
                eps = thr.get("episodes_per_s")
                typer.echo(f"  {who}: {thr['episodes']} episodes, "
                           + ("cached" if thr.get("cached") else f"{thr['seconds']:.1f} s, {eps:.2f} episodes/s"))
        typer.echo(f"wrote {ws.rel(path)}")

    @app.command("report")
    def report_cmd(
        config: Annotated[Optional[str], typer.Option("--config", "-c", help="run config (relative to the workspace)")] = None,
    ) -> None:
        """(Re)build reports/rc1/rc1_report.md with its PNG plots from the JSON reports."""
        from rc1.config.load import load_train_config
        from rc1.eval.report import build_report

        ws = workspace().ensure()
        cfg = load_train_config(config, ws) if config else None
        path = build_report(ws, cfg, config_path=config)
        typer.echo(f"wrote {ws.rel(path)}")

    scale = typer.Typer(help="Gated pool expansion (scale_1000, scale_5000).", no_args_is_help=True)
    app.add_typer(scale, name="scale")

    @scale.command("run")
    def scale_run(
        stage: Annotated[str, typer.Option("--stage", help="scale_1000 or scale_5000")],
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")] = "configs/local.yaml",
    ) -> None:
        """Run one expansion stage with its before/after checks (no state change); exit 3 when a check fails."""
        from rc1.config.load import load_gates_config, load_train_config
        from rc1.gates.base import GateContext
        from rc1.gates.registry import run_area
        from rc1.runtime.errors import ConfigError, GateRefused

        ws = workspace().ensure()
        cfg = load_train_config(config, ws)
        gates = load_gates_config(cfg.gates, ws, tasks=cfg.datasets.tasks)
        if stage not in gates.scale.stages:
            raise ConfigError(f"--stage {stage!r}: unknown stage; known: {', '.join(gates.scale.stages)}")
        ctx = GateContext(ws=ws, gates=gates, round=stage, config=cfg, config_path=ws.path(config),
                          extras={"progress": lambda m: typer.echo(f"  {m}")})
        res = run_area("scale", ctx)
        print_checks([res])
        if not res.passed:
            raise GateRefused(f"{stage}: {len(res.failing)} check(s) failed")
