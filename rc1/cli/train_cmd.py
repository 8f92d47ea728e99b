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
    from rc1.state import store
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
                 seed_index: int = 0, nproc: int | None = None, accelerate_config: str | None = None,
                 dry_run: bool = False) -> int:
    """The trainer process body: checks, pid file, SIGTERM -> checkpoint + exit 0.

    One process trains here. Several (`--nproc N`, distributed.processes, or `--accelerate-config`): this
    process passes the gates, writes the pid file and launches the ranks (rc1.training.launcher); each rank
    runs this function again under torchrun, where rank 0 re-verifies the tickets and only rank 0 writes."""
    from rc1.config.load import load_train_config
    from rc1.runtime import distributed

    ws = workspace()
    cfg = load_train_config(config, ws)
    try:
        cfg.seed_run(seed_index)  # refuses a --seed-index the config has no seed for
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if distributed.launched_as_rank():
        return _run_rank(ws, cfg, config, resume, resume_fallback, max_steps, seed_index)
    processes = nproc or cfg.distributed.processes
    if processes == 1 and accelerate_config is None:
        if dry_run:
            typer.echo("1 process: trains in this process (no launch)")
            return 0
        return _train_here(ws, cfg, config, resume, resume_fallback, max_steps, seed_index)
    return _launch(ws, cfg, config, resume, resume_fallback, max_steps, seed_index, nproc, accelerate_config,
                   dry_run)


def _check_start(ws, cfg, config: str, resume: str | None, seed_run, *, own_launcher: int | None = None) -> None:
    """Refuse a second trainer, a fresh start over an existing run, or a start the machine does not allow."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.checkpoint import read_latest

    running = trainer_proc.running_trainer(ws)
    if running and running.get("pid") not in (os.getpid(), own_launcher):
        raise ConfigError(f"a trainer is already running (pid {running['pid']}); `rc1 stop` it first")
    if resume is None and read_latest(ws.path(seed_run.checkpoint_dir)) is not None:
        from rc1.machine.service import current_state

        if current_state(ws) == "training" and own_launcher is None:
            raise ConfigError(f"{seed_run.checkpoint_dir} already holds a run; continue it with `rc1 resume` "
                              "(or `rc1 train --resume latest`)")
    _enter_training(ws, config, resuming=resume is not None)


def _train_here(ws, cfg, config, resume, resume_fallback, max_steps, seed_index, dist=None) -> int:
    """Build the recipe and train in this process: the only one (checks and pid file here), or one rank of
    a distributed run (`dist`; `_run_rank` did the checks)."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.checkpoint import read_latest
    from rc1.training.base import make_recipe

    seed_run = cfg.seed_run(seed_index)
    single = dist is None
    if single:
        _check_start(ws, cfg, config, resume, seed_run)
    setup_logging_for(ws, cfg, dist)
    if single or dist.is_main:
        ws.path("reports/state").mkdir(parents=True, exist_ok=True)
        ws.path(trainer_proc.STOP_REQUEST_FILE).unlink(missing_ok=True)
    if single:
        trainer_proc.write_pid_file(ws, config=config, argv=sys.argv, run_dir=seed_run.checkpoint_dir)
    try:
        recipe = make_recipe(ws, cfg, config_path=config, resume=resume, resume_fallback=resume_fallback,
                             max_steps=max_steps, seed_index=seed_index, dist=dist)
        trainer_proc.install_sigterm(recipe.signal_stop)
        recipe.setup()
        try:
            reason = recipe.train()
        finally:
            recipe.cleanup()
        if single or dist.is_main:
            typer.echo(f"training {reason} at step {recipe.step}; latest checkpoint "
                       f"{ws.rel(read_latest(ws.path(seed_run.checkpoint_dir)) or '-')}")
        return 0
    finally:
        if single:
            trainer_proc.remove_pid_file(ws)


def setup_logging_for(ws, cfg, dist) -> None:
    """logs/train.log for the trainer (rank 0); rank r > 0 logs to logs/train.rank<r>.log."""
    from rc1.runtime.logs import setup_logging

    if dist is None or dist.is_main:
        setup_logging(ws, log_file=cfg.run.log_file)
    else:
        setup_logging(ws, log_file=cfg.run.log_file.replace(".log", f".rank{dist.rank}.log"))


def _launch(ws, cfg, config, resume, resume_fallback, max_steps, seed_index, nproc, accelerate_config,
            dry_run) -> int:
    """This machine's part of a distributed run: plan, gates and pid file (machine_rank 0), launch."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.logs import setup_logging
    from rc1.training import launcher

    plan = launcher.plan(cfg, processes=nproc, accelerate_config=ws.path(accelerate_config) if accelerate_config
                         else None, shown_as=accelerate_config)
    if dry_run:
        for line in plan.lines():
            typer.echo(line)
        typer.echo("ok: this machine can launch its part of the run (dry run: nothing started)")
        return 0
    worker_args = ["train", "--config", config, "--seed-index", str(seed_index)]
    worker_args += ["--resume", resume] if resume else []
    worker_args += ["--resume-fallback"] if resume_fallback else []
    worker_args += ["--max-steps", str(max_steps)] if max_steps is not None else []
    seed_run = cfg.seed_run(seed_index)
    if not plan.starts_rank0:  # another machine holds rank 0: it checks the gates and writes
        return launcher.launch(ws, cfg, plan, worker_args, seed_index=seed_index)
    _check_start(ws, cfg, config, resume, seed_run)
    setup_logging(ws, log_file=cfg.run.log_file)
    ws.path("reports/state").mkdir(parents=True, exist_ok=True)
    ws.path(trainer_proc.STOP_REQUEST_FILE).unlink(missing_ok=True)
    trainer_proc.write_pid_file(ws, config=config, argv=sys.argv, run_dir=seed_run.checkpoint_dir,
                                world_size=plan.world_size)
    try:
        return launcher.launch(ws, cfg, plan, worker_args, seed_index=seed_index)
    finally:
        trainer_proc.remove_pid_file(ws)


def _run_rank(ws, cfg, config, resume, resume_fallback, max_steps, seed_index) -> int:
    """One rank under torchrun / accelerate launch. Rank 0 verifies the machine state and tickets (rc1's
    launcher has already moved it to training; a user's own `accelerate launch` has not) and writes the pid
    file; the other ranks wait for its verdict and never write state, tickets or reports."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.errors import EXIT_GATE, Rc1Error
    from rc1.runtime.fatal import CONTEXT
    from rc1.runtime import distributed

    launcher_pid = int(os.environ[distributed.LAUNCHER_ENV]) if distributed.LAUNCHER_ENV in os.environ else None
    dist = distributed.from_environment(cfg)
    CONTEXT["rank"] = dist.rank
    CONTEXT["error_report"] = dist.is_main and launcher_pid is None  # else the launcher writes it
    seed_run = cfg.seed_run(seed_index)
    try:
        verdict = None
        if dist.is_main:
            try:
                _check_start(ws, cfg, config, resume, seed_run, own_launcher=launcher_pid)
            except Rc1Error as exc:
                verdict = (exc.exit_code, exc.message, exc.lines)
        verdict = dist.broadcast(verdict)
        if verdict is not None:
            code, message, lines = verdict
            raise (GateRefused if code == EXIT_GATE else ConfigError)(message, lines=lines)
        ranks = dist.all_gather(distributed.process_info(dist.rank))
        if dist.is_main:
            doc = trainer_proc.read_pid_file(ws) if launcher_pid else None
            trainer_proc.write_pid_file(ws, config=config, argv=sys.argv, run_dir=seed_run.checkpoint_dir,
                                        world_size=dist.world_size, ranks=ranks,
                                        pid=launcher_pid or os.getpid(), started=(doc or {}).get("started"))
        if launcher_pid:
            distributed.watch_parent(launcher_pid)
        return _train_here(ws, cfg, config, resume, resume_fallback, max_steps, seed_index, dist=dist)
    finally:
        if dist.is_main and launcher_pid is None:
            trainer_proc.remove_pid_file(ws)
        dist.close()


NprocOption = Annotated[Optional[int], typer.Option(
    "--nproc", min=1, help="data-parallel processes on this machine, through Accelerate (default: "
                           "distributed.processes)")]
AccelerateConfigOption = Annotated[Optional[str], typer.Option(
    "--accelerate-config", help="launch with your own accelerate config (e.g. multi-node; workspace-relative)")]
DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="check what this machine would launch (processes, backend, accelerate config); start nothing")]


def _detached_args(resume_fallback: bool, seed_index: int, nproc: int | None, accelerate_config: str | None) -> list[str]:
    extra = ["--resume-fallback"] if resume_fallback else []
    extra += ["--seed-index", str(seed_index)] if seed_index else []
    extra += ["--nproc", str(nproc)] if nproc else []
    extra += ["--accelerate-config", accelerate_config] if accelerate_config else []
    return extra


def register(app: typer.Typer) -> None:
    @app.command("learning-signal")
    def learning_signal(
        config: Annotated[str, typer.Option("--config", help="run config (workspace-relative)")],
        prompts: Annotated[Optional[int], typer.Option(
            "--prompts", min=1, help="training prompts to roll out (default: the gates config's min_prompts)")] = None,
    ) -> None:
        """Roll out the base policy on training prompts, as training will (reports/learning_signal.json)."""
        from rc1.config.load import load_run_gates, load_train_config
        from rc1.training.signal import REPORT, measure

        ws = workspace()
        cfg = load_train_config(config, ws)
        n = prompts or load_run_gates(cfg, ws).learning_signal.min_prompts
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
        nproc: NprocOption = None,
        accelerate_config: AccelerateConfigOption = None,
        dry_run: DryRunOption = False,
        detach: Annotated[bool, typer.Option("--detach", help="run in the background (logs/train.log)")] = False,
    ) -> None:
        """Train (needs the machine in round2_pass; or training with --resume)."""
        if detach and not dry_run:
            from rc1.runtime.trainer_proc import start_trainer

            pid = start_trainer(workspace(), config, resume=resume, max_steps=max_steps,
                                extra_args=_detached_args(resume_fallback, seed_index, nproc, accelerate_config))
            typer.echo(f"trainer started (pid {pid}); logs/train.log, `rc1 stop` to stop it")
            return
        raise typer.Exit(run_training(config, resume, resume_fallback, max_steps, seed_index, nproc,
                                      accelerate_config, dry_run))

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
        if detach:
            from rc1.runtime.trainer_proc import start_trainer

            pid = start_trainer(workspace(), config, resume=checkpoint, max_steps=max_steps,
                                extra_args=_detached_args(resume_fallback, seed_index, nproc, accelerate_config))
            typer.echo(f"trainer resumed (pid {pid})")
            return
        raise typer.Exit(run_training(config, checkpoint, resume_fallback, max_steps, seed_index, nproc,
                                      accelerate_config))

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
