"""The trainer process: what `rc1 train` and `rc1 resume` run once their command line is parsed.

    outcome = run_training(ws, TrainRequest(config="configs/run.yaml", resume="latest"))

Training starts only from round2_pass (firing the machine's `start_training`, whose gate re-verifies the
round-2 ticket and its evidence) or, to continue a run, from training (the tickets are re-verified the same
way); a second trainer and a fresh start over an existing run are refused.

One process trains here: checks, pid file reports/state/trainer.json, SIGTERM -> finish the step, checkpoint,
exit 0. Several (`nproc`, distributed.processes, or an accelerate config): this process passes the gates,
writes the pid file and launches the ranks (rc1.training.launcher); each rank runs `run_training` again under
torchrun, where rank 0 re-verifies the tickets and broadcasts its verdict to the others, and only rank 0
writes. Heavy imports stay inside the functions.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from rc1.runtime.errors import ConfigError, GateRefused
from rc1.runtime.workspace import Workspace


@dataclass(frozen=True)
class TrainRequest:
    """One start of the trainer, as the command line asked for it."""

    config: str                          # run config, workspace-relative
    resume: str | None = None            # checkpoint dir or 'latest'; None starts a fresh run
    resume_fallback: bool = False        # a refused checkpoint falls back to the newest older valid one
    max_steps: int | None = None         # overrides run.max_steps
    seed_index: int = 0                  # which of the config's seeds this run trains
    nproc: int | None = None             # data-parallel processes on this machine (default distributed.processes)
    accelerate_config: str | None = None  # the user's own accelerate config (workspace-relative)
    dry_run: bool = False                # say what this machine would launch; start nothing

    def worker_args(self) -> list[str]:
        """The `rc1 ...` arguments each launched rank runs with."""
        args = ["train", "--config", self.config, "--seed-index", str(self.seed_index)]
        args += ["--resume", self.resume] if self.resume else []
        args += ["--resume-fallback"] if self.resume_fallback else []
        args += ["--max-steps", str(self.max_steps)] if self.max_steps is not None else []
        return args


@dataclass(frozen=True)
class TrainOutcome:
    """How the trainer process ended: its exit code and the lines to tell the user."""

    exit_code: int
    lines: tuple[str, ...] = ()


class TrainingRefused(GateRefused):
    """The training_start gate refused; `results` holds its gate results for the caller to show."""

    def __init__(self, message: str, results: list):
        super().__init__(message)
        self.results = results


def run_training(ws: Workspace, request: TrainRequest) -> TrainOutcome:
    """Train as `request` says: in this process, as one rank of a launched run, or by launching the ranks."""
    from rc1.config.load import load_train_config
    from rc1.runtime import distributed

    cfg = load_train_config(request.config, ws)
    try:
        cfg.seed_run(request.seed_index)  # refuses a seed index the config has no seed for
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if distributed.launched_as_rank():
        return _run_rank(ws, cfg, request)
    processes = request.nproc or cfg.distributed.processes
    if processes == 1 and request.accelerate_config is None:
        if request.dry_run:
            return TrainOutcome(0, ("1 process: trains in this process (no launch)",))
        return _train_here(ws, cfg, request)
    return _launch(ws, cfg, request)


def _enter_training(ws: Workspace, config: str) -> None:
    """Refuse unless the machine allows training; move round2_pass -> training through its gate."""
    from rc1.machine.service import current_state, open_machine
    from rc1.state import store

    state = current_state(ws)
    if state == "round2_pass":
        machine = open_machine(ws, config)
        if not machine.fire("start_training"):
            raise TrainingRefused("the training_start gate refused: the round 2 ticket or its evidence is not "
                                  "valid", list(machine.last_results))
        return
    if state == "training":
        store.verify_ticket(ws, "round2_pass")
        store.verify_ticket(ws, "training")
        return
    raise GateRefused(f"rc1 train needs the machine in round2_pass (or training, to resume); it is in {state}. "
                      "Run `rc1 advance --to round2` first")


def _check_start(ws: Workspace, cfg, request: TrainRequest, *, own_launcher: int | None = None) -> None:
    """Refuse a second trainer, a fresh start over an existing run, or a start the machine does not allow."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.checkpoint import read_latest

    running = trainer_proc.running_trainer(ws)
    if running and running.get("pid") not in (os.getpid(), own_launcher):
        raise ConfigError(f"a trainer is already running (pid {running['pid']}); `rc1 stop` it first")
    seed_run = cfg.seed_run(request.seed_index)
    if request.resume is None and read_latest(ws.path(seed_run.checkpoint_dir)) is not None:
        from rc1.machine.service import current_state

        if current_state(ws) == "training" and own_launcher is None:
            raise ConfigError(f"{seed_run.checkpoint_dir} already holds a run; continue it with `rc1 resume` "
                              "(or `rc1 train --resume latest`)")
    _enter_training(ws, request.config)


def _clear_stop_request(ws: Workspace) -> None:
    from rc1.runtime import trainer_proc

    ws.path("reports/state").mkdir(parents=True, exist_ok=True)
    ws.path(trainer_proc.STOP_REQUEST_FILE).unlink(missing_ok=True)


def _train_here(ws: Workspace, cfg, request: TrainRequest, dist=None) -> TrainOutcome:
    """Build the recipe and train in this process: the only one (checks and pid file here), or one rank of
    a distributed run (`dist`; `_run_rank` did the checks)."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.checkpoint import read_latest
    from rc1.training.base import make_recipe

    seed_run = cfg.seed_run(request.seed_index)
    single = dist is None
    if single:
        _check_start(ws, cfg, request)
    setup_logging_for(ws, cfg, dist)
    if single or dist.is_main:
        _clear_stop_request(ws)
    if single:
        trainer_proc.write_pid_file(ws, config=request.config, argv=sys.argv, run_dir=seed_run.checkpoint_dir)
    try:
        recipe = make_recipe(ws, cfg, config_path=request.config, resume=request.resume,
                             resume_fallback=request.resume_fallback, max_steps=request.max_steps,
                             seed_index=request.seed_index, dist=dist)
        trainer_proc.install_sigterm(recipe.signal_stop)
        recipe.setup()
        try:
            reason = recipe.train()
        finally:
            recipe.cleanup()
        if single or dist.is_main:
            latest = ws.rel(read_latest(ws.path(seed_run.checkpoint_dir)) or "-")
            return TrainOutcome(0, (f"training {reason} at step {recipe.step}; latest checkpoint {latest}",))
        return TrainOutcome(0)
    finally:
        if single:
            trainer_proc.remove_pid_file(ws)


def setup_logging_for(ws: Workspace, cfg, dist) -> None:
    """logs/train.log for the trainer (rank 0); rank r > 0 logs to logs/train.rank<r>.log."""
    from rc1.runtime.logs import setup_logging

    if dist is None or dist.is_main:
        setup_logging(ws, log_file=cfg.run.log_file)
    else:
        setup_logging(ws, log_file=cfg.run.log_file.replace(".log", f".rank{dist.rank}.log"))


def _launch(ws: Workspace, cfg, request: TrainRequest) -> TrainOutcome:
    """This machine's part of a distributed run: plan, gates and pid file (machine_rank 0), launch."""
    from rc1.runtime import trainer_proc
    from rc1.runtime.logs import setup_logging
    from rc1.training import launcher

    shown = request.accelerate_config
    plan = launcher.plan(cfg, processes=request.nproc, accelerate_config=ws.path(shown) if shown else None,
                         shown_as=shown)
    if request.dry_run:
        return TrainOutcome(0, (*plan.lines(), "ok: this machine can launch its part of the run (dry run: nothing "
                                               "started)"))
    worker_args = request.worker_args()
    if not plan.starts_rank0:  # another machine holds rank 0: it checks the gates and writes
        return TrainOutcome(launcher.launch(ws, cfg, plan, worker_args, seed_index=request.seed_index))
    _check_start(ws, cfg, request)
    setup_logging(ws, log_file=cfg.run.log_file)
    _clear_stop_request(ws)
    trainer_proc.write_pid_file(ws, config=request.config, argv=sys.argv,
                                run_dir=cfg.seed_run(request.seed_index).checkpoint_dir, world_size=plan.world_size)
    try:
        return TrainOutcome(launcher.launch(ws, cfg, plan, worker_args, seed_index=request.seed_index))
    finally:
        trainer_proc.remove_pid_file(ws)


def _run_rank(ws: Workspace, cfg, request: TrainRequest) -> TrainOutcome:
    """One rank under torchrun / accelerate launch. Rank 0 verifies the machine state and tickets (rc1's
    launcher has already moved it to training; a user's own `accelerate launch` has not) and writes the pid
    file; the other ranks wait for its verdict and never write state, tickets or reports."""
    from rc1.runtime import distributed, trainer_proc
    from rc1.runtime.errors import EXIT_GATE, Rc1Error
    from rc1.runtime.fatal import CONTEXT

    launcher_pid = int(os.environ[distributed.LAUNCHER_ENV]) if distributed.LAUNCHER_ENV in os.environ else None
    dist = distributed.from_environment(cfg)
    CONTEXT["rank"] = dist.rank
    CONTEXT["error_report"] = dist.is_main and launcher_pid is None  # else the launcher writes it
    try:
        refusal, verdict = None, None
        if dist.is_main:
            try:
                _check_start(ws, cfg, request, own_launcher=launcher_pid)
            except Rc1Error as exc:
                refusal, verdict = exc, (exc.exit_code, exc.message, exc.lines)
        verdict = dist.broadcast(verdict)
        if refusal is not None:
            raise refusal
        if verdict is not None:
            code, message, lines = verdict
            raise (GateRefused if code == EXIT_GATE else ConfigError)(message, lines=lines)
        ranks = dist.all_gather(distributed.process_info(dist.rank))
        if dist.is_main:
            doc = trainer_proc.read_pid_file(ws) if launcher_pid else None
            trainer_proc.write_pid_file(ws, config=request.config, argv=sys.argv,
                                        run_dir=cfg.seed_run(request.seed_index).checkpoint_dir,
                                        world_size=dist.world_size, ranks=ranks,
                                        pid=launcher_pid or os.getpid(), started=(doc or {}).get("started"))
        if launcher_pid:
            distributed.watch_parent(launcher_pid)
        return _train_here(ws, cfg, request, dist=dist)
    finally:
        if dist.is_main and launcher_pid is None:
            trainer_proc.remove_pid_file(ws)
        dist.close()
