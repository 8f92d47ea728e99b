"""`rc1 train`, `rc1 resume`, `rc1 stop`: the trainer process and its controls.

`rc1 train` starts only from round2_pass (firing the machine's `start_training`, whose gate
re-verifies the round-2 ticket and its evidence) or, to continue a run, from training (the
tickets are re-verified the same way). Heavy imports stay inside the command functions.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from rc1.cli.common import print_checks, workspace
from rc1.runtime.errors import ConfigError, GateRefused


def _enter_training(ws, config: str, resuming: bool) -> None:
    """Refuse unless the machine allows training; move round2_pass -> training through its gate."""
    from rc1.machine import store
    from rc1.machine.service import current_state, open_machine

    state = current_state(ws)
    if state == "round2_pass":
        machine = open_machine(ws, config)
        if not machine.fire("start_training"):
            print_checks(machine.last_results, echo=lambda s: typer.echo(s, err=True))
            raise GateRefused("the training_start gate refused: the round 2 ticket or its evidence is not valid")
        return
    if state == "training":
        store.verify_ticket(ws, "round2_pass")
        store.verify_ticket(ws, "training")
        return
    raise GateRefused(f"rc1 train needs the machine in round2_pass (or training, to resume); it is in {state}. "
                      "Run `rc1 advance --to round2` first")


def run_training(config: str, resume: str | None, resume_fallback: bool, max_steps: int | None,
                 seed_index: int = 0) -> int:
    """The trainer process body: checks, pid file, SIGTERM -> checkpoint + exit 0."""
    from rc1.config.load import load_train_config
    from rc1.runtime import trainer_proc
    from rc1.runtime.checkpoint import read_latest
    from rc1.runtime.logs import setup_logging
    from rc1.training.base import make_recipe

    ws = workspace()
    cfg = load_train_config(config, ws)
    try:
        seed_run = cfg.seed_run(seed_index)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    running = trainer_proc.running_trainer(ws)
    if running and running.get("pid") != os.getpid():
        raise ConfigError(f"a trainer is already running (pid {running['pid']}); `rc1 stop` it first")
    if resume is None and read_latest(ws.path(seed_run.checkpoint_dir)) is not None:
        from rc1.machine.service import current_state

        if current_state(ws) == "training":
            raise ConfigError(f"{seed_run.checkpoint_dir} already holds a run; continue it with `rc1 resume` "
                              "(or `rc1 train --resume latest`)")
    _enter_training(ws, config, resuming=resume is not None)
    setup_logging(ws, log_file=cfg.run.log_file)
    ws.path("reports/state").mkdir(parents=True, exist_ok=True)
    ws.path(trainer_proc.STOP_REQUEST_FILE).unlink(missing_ok=True)
    trainer_proc.write_pid_file(ws, config=config, argv=sys.argv, run_dir=seed_run.checkpoint_dir)
    try:
        recipe = make_recipe(ws, cfg, config_path=config, resume=resume, resume_fallback=resume_fallback,
                             max_steps=max_steps, seed_index=seed_index)
        trainer_proc.install_sigterm(recipe.request_stop)
        recipe.setup()
        try:
            reason = recipe.train()
        finally:
            recipe.cleanup()
        typer.echo(f"training {reason} at step {recipe.step}; latest checkpoint "
                   f"{ws.rel(read_latest(ws.path(seed_run.checkpoint_dir)) or '-')}")
        return 0
    finally:
        trainer_proc.remove_pid_file(ws)


def register(app: typer.Typer) -> None:
    @app.command("learning-signal")
    def learning_signal(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        prompts: Annotated[Optional[int], typer.Option(
            "--prompts", min=1, help="training prompts to roll out (default: the gates config's min_prompts)")] = None,
    ) -> None:
        """Roll out the base policy on training prompts, as training will (reports/learning_signal.json)."""
        from rc1.config.load import load_gates_config, load_train_config
        from rc1.training.signal import REPORT, measure

        ws = workspace()
        cfg = load_train_config(config, ws)
        n = prompts or load_gates_config(cfg.gates, ws).learning_signal.min_prompts
        rep = measure(ws, cfg, prompts=n, progress=lambda m: typer.echo(m, err=True))
        typer.echo(f"pass rate {rep['pass_rate']:.3f}, pass@{rep['group_size']} {rep['pass_at_k']:.3f}, truncated "
                   f"{rep['truncation_rate']:.3f}, groups without a correctness signal "
                   f"{rep['no_success_signal_group_frac']:.3f} ({rep['episodes']} episodes, {rep['seconds']:.0f} s); "
                   f"wrote {REPORT}")

    @app.command("train")
    def train(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        resume: Annotated[Optional[str], typer.Option("--resume", help="checkpoint dir or 'latest'")] = None,
        resume_fallback: Annotated[bool, typer.Option(
            "--resume-fallback", help="if the checkpoint is refused, use the newest older valid one")] = False,
        max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="override run.max_steps")] = None,
        seed_index: Annotated[int, typer.Option(
            "--seed-index", min=0, help="train seed i of the config's `seeds` (one training run per seed)")] = 0,
        detach: Annotated[bool, typer.Option("--detach", help="run in the background (logs/train.log)")] = False,
    ) -> None:
        """Train (needs the machine in round2_pass; or training with --resume)."""
        if detach:
            from rc1.runtime.trainer_proc import start_trainer

            extra = ["--resume-fallback"] if resume_fallback else []
            extra += ["--seed-index", str(seed_index)] if seed_index else []
            pid = start_trainer(workspace(), config, resume=resume, max_steps=max_steps, extra_args=extra)
            typer.echo(f"trainer started (pid {pid}); logs/train.log, `rc1 stop` to stop it")
            return
        raise typer.Exit(run_training(config, resume, resume_fallback, max_steps, seed_index))

    @app.command("resume")
    def resume_cmd(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        checkpoint: Annotated[str, typer.Option("--checkpoint", help="checkpoint dir or 'latest'")] = "latest",
        resume_fallback: Annotated[bool, typer.Option("--resume-fallback")] = False,
        max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1)] = None,
        seed_index: Annotated[int, typer.Option("--seed-index", min=0, help="which seed's run to continue")] = 0,
        detach: Annotated[bool, typer.Option("--detach", help="run in the background")] = False,
    ) -> None:
        """Continue the run from its latest (or the given) checkpoint."""
        if detach:
            from rc1.runtime.trainer_proc import start_trainer

            extra = ["--resume-fallback"] if resume_fallback else []
            extra += ["--seed-index", str(seed_index)] if seed_index else []
            pid = start_trainer(workspace(), config, resume=checkpoint, max_steps=max_steps, extra_args=extra)
            typer.echo(f"trainer resumed (pid {pid})")
            return
        raise typer.Exit(run_training(config, checkpoint, resume_fallback, max_steps, seed_index))

    @app.command("stop")
    def stop(
        timeout: Annotated[float, typer.Option(help="seconds to wait for the checkpoint and exit")] = 300.0,
    ) -> None:
        """Stop the running trainer: SIGTERM -> it finishes its step, checkpoints, exits 0."""
        from rc1.runtime.trainer_proc import read_pid_file, stop_trainer

        ws = workspace()
        doc = read_pid_file(ws)
        if doc is None:
            typer.echo("no trainer is running")
            return
        if stop_trainer(ws, timeout=timeout):
            typer.echo(f"trainer (pid {doc['pid']}) stopped")
        else:
            raise ConfigError(f"trainer (pid {doc['pid']}) did not exit within {timeout:g}s")
