"""Console test helpers (a plain module; tests/console/conftest.py's fixture uses it).

A mid-pipeline workspace built with the real core (machine, fingerprints, checkpoints, metrics),
made deterministic (fixed clock, fixed ticket key, fixed git commit) so screen snapshots are stable;
and a backend that records the console's action calls instead of starting processes."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from rc1.console.backend import ConsoleBackend
from rc1.gates.base import Check, GateResult
from rc1.runtime.fingerprint import Evidence
from rc1.runtime.workspace import Workspace

FIXED_TIME = "2026-11-22T03:00:00Z"
DIMS = ("correctness", "reasoning", "grounding", "clarity", "conciseness", "format", "clarification")


def metrics_line(step: int) -> str:
    rec = {"time": 1795000000.0 + step, "heartbeat": 1795000000.0 + step, "step": step,
           "loss": 2.0 * math.exp(-step / 120) + 0.1 * math.sin(step / 7), "kl": 0.02 + 0.01 * math.sin(step / 30),
           "ratio": 1.0 + 0.05 * math.sin(step / 11), "clip_frac": 0.1 + 0.05 * math.cos(step / 13), "lr": 1e-5 * min(1, step / 50),
           "reward": 0.2 + 0.5 * (1 - math.exp(-step / 150)), "entropy": 1.5, "completion_len": 120 + step % 17,
           "mem_used_mb": 900 + step % 50, "sec_per_step": 0.5 + 0.1 * math.sin(step / 5)}
    for i, d in enumerate(DIMS):
        rec[f"reward/{d}"] = 0.1 * i + 0.3 * (1 - math.exp(-step / (100 + 20 * i)))
    return json.dumps(rec)


def write_metrics(path: Path, steps: range, *, corrupt: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        for s in steps:
            fh.write(metrics_line(s) + "\n")
        for _ in range(corrupt):
            fh.write('{"step": 12, "loss": 0.5, "kl"\n')  # a torn write


def _gate_results(gate: str) -> list[GateResult]:
    ws_ev = [Evidence("data/rollouts/rc1_seed.jsonl", "ab" * 32)]
    if gate == "round1":
        return [GateResult("pool", [Check.at_least("distinct-2", 0.71, 0.6), Check.at_most("duplicates", 0.004, 0.02)], ws_ev),
                GateResult("resources", [Check.greater("free disk GB", 80.0, 50)], [])]
    return [GateResult("pool", [Check.at_least("distinct-2", 0.71, 0.6)], ws_ev),
            GateResult("scorer", [Check.less("cache hit rate", 0.97, 0.95), Check.greater("latency s", 0.8, 0)],
                       [Evidence("reports/judge_stats.json", "cd" * 32)]),
            GateResult("shadow_run", [Check.unavailable("shadow run pre_run_check", "reports/shadow_run_pre_run_check.json missing")])]


def fixed_clock(monkeypatch) -> None:
    import rc1.machine.machine as machine
    import rc1.state.store as store

    monkeypatch.setattr(store, "now_iso", lambda: FIXED_TIME)
    monkeypatch.setattr(store, "git_commit", lambda: "0123456789ab")
    monkeypatch.setattr(machine, "git_commit", lambda: "0123456789ab")


def gate_runner(gate: str) -> list[GateResult]:
    return _gate_results(gate)


def pass_round2(ws: Workspace) -> None:
    """Move the fixture workspace on to round2_pass with gates that pass (training may start from there)."""
    from rc1.machine.service import advance, open_machine

    passing = lambda gate: [GateResult("pool", [Check.at_least("distinct-2", 0.71, 0.6)], [])]  # noqa: E731
    advance(ws, "round2_pass", machine=open_machine(ws, gate_runner=passing))


def build_workspace(root: Path, monkeypatch, *, metrics_steps: int = 240, corrupt: int = 2) -> Workspace:
    """round1 passed (ticket, audit), round2 refused (failing checks), reports, metrics, logs, a checkpoint."""
    from rc1.machine.service import advance, open_machine
    from rc1.runtime.checkpoint import write_checkpoint
    from rc1.runtime.fingerprint import register_artifact

    fixed_clock(monkeypatch)
    ws = Workspace(root)
    ws.ensure()
    (root / "configs").mkdir(exist_ok=True)
    (ws.reports / "state").mkdir(parents=True, exist_ok=True)
    (ws.reports / "state" / "ticket.key").write_text("11" * 32)
    pool = ws.path("data/rollouts/rc1_seed.jsonl")
    pool.parent.mkdir(parents=True, exist_ok=True)
    pool.write_text('{"id": "a"}\n')
    register_artifact(ws, pool, "pool")
    advance(ws, "round1", machine=open_machine(ws, gate_runner=gate_runner))
    advance(ws, "round2", machine=open_machine(ws, gate_runner=gate_runner))

    def write(rel: str, doc) -> None:
        p = ws.path(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=1))

    write("reports/judge_stats.json", {"cache_hit_rate": 0.97, "rate_429": 0.01, "latency_avg_s": 0.84})
    write("reports/diversity_report.json", {"n": 3000, "distinct_2": 0.71, "kl3_vs_v1": 0.22, "roles": 5, "styles": 4,
                                            "task_mix": {"hotpotqa": 0.45, "strategyqa": 0.3, "gsm8k": 0.25},
                                            "dedup": {"exact": 3, "near": 9, "rate": 0.004}, "passed": True})
    write("reports/rc1/difficulty_report.json", {
        "histograms": {"clue_overlap": {"edges": [0, 0.2, 0.4, 0.6, 0.8, 1.0], "counts": [120, 340, 280, 90, 20]},
                       "turns": {"1": 400, "2": 250, "3": 120, "4": 60}},
        "per_task": {"hotpotqa": {"easy": 0.25, "medium": 0.4, "hard": 0.35},
                     "strategyqa": {"easy": 0.28, "medium": 0.38, "hard": 0.34},
                     "gsm8k": {"easy": 0.3, "medium": 0.36, "hard": 0.34}},
        "bounds": {"len_max": 3100, "turns_max": 6, "tool_hops_max": 5}})
    write("reports/calibration_report_20261121.json", {"spearman": 0.62, "kendall": 0.48, "n": 64,
                                                       "weights": {d: round(1 / 7, 4) for d in DIMS}})
    write("reports/shadow_run_pre_run_check.json", {"tag": "pre_run_check", "n": 245, "success_rate": 0.41,
                                                    "overclar_rate": 0.08, "avg_turns": 2.3})
    write("reports/rc1/rc1_report.md", "# RC1 report\n\nNot final: **eval** has not run yet.\n\n- state: round1\n")
    write_metrics(ws.metrics_path, range(1, metrics_steps + 1), corrupt=corrupt)
    with open(ws.metrics_path, "a") as fh:
        fh.write('{"step": 9999, "loss"')  # a partial last line (trainer mid-write)
    write("logs/train.log", "".join(f"2026-11-22 03:00:{i:02d} INFO rc1.train: step {i} loss 0.5\n" for i in range(12)))
    for step in (100, 200):
        write_checkpoint(ws, "checkpoints/local", step, {"model.safetensors": lambda p, s=step: p.write_bytes(b"w" * (1000 + s))},
                         {"run": "local", "config_hash": "c0ffee"})
    return ws


@dataclass(frozen=True)
class FakeTrainerStatus:
    pid: int | None = 4242
    alive: bool = True
    started: str | None = FIXED_TIME
    step: int | None = 240
    heartbeat_age_s: float | None = 3.0
    last_error_report: str | None = None


class RecordingBackend(ConsoleBackend):
    """The real backend for reading; actions are recorded (no processes, no files) except `advance`,
    which runs the real machine with the fixture's gate runner."""

    def __init__(self, ws: Workspace, config_path: str | None = None, *, trainer: FakeTrainerStatus | None = None):
        super().__init__(ws, config_path)
        self.calls: list[tuple] = []
        self.trainer = trainer if trainer is not None else FakeTrainerStatus()

    def advance(self, target, progress=None, on_gate=None):
        from rc1.machine.service import advance, open_machine

        self.calls.append(("advance", target))
        if progress:
            progress(f"gate for {target}")
        return advance(self.ws, target, progress=progress, on_gate=on_gate,
                       machine=open_machine(self.ws, gate_runner=gate_runner))

    def start_trainer(self, resume=None):
        self.calls.append(("start_trainer", resume))
        return 4242

    def stop_trainer(self):
        self.calls.append(("stop_trainer",))
        return True

    def trainer_status(self):
        return self.trainer

    def failpack(self):
        self.calls.append(("failpack",))
        return self.ws.reports / "FAIL_test.tgz"

    def sync_export(self, round_n=None):
        self.calls.append(("sync_export", round_n))
        return self.ws.reports / "sync" / "SYNC_round2.json"

    def max_steps(self):
        return 2000


# -- a pipeline whose stages are small scripts, run by the real Pipeline.run_stage ----------------------------
# Each stage's script runs in place of its `rc1` command (see `scripted_stages`); a finished stage leaves a
# marker file that its `done()` reads, as the real stages' outputs do.
TRAIN_STEP_S_ENV = "SCRIPTED_TRAIN_STEP_S"  # seconds per step of the "train" script (default 0.02)
STAGE_SCRIPTS = {
    "ok": "import pathlib, sys; print('working'); pathlib.Path(sys.argv[1]).write_text('done')",
    # training-like: counts steps into a file (resuming from it), stops cleanly on SIGINT, marks done at 1000
    # (20 s of steps: a cancel sent after step 20 arrives in time even on a loaded 2-core machine; a test that lets
    # a run finish sets TRAIN_STEP_S_ENV lower)
    "train": f"""
import os, pathlib, sys, time
pace = float(os.environ.get({TRAIN_STEP_S_ENV!r}, '0.02'))
""" + """marker = pathlib.Path(sys.argv[1]); steps = marker.with_suffix('.step'); tmp = marker.with_suffix('.tmp')
step = int(steps.read_text()) if steps.exists() else 0
print(f'resuming from step {step}' if step else 'starting at step 0', flush=True)
try:
    while step < 1000:
        time.sleep(pace); step += 1; tmp.write_text(str(step)); os.replace(tmp, steps)  # whole, never torn
except KeyboardInterrupt:  # the step file is the checkpoint: SIGINT between `step += 1` and os.replace must not
    step = int(steps.read_text()) if steps.exists() else 0  # report a step the file does not hold
    print(f'stopped cleanly at step {step} (checkpoint written)', flush=True); sys.exit(130)
marker.write_text('done'); print('trained', flush=True)
""",
    "refuse": "print('REFUSED: gate round2 did not pass; state stays round1'); raise SystemExit(3)",
    "crash": "print('Traceback (most recent call last):'); print('RuntimeError: disk on fire'); raise SystemExit(1)",
}


def scripted_stages(ws: Workspace, plan: list[tuple[str, str]]):
    """Stages named as given, each running STAGE_SCRIPTS[kind]; done once its marker file exists."""
    from rc1.pipeline import Stage

    def marker(name: str) -> Path:
        return ws.root / "stage_markers" / (name.replace(" ", "_").replace(":", "") + ".done")

    (ws.root / "stage_markers").mkdir(exist_ok=True)
    stages = []
    for name, kind in plan:
        m = marker(name)
        watch = (lambda m=m: (int(m.with_suffix(".step").read_text()), 1000)
                 if m.with_suffix(".step").exists() else None) if kind == "train" else None
        stages.append(Stage(name, ["__script__", kind, str(m)], lambda m=m: m.exists(), watch=watch))
    return stages


def route_scripts(monkeypatch) -> None:
    """Popen of `rc1 ... __script__ KIND MARKER` (a scripted stage) runs the script instead of rc1."""
    import subprocess
    import sys

    real = subprocess.Popen

    def popen(cmd, *a, **kw):
        if isinstance(cmd, list) and "__script__" in cmd:
            i = cmd.index("__script__")
            cmd = [sys.executable, "-c", STAGE_SCRIPTS[cmd[i + 1]], cmd[i + 2]]
        return real(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", popen)


def scripted_pipeline(ws: Workspace, plan: list[tuple[str, str]]):
    """The real rc1.pipeline.Pipeline (run_stage, _stop_child, timings) over scripted stages."""
    from rc1.config.schema import TrainConfig
    from rc1.pipeline import Pipeline

    class Scripted(Pipeline):
        def stages(self):
            return scripted_stages(self.ws, plan)

    return Scripted(ws, "configs/scripted.yaml", TrainConfig.model_construct(), echo=lambda _m: None)


class PipelineBackend(RecordingBackend):
    """RecordingBackend whose pipeline is `scripted_pipeline(plan)`."""

    def __init__(self, ws: Workspace, plan: list[tuple[str, str]], **kw):
        super().__init__(ws, "configs/scripted.yaml", **kw)
        self.plan = plan

    def pipeline(self):
        return scripted_pipeline(self.ws, self.plan)

    def pipeline_stages(self):
        return [(s.name, s.done()) for s in scripted_stages(self.ws, self.plan)]

    def stop_judge(self):
        self.calls.append(("stop_judge",))


# -- the plotted reports: a difficulty fit, curriculum weights in metrics lines, an eval report ---------------
DIFFICULTY_FIT = {
    "band": [0.2, 0.6],
    "tasks": {
        "gsm8k": {"levels": [
            {"level": 0, "name": "1 op", "n": 32, "successes": 9, "pass_rate": 0.28, "ci": [0.15, 0.45], "chosen": True},
            {"level": 1, "name": "2 ops", "n": 32, "successes": 4, "pass_rate": 0.125, "ci": [0.05, 0.28], "chosen": True},
            {"level": 2, "name": "3 ops", "n": 32, "successes": 0, "pass_rate": 0.0, "ci": [0.0, 0.11], "chosen": False},
            # not measured (rc1.training.fit stops above the band): no rate, no CI
            {"level": 3, "name": "4 ops", "n": 0, "successes": 0, "pass_rate": None, "ci": None, "chosen": False}],
            "chosen": [0, 1], "dropped": False, "reason": "levels 0-1 reach the band"},
        "hotpotqa": {"levels": [
            {"level": 0, "name": "1 hop", "n": 32, "successes": 0, "pass_rate": 0.0, "ci": [0.0, 0.11], "chosen": False}],
            "chosen": [], "dropped": True, "reason": "no level reaches 0.2"},
        "strategyqa": {"levels": [
            {"level": 0, "name": "yes/no", "n": 32, "successes": 16, "pass_rate": 0.5, "ci": [0.33, 0.67], "chosen": True}],
            "chosen": [0], "dropped": False, "reason": None},
    },
}


def curriculum_fields(step: int) -> dict:
    """curriculum/<task>/L<level>/{weight,pass_rate}: the mix moves from L0 to L1 as L0 is learned."""
    shift = min(1.0, step / 240)
    return {"curriculum/gsm8k/L0/weight": round(0.8 - 0.5 * shift, 4), "curriculum/gsm8k/L1/weight": round(0.2 + 0.5 * shift, 4),
            "curriculum/gsm8k/L0/pass_rate": round(0.28 + 0.4 * shift, 4), "curriculum/gsm8k/L1/pass_rate": round(0.12 + 0.2 * shift, 4)}


def eval_report() -> dict:
    """An eval report (rc1.eval.harness shape, trimmed to what the held-out gain chart reads)."""
    by_task = {"gsm8k": {"n": 40, "base": 0.1, "trained": 0.3, "delta_pp": 20.0, "ci95_pp": [7.5, 32.5]},
               "strategyqa": {"n": 40, "base": 0.55, "trained": 0.5, "delta_pp": -5.0, "ci95_pp": [-17.5, 7.5]}}
    return {"kind": "eval", "heldout_set": "heldout", "seeds": [7],
            "runs": [{"seed_index": 0, "seed": 7, "results": {"heldout": {"delta": {
                "success": {"n": 80, "delta_pp": 7.5, "ci95_pp": [-1.25, 16.25]}, "by_task": by_task}}}}]}


def write_plotted_reports(ws: Workspace) -> None:
    """Add the difficulty fit, an eval report, and curriculum weights on every metrics line."""
    from rc1.runtime.layout import DIFFICULTY_FIT_REPORT

    ws.path(DIFFICULTY_FIT_REPORT).write_text(json.dumps(DIFFICULTY_FIT, indent=1))
    ws.path("reports/eval_20261122T030000Z.json").write_text(json.dumps(eval_report(), indent=1))
    lines = ws.metrics_path.read_text().split("\n")
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            out.append(line)
            continue
        out.append(json.dumps({**rec, **curriculum_fields(rec["step"])}))
    ws.metrics_path.write_text("\n".join(out))


# -- driving the app in tests -------------------------------------------------------------------------------
async def wait_for(pilot, cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def text_of(widget) -> str:
    """Plain text a Static/Label currently shows (Rich renderables rendered wide, no styles)."""
    import io

    from rich.console import Console

    content = widget.content
    if isinstance(content, str):
        return content
    console = Console(width=200, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as cap:
        console.print(content)
    return cap.get()


