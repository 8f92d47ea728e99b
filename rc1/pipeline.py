"""The main job: data → reward/scorer → gates → training → eval → report, resumable at any point.

Each stage is an `rc1` command run as a subprocess (the same commands an operator types), with a
predicate that says whether its output already exists and verifies. Started again after an
interruption, the pipeline skips what is done with unchanged evidence, resumes training from the
latest verified checkpoint, and never redoes a gate whose ticket still verifies. A failing stage
stops the run with its output and a FAIL pack.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

from rc1.config.schema import TrainConfig
from rc1.runtime import layout
from rc1.runtime.layout import PIPELINE_TIMINGS as TIMINGS
from rc1.state import store
from rc1.state.table import STATES
from rc1.runtime.errors import Rc1Error
from rc1.runtime.fingerprint import verify_artifact
from rc1.runtime.interrupt import INTERRUPT_GRACE_S, stop_child
from rc1.runtime.stagefork import StageHost, StageProcess, fork_wanted, spawn_stage
from rc1.runtime.layout import DEV_BASE_RESPONSES  # `rc1 reward base-answers`
from rc1.runtime.workspace import Workspace

_log = logging.getLogger("rc1.pipeline")


class StageFailed(Rc1Error):
    def __init__(self, stage: str, code: int, tail: str, failpack: str | None):
        msg = f"stage {stage!r} failed (exit {code})" + (f"; FAIL pack: {failpack}" if failpack else "")
        super().__init__(msg, lines=tail.splitlines()[-30:])
        self.exit_code = code if code in (2, 3) else 1


@dataclass
class Stage:
    name: str
    argv: list[str]
    done: Callable[[], bool] = lambda: False
    # Called while the stage runs (e.g. training progress); gets the elapsed seconds.
    watch: Callable[[], tuple[int, int] | None] | None = None


@dataclass
class Pipeline:
    ws: Workspace
    config_path: str
    cfg: TrainConfig
    echo: Callable[[str], None] = print
    timings: dict[str, float] = field(default_factory=dict)
    # Run the stages from a warm process (rc1.runtime.stagefork) that imports torch & co. once: worth it for a
    # run of many stages (`rc1 pipeline`, the console's "all stages"), not for one (its imports compete with it).
    warm_stages: bool = False
    _host: StageHost | None = field(default=None, init=False, repr=False)
    _host_tried: bool = field(default=False, init=False, repr=False)

    @classmethod
    def prepare(cls, ws: Workspace, config_path: str, echo: Callable[[str], None] = print,
                warm_stages: bool = False) -> "Pipeline":
        """What every run starts with (`rc1 pipeline`, the console's run action): the workspace's folders, the
        run config verified and loaded, the code fingerprint and the effective config recorded."""
        from rc1.config.load import load_train_config, verify_config_file, write_effective_config
        from rc1.runtime.provenance import write_code_fingerprint

        ws.ensure()
        verify_config_file(config_path, ws)
        cfg = load_train_config(config_path, ws)
        write_code_fingerprint(ws)
        write_effective_config(ws, cfg, config_path)
        return cls(ws, config_path, cfg, echo=echo, warm_stages=warm_stages)

    # ---------------------------------------------------------------- predicates
    def state_at_least(self, state: str) -> bool:
        return STATES.index(store.load_record(self.ws).state) >= STATES.index(state)

    def ticket_ok(self, state: str) -> bool:
        try:
            store.verify_ticket(self.ws, state)
            return True
        except Rc1Error:
            return False

    def artifacts_ok(self, *paths: str) -> bool:
        return all(self.ws.path(p).exists() and verify_artifact(self.ws, p) for p in paths)

    def past_gates(self) -> bool:
        """round2 passed and its evidence still verifies: data/reward stages need not run again."""
        return self.state_at_least("round2_pass") and (
            self.state_at_least("training") or self.ticket_ok("round2_pass"))

    def signal_current(self) -> bool:
        """The learning-signal report was made for this config's settings and data (else measure again)."""
        from rc1.training.learning_signal import REPORT, signal_identity

        try:
            rep = json.loads(self.ws.path(REPORT).read_text())
        except (OSError, json.JSONDecodeError):
            return False
        return rep.get("identity") == signal_identity(self.ws, self.cfg)[0]

    @property
    def custom_only(self) -> bool:
        """Every task the run trains on is a custom one (datasets.tasks)."""
        return all(t in self.cfg.datasets.tasks for t, w in self.cfg.datasets.mix.items() if w > 0)

    def make_min_outputs(self) -> tuple[str, ...]:
        """What `rc1 data make-min --config` writes: a custom-only run's dev split, else the built-in min files."""
        cfg = self.cfg
        if self.custom_only:
            return (cfg.data.eval_path,)
        return (layout.TRAIN_MIN, layout.EVAL_MIN)

    def fit_current(self) -> bool:
        """The difficulty-fit report verifies and was made for this config's model, settings and ladder."""
        from rc1.training.fit import fit_identity, read_report

        rep = read_report(self.ws)
        return (rep is not None and self.artifacts_ok(layout.DIFFICULTY_FIT_REPORT)
                and rep.get("identity") == fit_identity(self.ws, self.cfg)[0]
                and all(self.artifacts_ok(rel) for rel, v in (rep.get("files") or {}).items() if isinstance(v, dict)))

    def fit_kept(self) -> bool:
        """The current difficulty-fit report kept at least one task."""
        from rc1.training.fit import read_report

        rep = read_report(self.ws)
        return self.fit_current() and bool((rep or {}).get("kept"))

    def training_progress(self, seed_index: int = 0) -> tuple[int, int] | None:
        """(step, max_steps) of training run `seed_index`, from its newest metrics line."""
        from rc1.runtime.metrics import last_metrics

        recs = [r for r in last_metrics(self.ws.metrics_path, 20) if isinstance(r.get("step"), int)
                and r.get("seed_index", 0) == seed_index]
        return (recs[-1]["step"], self.cfg.run.max_steps) if recs else None

    # ---------------------------------------------------------------- stages
    def stages(self) -> list[Stage]:
        """Every stage is `rc1 <command> --config C`: the command reads its settings from the run config (flags
        override them when an operator types one). What the pipeline still passes is its own choice, not a
        setting: which run a seed is, resuming, and how calibration takes a failed acceptance."""
        c, cfg = self.config_path, self.cfg
        pool, shadow = cfg.pool, cfg.data.shadow_path
        raw = pool.out
        metrics = layout.metrics_path_for(raw)  # where `data difficulty metrics --config` writes it
        balanced = cfg.seed_pool
        v1 = pool.v1_pool or layout.V1_POOL
        past = self.past_gates
        from rc1.data.applicability import v1_required

        # a run on custom tasks draws its own dev split, unless the difficulty fit draws it (data/fit/dev.jsonl)
        make_min = ([] if self.custom_only and cfg.difficulty_fit.enable else
                    [Stage("data: make-min", ["data", "make-min", "--config", c],
                           lambda: past() or self.artifacts_ok(*self.make_min_outputs()))])
        v1_stage = ([Stage("data: v1 pool", ["data", "build-pool", "--config", c, "--version", "v1"],
                           lambda: past() or self.artifacts_ok(v1))] if v1_required(cfg) else [])
        return [
            *make_min,
            *v1_stage,
            Stage("data: seed pool", ["data", "build-pool", "--config", c], lambda: past() or self.artifacts_ok(raw)),
            Stage("data: shadow set", ["data", "shadow-set", "--config", c],
                  lambda: past() or self.artifacts_ok(shadow)),
            Stage("data: difficulty metrics", ["data", "difficulty", "metrics", "--config", c],
                  lambda: past() or self.artifacts_ok(metrics)),
            Stage("data: difficulty bucketize", ["data", "difficulty", "bucketize", "--config", c],
                  lambda: past() or self.artifacts_ok(balanced)),
            Stage("data: difficulty validate", ["data", "difficulty", "validate", "--config", c],
                  lambda: past() or self.artifacts_ok(layout.DIFFICULTY_REPORT)),
            Stage("data: validate pool", ["data", "validate-pool", "--config", c],
                  lambda: past() or self.artifacts_ok(layout.DIVERSITY_REPORT)),
            Stage("judge: serve", ["judge", "serve", "--config", c], lambda: past()),
            Stage("scorer: live probe", ["reward", "probe", "--config", c],
                  lambda: past() or self.state_at_least("round1")),
            *([Stage("data: difficulty fit", ["data", "fit", "--config", c], lambda: past() or self.fit_current()),
               # a fit that kept no level leaves nothing for the stages below (no fitted dev split, no training
               # items): round 2's check refuses the run here, by name, instead of a later stage failing on a
               # missing file
               Stage("gate: round2 (difficulty fit)", ["data", "fit-verdict", "--config", c],
                     lambda: past() or self.fit_kept())]
              if cfg.difficulty_fit.enable else []),
            # The base model answers the dev split once (eval.calibration_n answers): the difficulty gate checks
            # the buckets against these outcomes, and calibration fits on them.
            Stage("reward: base answers (dev split)", ["reward", "base-answers", "--config", c],
                  lambda: past() or self.state_at_least("round1")),
            Stage("gate: round1", ["advance", "--to", "round1", "--config", c], lambda: self.state_at_least("round1")),
            # calibration fits on the answers the stage above wrote; a failed acceptance keeps the current
            # weights and the run goes on to the shadow run, which judges them
            Stage("reward: calibrate", ["reward", "calibrate", "--config", c, "--items", cfg.data.eval_path,
                                        "--responses", DEV_BASE_RESPONSES, "--on-fail", "keep"],
                  lambda: past() or self.calibrated()),
            Stage("reward: shadow run", ["reward", "shadow-run", "--config", c], lambda: past()),
            Stage("learning signal", ["learning-signal", "--config", c],
                  lambda: past() or self.artifacts_ok(layout.LEARNING_SIGNAL_REPORT) and self.signal_current()),
            Stage("gate: round2", ["advance", "--to", "round2", "--config", c], lambda: past()),
            *self._train_stages(),
            # how far each trained policy drifted from the reference, on fixed prompts with a CI: the training_done
            # gate judges it
            Stage("drift", ["drift", "--config", c], lambda: self.state_at_least("eval") or self.drift_current()),
            Stage("gate: training done", ["advance", "--to", "eval", "--config", c],
                  lambda: self.state_at_least("eval")),
            Stage("eval", ["eval", "--config", c],  # held-out + dev (best/ is chosen on dev; eval.n_dev sizes it)
                  lambda: bool(self._latest_eval())),
            Stage("report", ["report", "--config", c], lambda: False),
            # the RC1 gate (eval -> scale_1000) after the report, so a refused run still has its report: the
            # pipeline then exits 3 naming the failing checks, as at every other gate
            Stage("gate: RC1", ["advance", "--to", "scale_1000", "--config", c],
                  lambda: self.state_at_least("scale_1000")),
        ]

    def calibrated(self) -> bool:
        """A calibration report made from the current dev-split answers produced the current weights file
        (written, or kept when its acceptance failed)."""
        from rc1.rewards.calibrate import current_report

        return current_report(self.ws, self.cfg.reward.weights, DEV_BASE_RESPONSES) is not None

    def _train_stages(self) -> list[Stage]:
        """One training run per seed (`seeds`), one after the other: each has its own checkpoints and end
        record, and the eval judges every one of them."""
        n = len(self.cfg.seed_list)
        return [Stage("train" if n == 1 else f"train (seed {i + 1} of {n})",
                      ["train", "--config", self.config_path, "--seed-index", str(i)]
                      + (["--resume", "latest"] if self._resumable(i) else []),
                      lambda i=i: self.state_at_least("eval") or self._training_finished(i),
                      watch=lambda i=i: self.training_progress(i))
                for i in range(n)]

    def drift_current(self) -> bool:
        """Every seed run's drift report verifies and measured that run's current latest checkpoint."""
        from rc1.eval.drift import drift_report_path
        from rc1.runtime.checkpoint import MANIFEST_FILE, read_latest
        from rc1.runtime.fingerprint import sha256_file

        for i in range(len(self.cfg.seed_list)):
            rel = drift_report_path(i)
            latest = read_latest(self.ws.path(self.cfg.seed_run(i).checkpoint_dir))
            if latest is None or not self.artifacts_ok(rel):
                return False
            rep = json.loads(self.ws.path(rel).read_text())
            if (rep.get("checkpoint") or {}).get("manifest_sha256") != sha256_file(latest / MANIFEST_FILE):
                return False
        return True

    def _resumable(self, seed_index: int = 0) -> bool:
        latest = self.ws.path(self.cfg.seed_run(seed_index).checkpoint_dir) / "latest"
        return self.state_at_least("training") and latest.exists()

    def _training_finished(self, seed_index: int = 0) -> bool:
        """Run `seed_index` wrote its end record and was not interrupted (an operator stop or a signal resumes)."""
        from rc1.gates.training_done import INTERRUPTIONS
        from rc1.training.base import read_training_end

        end = read_training_end(self.ws, self.cfg, seed_index)
        return (self.state_at_least("training") and end is not None and end.get("reason") not in INTERRUPTIONS
                and end.get("seed") == self.cfg.seed_list[seed_index])

    def _latest_eval(self) -> str | None:
        """The newest eval report, when it verifies and evaluated every seed's current latest checkpoint."""
        from rc1.eval.harness import latest_report
        from rc1.runtime.checkpoint import MANIFEST_FILE, read_latest
        from rc1.runtime.fingerprint import sha256_file

        path = latest_report(self.ws)
        if path is None or not self.state_at_least("eval") or not verify_artifact(self.ws, path):
            return None
        latest = [read_latest(self.ws.path(self.cfg.seed_run(i).checkpoint_dir)) for i in range(len(self.cfg.seed_list))]
        if any(p is None for p in latest):
            return None
        runs = json.loads(path.read_text()).get("runs") or []
        evaluated = {r.get("seed_index") or 0: (r.get("checkpoint") or {}).get("manifest_sha256") for r in runs}
        current = all(evaluated.get(i) == sha256_file(p / MANIFEST_FILE) for i, p in enumerate(latest))
        return str(path) if current else None

    # ---------------------------------------------------------------- run
    def run_stage(self, stage: Stage, progress=None, task=None, cancelled: Callable[[], bool] | None = None) -> None:
        """Run one stage's command. `cancelled` (polled while it runs; the console's cancel) stops it as Ctrl-C does."""
        cmd = [sys.executable, "-m", "rc1.cli.main", "--workdir", str(self.ws.root), *stage.argv]
        log_path = self.ws.logs / "pipeline.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        tail: list[str] = []
        with open(log_path, "a", encoding="utf-8", buffering=1) as log:  # line-buffered: followable while it runs
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {stage.name}: rc1 "
                      f"{' '.join(stage.argv)}\n")
            log.flush()
            proc, self._host = spawn_stage(self._stage_host(), cmd, {**os.environ, "PYTHONUNBUFFERED": "1"},
                                           warn=lambda msg: (log.write(f"--- {msg}\n"), self.echo(f"  {msg}")))
            if isinstance(proc, StageProcess):
                log.write(f"--- pid {proc.pid}, forked from the stage host\n")
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            try:
                self._pump(proc, log, tail, stage.watch if progress is not None else None, progress, task,
                           cancelled=cancelled)
            except KeyboardInterrupt:
                self._stop_child(proc, log, tail)
                raise
        self.timings[stage.name] = round(time.time() - t0, 2)
        if proc.returncode != 0:
            pack = self._failpack()
            raise StageFailed(stage.name, proc.returncode, "\n".join(tail), pack)

    @staticmethod
    def _pump(proc, log, tail: list[str], watch=None, progress=None, task=None, deadline: float | None = None,
              cancelled: Callable[[], bool] | None = None) -> None:
        """Copy the child's output to the log (and `tail`) until it exits or `deadline` passes; `cancelled()`
        turning true is handled as a Ctrl-C (KeyboardInterrupt)."""
        while True:
            if cancelled is not None and cancelled():
                raise KeyboardInterrupt
            line = proc.stdout.readline()
            if line:
                log.write(line)
                tail.append(line.rstrip("\n"))
                del tail[:-200]
                continue
            if proc.poll() is not None:
                rest = proc.stdout.read() or ""
                log.write(rest)
                tail.extend(rest.splitlines())
                return
            if deadline is not None and time.time() > deadline:
                return
            if watch is not None:
                prog = watch()
                if prog:
                    progress.update(task, completed=prog[0], total=prog[1])
            time.sleep(0.2)

    def _stage_host(self) -> StageHost | None:
        """The warm process the stages fork from (rc1.runtime.stagefork), started at the first stage when
        `warm_stages`, its own output in logs/pipeline.log; None where it is off or stopped, and each stage starts
        cold."""
        if self.warm_stages and self._host is None and not self._host_tried:
            self._host_tried = True
            wanted, why = fork_wanted()
            if not wanted:
                _log.info("stage host off (%s): each stage starts as a new process", why)
                return None
            self._host = StageHost(self.ws.logs / "pipeline.log")
            weakref.finalize(self, self._host.close)
        return self._host if self._host is not None and self._host.alive() else None

    def _stop_child(self, proc, log, tail: list[str]) -> None:
        """Ctrl-C: let the running stage stop cleanly (the trainer finishes its step and checkpoints)
        while its output is still read, instead of leaving it to write into a closed pipe. A second
        Ctrl-C or INTERRUPT_GRACE_S seconds without an exit end the wait (SIGTERM, then SIGKILL)."""
        log.write(f"--- interrupted: waiting up to {INTERRUPT_GRACE_S} s for the stage to stop cleanly\n")
        # SIGINT even after a terminal's Ctrl-C: an interrupt sent to the pipeline alone did not reach the child
        stop_child(proc, INTERRUPT_GRACE_S, wait=lambda s: self._pump(proc, log, tail, deadline=time.time() + s))
        log.write(f"--- stage stopped (exit {proc.returncode})\n")

    def stop_judge(self) -> None:
        """Stop the local judge server the `judge: serve` stage started (nothing to stop is fine)."""
        subprocess.run([sys.executable, "-m", "rc1.cli.main", "--workdir", str(self.ws.root), "judge", "stop"],
                       capture_output=True)

    def _failpack(self) -> str | None:
        from rc1.runtime.failpack import make_failpack

        try:
            return self.ws.rel(make_failpack(self.ws))
        except OSError:
            return None

    def save_timings(self) -> None:
        from rc1.runtime.atomic import atomic_write_json

        path = self.ws.path(TIMINGS)
        prev = json.loads(path.read_text()) if path.exists() else {}
        prev.update(self.timings)
        atomic_write_json(path, prev)
