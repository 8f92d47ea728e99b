"""`rc1 train`, `rc1 resume`, `rc1 stop`: the trainer process's command line and its controls.

The commands parse and print; the trainer process itself (machine checks, pid file, ranks, launch) is
rc1.trainer, driven by one TrainRequest. Heavy imports stay inside the command functions.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import print_checks, workspace
from rc1.runtime.errors import ConfigError
from rc1.trainer import TrainingRefused, TrainRequest, run_training


def _train(request: TrainRequest) -> int:
    """Run the trainer process (rc1.trainer) and print what it says; a refused gate prints its checks first."""
    try:
        outcome = run_training(workspace(), request)
    except TrainingRefused as exc:
        print_checks(exc.results, echo=lambda s: typer.echo(s, err=True))
        raise
    for line in outcome.lines:
        typer.echo(line)
    return outcome.exit_code


NprocOption = Annotated[Optional[int], typer.Option(
    "--nproc", min=1, help="data-parallel processes on this machine, through Accelerate (default: "
                           "distributed.processes)")]
AccelerateConfigOption = Annotated[Optional[str], typer.Option(
    "--accelerate-config", help="launch with your own accelerate config (e.g. multi-node; workspace-relative)")]
DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="check what this machine would launch (processes, backend, accelerate config); start nothing")]


def _start(request: TrainRequest, *, detach: bool, started: str) -> None:
    """Train in this process, or (`--detach`) start `rc1 train` in the background and print `started`."""
    if detach and not request.dry_run:
        from rc1.runtime.trainer_proc import start_trainer

        extra = ["--resume-fallback"] if request.resume_fallback else []
        extra += ["--seed-index", str(request.seed_index)] if request.seed_index else []
        extra += ["--nproc", str(request.nproc)] if request.nproc else []
        extra += ["--accelerate-config", request.accelerate_config] if request.accelerate_config else []
        pid = start_trainer(workspace(), request.config, resume=request.resume, max_steps=request.max_steps,
                            extra_args=extra)
        typer.echo(started.format(pid=pid))
        return
    raise typer.Exit(_train(request))


def register(app: typer.Typer) -> None:
    @app.command("learning-signal")
    def learning_signal(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        prompts: Annotated[Optional[int], typer.Option(
            "--prompts", min=1, help="training prompts to roll out (default: the gates config's min_prompts)")] = None,
    ) -> None:
        """Roll out the base policy on training prompts, as training will (reports/learning_signal.json)."""
        from rc1.config.load import load_run_gates, load_train_config
        from rc1.training.learning_signal import REPORT, measure

        ws = workspace()
        cfg = load_train_config(config, ws)
        g = load_run_gates(cfg, ws).learning_signal
        n = prompts or g.min_prompts
        rep = measure(ws, cfg, prompts=n, progress=lambda m: typer.echo(m, err=True),
                      informative_min=g.informative_groups_min)
        typer.echo(f"pass rate {rep['pass_rate']:.3f}, pass@{rep['group_size']} {rep['pass_at_k']:.3f}, truncated "
                   f"{rep['truncation_rate']:.3f}, groups without a correctness signal "
                   f"{rep['no_success_signal_group_frac']:.3f} ({rep['episodes']} episodes in {rep['rounds']} round(s), "
                   f"{rep['seconds']:.0f} s); "
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
        nproc: NprocOption = None,
        accelerate_config: AccelerateConfigOption = None,
        dry_run: DryRunOption = False,
        detach: Annotated[bool, typer.Option("--detach", help="run in the background (logs/train.log)")] = False,
    ) -> None:
        """Train (needs the machine in round2_pass; or training with --resume)."""
        _start(TrainRequest(config=config, resume=resume, resume_fallback=resume_fallback, max_steps=max_steps,
                            seed_index=seed_index, nproc=nproc, accelerate_config=accelerate_config, dry_run=dry_run),
               detach=detach, started="trainer started (pid {pid}); logs/train.log, `rc1 stop` to stop it")

    @app.command("resume")
    def resume_cmd(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        checkpoint: Annotated[str, typer.Option("--checkpoint", help="checkpoint dir or 'latest'")] = "latest",
        resume_fallback: Annotated[bool, typer.Option("--resume-fallback")] = False,
        max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1)] = None,
        seed_index: Annotated[int, typer.Option("--seed-index", min=0, help="which seed's run to continue")] = 0,
        nproc: NprocOption = None,
        accelerate_config: AccelerateConfigOption = None,
        detach: Annotated[bool, typer.Option("--detach", help="run in the background")] = False,
    ) -> None:
        """Continue the run from its latest (or the given) checkpoint (on any number of processes that
        divides run.gradient_accumulation: the same computation)."""
        _start(TrainRequest(config=config, resume=checkpoint, resume_fallback=resume_fallback, max_steps=max_steps,
                            seed_index=seed_index, nproc=nproc, accelerate_config=accelerate_config),
               detach=detach, started="trainer resumed (pid {pid})")

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
