"""`rc1 status`, `rc1 advance --to STATE`, `rc1 reset`: the gated state machine from the shell."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from rc1.cli.common import print_checks, workspace
from rc1.runtime.errors import EXIT_GATE


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
               lines: Annotated[int, typer.Option(help="metrics lines to show")] = 20) -> None:
        """State, last gate results, the last metrics lines, checkpoints and operations figures."""
        from rc1.machine.status import collect_status

        st = collect_status(workspace(), lines)
        if as_json:
            typer.echo(json.dumps(st, indent=2, default=str))
            return
        typer.echo(f"workspace: {st['workspace']}")
        typer.echo(f"state: {st['state']}" + (f"  (next: {st['next']['state']} via gate {st['next']['gate']})"
                                              if st["next"] else "  (final)"))
        for name, doc in st["gates"].items():
            fails = [c for r in doc.get("results", []) for c in r.get("checks", []) if not c.get("passed")]
            typer.echo(f"gate {name}: {'PASS' if doc.get('passed') else 'FAIL'} at {doc.get('time')}"
                       + (f" ({len(fails)} failing: {', '.join(c['name'] for c in fails[:4])}"
                          f"{'…' if len(fails) > 4 else ''})" if fails else ""))
        ops = st["ops"]
        rate = ops["judge_cache_hit_rate"]
        typer.echo(f"judge: cache hit rate {rate if rate is not None else 'n/a'}"
                   f"{'  ALERT >= 0.95' if ops['judge_cache_alert'] else ''}, 429 rate {ops['judge_429_rate']}, "
                   f"avg latency {ops['judge_latency_avg_s']}")
        fp = ops["fingerprints"]
        typer.echo(f"checkpoints verified/written: {ops['checkpoints_verified']}/{ops['checkpoints_written']}; "
                   f"fingerprints: {fp['with_sha256']}/{fp['artifacts']} artifacts")
        for c in st["checkpoints"]:
            flags = " ".join(f for f, on in (("latest", c["latest"]), ("best", c["best"])) if on)
            typer.echo(f"  {c['path']}  step {c['step']}  {'verified' if c['verified'] else 'UNVERIFIED'} {flags}")
        if st["metrics_tail"]:
            typer.echo(f"last {len(st['metrics_tail'])} metrics lines:")
            for m in st["metrics_tail"]:
                typer.echo("  " + json.dumps(m, default=str))
        else:
            typer.echo("metrics: none yet (reports/metrics.jsonl)")

    @app.command("advance")
    def advance(
        to: Annotated[str, typer.Option("--to", help="target state (round1, round2, training, eval, scale_1000, scale_5000)")],
        config: Annotated[Optional[str], typer.Option("--config", "-c", help="run config (relative to the workspace)")] = None,
        accept_early_stop: Annotated[Optional[str], typer.Option(
            "--accept-early-stop", metavar="WHY",
            help="accept that this config's training run(s) stopped early, for the RC1 gate (audited; "
                 "names the run's end record, so it never applies to a later run)")] = None,
        accept_divergence: Annotated[Optional[str], typer.Option(
            "--accept-divergence", metavar="WHY",
            help="accept this config's training run(s) reward/success divergence alerts, for the training_done gate "
                 "(audited; names the run's end record)")] = None,
    ) -> None:
        """Run every gate on the way to STATE. Exit 0 reached, 3 a gate refused, 2 config error."""
        from rc1.machine.service import advance as do_advance

        ws = workspace()
        if accept_early_stop is not None:
            _accept_early_stop(ws, to, config, accept_early_stop)
        if accept_divergence is not None:
            _accept_divergence(ws, to, config, accept_divergence)

        def on_gate(gate, results):
            print_checks(results)

        out = do_advance(ws, to, config, progress=lambda m: typer.echo(f"... {m}", err=True), on_gate=on_gate)
        if out.reached:
            typer.echo(f"state: {out.state} (reached {out.target})")
            return
        gate, results = out.gates[-1] if out.gates else (None, [])
        typer.echo(f"REFUSED: gate {gate} did not pass; state stays {out.state}", err=True)
        for r in results:
            for c in r.failing:
                typer.echo(f"  failing: {r.gate}/{c.name}: {c.measured} (threshold {c.threshold}) {c.detail}".rstrip(),
                           err=True)
        typer.echo(f"saved: reports/gates/{gate}.json; a FAIL pack: rc1 failpack", err=True)
        raise typer.Exit(EXIT_GATE)

    @app.command("reset")
    def reset(yes: Annotated[bool, typer.Option("--yes", help="confirm")] = False) -> None:
        """Return the machine to idle and withdraw every ticket (audited). Gates must pass again."""
        from rc1.machine.service import open_machine

        if not yes:
            typer.echo("refusing without --yes: reset withdraws every pass ticket", err=True)
            raise typer.Exit(2)
        m = open_machine(workspace(), gate_runner=lambda gate: [])
        m.fire("reset")
        typer.echo(f"state: {m.state}")


def _acceptance_config(ws, flag: str, to: str, config: str | None, needs: str, gate: str) -> str:
    """The config path an acceptance flag (`flag`) applies to; refused unless --to passes state `needs`."""
    from rc1.machine.service import resolve_state
    from rc1.runtime.errors import ConfigError
    from rc1.state import store
    from rc1.state.table import STATES

    if STATES.index(resolve_state(to)) < STATES.index(needs):
        raise ConfigError(f"{flag} is for the {gate}; --to {to} does not pass it")
    path = config or store.load_record(ws).config_path
    if path is None:
        raise ConfigError(f"{flag} needs --config (which run's training to accept)")
    return path


def _accept_early_stop(ws, to: str, config: str | None, why: str) -> None:
    """Record the operator's acceptance of early-stopped runs before the gates run (rc1.eval.runs)."""
    from rc1.config.load import load_train_config
    from rc1.eval.runs import accept_early_stop
    from rc1.state.store import AUDIT_FILE

    path = _acceptance_config(ws, "--accept-early-stop", to, config, "scale_1000", "RC1 gate (eval -> scale_1000)")
    for e in accept_early_stop(ws, load_train_config(path, ws), why, config_path=path):
        typer.echo(f"accepted early stop of {e['run_dir']} ({e['reason']} at step {e['step']}/{e['max_steps']}, "
                   f"{e['end_record']} sha256 {e['end_record_sha256'][:12]}): recorded in {AUDIT_FILE}")


def _accept_divergence(ws, to: str, config: str | None, why: str) -> None:
    """Record the operator's acceptance of divergence alerts before the gates run (rc1.eval.runs)."""
    from rc1.config.load import load_train_config
    from rc1.eval.runs import accept_divergence
    from rc1.state.store import AUDIT_FILE

    path = _acceptance_config(ws, "--accept-divergence", to, config, "eval", "training_done gate (training -> eval)")
    for e in accept_divergence(ws, load_train_config(path, ws), why, config_path=path):
        typer.echo(f"accepted {e['alerts']} divergence alert(s) of {e['run_dir']} ({e['end_record']} sha256 "
                   f"{e['end_record_sha256'][:12]}): recorded in {AUDIT_FILE}")
