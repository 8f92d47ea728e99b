"""`rc1 bench console`: console ready time, training-screen render with a large metrics.jsonl,
incremental update cost, and key-press response while a gate runs.

Targets (issue 6): ready <= 2 s; 100k-line metrics render <= 200 ms; incremental update <= 50 ms;
key press -> visible response <= 100 ms while a worker runs. Numbers, not asserts: the table says
which targets were met. Runs in a scratch workspace (a temp dir), never in the caller's files.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rc1.runtime.workspace import Workspace

TARGETS_MS = {"ready_ms": 2000, "training_first_render_ms": 200, "training_rerender_ms": 200,
              "preview_parse_and_plot_ms": 200,
              "incremental_update_ms": 50, "update_cost_ms": 50, "key_response_ms": 100}


def _metrics_line(step: int) -> str:
    rec = {"time": 1.7e9 + step, "heartbeat": 1.7e9 + step, "step": step, "loss": 2 * math.exp(-step / 5000) + 0.01 * (step % 7),
           "kl": 0.03 + 0.01 * math.sin(step / 300), "ratio": 1 + 0.02 * math.sin(step / 50), "clip_frac": 0.1,
           "lr": 1e-5, "reward": 0.5 + 0.3 * math.tanh(step / 20000), "entropy": 1.2, "completion_len": 200,
           "mem_used_mb": 2048 + step % 100, "sec_per_step": 0.8 + 0.1 * math.sin(step)}
    for i, d in enumerate(("correctness", "reasoning", "grounding", "clarity", "conciseness", "format", "clarification")):
        rec[f"reward/{d}"] = 0.1 * i + 0.2 * math.tanh(step / (10000 + 1000 * i))
    return json.dumps(rec)


def build_scratch(root: Path, lines: int) -> Workspace:
    ws = Workspace(root).ensure()
    (root / "configs").mkdir(exist_ok=True)
    with open(ws.metrics_path, "w") as fh:
        for s in range(1, lines + 1):
            fh.write(_metrics_line(s) + "\n")
    ws.train_log.write_text("".join(f"step {i} ok\n" for i in range(500)))
    return ws


def _burn(stop_file: str, max_seconds: float, progress=None):
    """A stand-in gate: pure-Python CPU work (holding the GIL like real gate code) until the bench
    creates `stop_file` (or `max_seconds` pass)."""
    from rc1.machine.service import AdvanceOutcome

    end = time.monotonic() + max_seconds
    x = 0
    while time.monotonic() < end and not os.path.exists(stop_file):
        x += sum(i * i for i in range(2000))
    return AdvanceOutcome("idle", "idle", "round1")


class _BurningBackend:
    """The real backend, except that `advance` runs a CPU-bound stand-in gate the same way the real
    one runs gates (in a child process via rc1.console.procs)."""

    def __new__(cls, ws: Workspace, stop_file: Path, max_seconds: float = 120.0):
        from rc1.console.backend import ConsoleBackend
        from rc1.console.procs import call_in_process

        class Burning(ConsoleBackend):
            def advance(self, target, progress=None, on_gate=None):
                return call_in_process(_burn, (str(stop_file), max_seconds), progress)

            def trainer_status(self):  # no trainer in the scratch workspace
                return None

        return Burning(ws)


async def _wait(cond, what: str, timeout: float = 60.0, step: float = 0.002) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"console bench: timed out waiting for {what}")  # noqa
        await asyncio.sleep(step)


async def _in_app(ws: Workspace, quick: bool) -> dict:
    from rc1.console.app import make_app
    from rc1.console.screens.reports import ReportsScreen
    from rc1.console.screens.training import TrainingScreen

    out: dict = {}
    stop_file = ws.root / "stop-burn"
    backend = _BurningBackend(ws, stop_file)
    app = make_app(backend=backend, poll_interval=0.05, watch_interval=0.5)
    apply_ms: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(lambda: app.view is not None and app.metrics is not None and app.live_warm, "the first workspace load")
        orig = TrainingScreen.show_metrics

        def timed(self, snap, plots):
            t = time.perf_counter()
            orig(self, snap, plots)
            apply_ms.append((time.perf_counter() - t) * 1000)

        TrainingScreen.show_metrics = timed
        try:
            t0 = time.perf_counter()
            await pilot.press("3")
            await _wait(lambda: app.metrics and len(app.metrics[1]) == 8 and isinstance(app.screen, TrainingScreen)
                        and apply_ms, "the first plots")
            out["training_first_render_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            out["first_render_exact"] = app.metrics[0].exact
            out["first_render_records"] = app.metrics[0].records
            # again, now that the screen exists (the common case: switching back to it)
            await pilot.press("1")
            apply_ms.clear()
            t0 = time.perf_counter()
            await pilot.press("3")
            await _wait(lambda: isinstance(app.screen, TrainingScreen) and apply_ms, "the plots again")
            out["training_rerender_ms"] = round((time.perf_counter() - t0) * 1000, 1)  # last plots, shown at once
            await _wait(lambda: len(apply_ms) >= 2, "the plots redrawn")
            out["training_redraw_ms"] = round((time.perf_counter() - t0) * 1000, 1)  # redrawn with the newest data
            t_scan = time.perf_counter()
            await _wait(lambda: app.metrics[0].exact, "the full scan", timeout=600, step=0.01)
            out["full_scan_background_s"] = round(time.perf_counter() - t_scan, 2)
            out["records_after_scan"] = app.metrics[0].records
            # incremental: append one line, wait until it is on screen
            latencies = []
            step = app.metrics[0].records
            for _ in range(5 if quick else 20):
                step += 1
                apply_ms.clear()
                t = time.perf_counter()
                with open(ws.metrics_path, "a") as fh:
                    fh.write(_metrics_line(step) + "\n")
                await _wait(lambda: app.metrics[0].records >= step and apply_ms,
                            f"record {step} on screen (have {app.metrics[0].records}, screen {type(app.screen).__name__})")
                latencies.append((time.perf_counter() - t) * 1000)
            out["incremental_update_ms"] = round(statistics.median(latencies), 1)
            out["incremental_update_ms_max"] = round(max(latencies), 1)
            out["incremental_ui_apply_ms"] = round(statistics.median(apply_ms), 2) if apply_ms else None
        finally:
            TrainingScreen.show_metrics = orig
        # key presses while a CPU-bound gate runs (every screen visited once before: they exist)
        for key in "231":
            await pilot.press(key)
        await pilot.press("a")
        await _wait(lambda: type(app.screen).__name__ == "ConfirmScreen", "the confirmation")
        await pilot.press("y")
        running = [w for w in app.workers if w.group == "action"]
        await _wait(lambda: any(w.is_running for w in running), "the gate worker to start")
        await asyncio.sleep(1.0)  # the child process is up and burning
        responses = []
        for key, screen_type in (("2", ReportsScreen), ("3", TrainingScreen)) * (2 if quick else 4):
            t = time.perf_counter()
            press = asyncio.create_task(pilot.press(key))
            await _wait(lambda: isinstance(app.screen, screen_type), f"screen {screen_type.__name__}", step=0.001)
            responses.append((time.perf_counter() - t) * 1000)
            await press
        out["key_response_ms"] = round(statistics.median(responses), 1)
        out["key_response_ms_max"] = round(max(responses), 1)
        out["gate_worker_was_running"] = any(w.is_running for w in running)  # still running after the presses
        stop_file.touch()
        await _wait(lambda: not any(w.is_running for w in running), "the stand-in gate to stop", timeout=120)
    return out


def _direct_costs(ws: Workspace, quick: bool) -> dict:
    """CPU cost of the data side, without the UI: preview of the big file, one incremental update."""
    from rc1.console.metrics_feed import MetricsFeed
    from rc1.console.plotting import render_plot

    def render_all(snap) -> None:
        for series in snap.series.values():
            render_plot(series, 27, 10)

    out = {}
    import numpy  # noqa: F401 - imported once per console (the live worker warms it up); not per render

    render_plot([("warm-up", [0.0, 1.0], [0.0, 1.0])], 20, 6)
    t, c = time.perf_counter(), time.thread_time()
    feed = MetricsFeed(ws.metrics_path)
    snap = feed.start()
    render_all(snap)
    out["preview_parse_and_plot_ms"] = round((time.perf_counter() - t) * 1000, 1)
    out["preview_parse_and_plot_cpu_ms"] = round((time.thread_time() - c) * 1000, 1)
    # adopt the full scan, then time appended lines
    while feed.catching_up:
        feed.step()
        time.sleep(0.05)
    costs, cpu = [], []
    step = feed.store.records
    for _ in range(5 if quick else 20):
        step += 1
        with open(ws.metrics_path, "a") as fh:
            fh.write(_metrics_line(step) + "\n")
        t, c = time.perf_counter(), time.thread_time()
        feed.step()
        render_all(feed.snapshot())
        costs.append((time.perf_counter() - t) * 1000)
        cpu.append((time.thread_time() - c) * 1000)
    out["update_cost_ms"] = round(statistics.median(costs), 1)
    out["update_cost_cpu_ms"] = round(statistics.median(cpu), 1)
    return out


def _ready_time(ws: Workspace) -> float:
    """Spawn the real `rc1 console` in a pty; seconds until the state and footer are drawn."""
    import pexpect

    exe = shutil.which("rc1", path=os.path.dirname(sys.executable))
    argv = [exe] if exe else [sys.executable, "-m", "rc1.cli.main"]
    argv += ["--workdir", str(ws.root), "console"]
    env = {**os.environ, "TERM": "xterm-256color"}
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], dimensions=(40, 120), env=env, timeout=30, encoding="utf-8",
                          codec_errors="replace")
    try:
        child.expect("Overview")
        child.expect("idle")
        ready = time.perf_counter() - t
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ready, cpu


def run(ws: Workspace, quick: bool = False, lines: int | None = None, **_: object) -> dict:
    n = int(lines or (20_000 if quick else 100_000))
    with tempfile.TemporaryDirectory(prefix="rc1-console-bench-") as tmp:
        t = time.perf_counter()
        scratch = build_scratch(Path(tmp) / "ws", n)
        build_s = time.perf_counter() - t
        runs = [_ready_time(scratch) for _ in range(1 if quick else 3)]
        ready = [r for r, _ in runs]
        result = {"metrics_lines": n, "metrics_mb": round(scratch.metrics_path.stat().st_size / 2**20, 1),
                  "build_scratch_s": round(build_s, 1), "ready_ms": round(min(ready) * 1000, 1),
                  "ready_ms_all": [round(r * 1000, 1) for r in ready],
                  # CPU of the whole console process, start to exit (an upper bound of the start-up's own cost)
                  "ready_process_cpu_ms": round(min(c for _, c in runs) * 1000, 1)}
        result.update(_direct_costs(scratch, quick))
        result.update(asyncio.run(_in_app(scratch, quick)))
    result["targets_ms"] = TARGETS_MS
    result["met"] = {k: (result.get(k) is not None and result[k] <= v) for k, v in TARGETS_MS.items()}
    result["cpu_count"] = os.cpu_count()
    result["load_average"] = [round(x, 1) for x in os.getloadavg()]
    _print(result)
    return result


def _print(r: dict) -> None:
    rows = [("console ready (pty, real rc1 console)", "ready_ms"),
            (f"key 3 -> training plots shown, {r['metrics_lines']} lines", "training_first_render_ms"),
            ("  key 3 again (screen exists) -> plots shown", "training_rerender_ms"),
            ("  of which: preview parse + 8 plots (no UI)", "preview_parse_and_plot_ms"),
            ("append -> on screen (poll 50 ms included)", "incremental_update_ms"),
            ("  of which: parse + 8 plots per update (no UI)", "update_cost_ms"),
            ("key press -> screen switched, gate running", "key_response_ms")]
    cpu = {"ready_ms": "ready_process_cpu_ms", "preview_parse_and_plot_ms": "preview_parse_and_plot_cpu_ms",
           "update_cost_ms": "update_cost_cpu_ms"}
    print(f"{'measure':48} {'wall ms':>9} {'cpu ms':>8} {'target':>8}  ok")
    for label, key in rows:
        print(f"{label:48} {r.get(key)!s:>9} {r.get(cpu.get(key, ''), '')!s:>8} {TARGETS_MS[key]:>8}  "
              f"{'yes' if r['met'][key] else 'NO'}")
    print(f"first render from a sample of {r.get('first_render_records')} records; full scan of all lines took "
          f"{r.get('full_scan_background_s')} s in a child process; UI apply per update {r.get('incremental_ui_apply_ms')} ms; "
          f"load average {r.get('load_average')} on {r.get('cpu_count')} CPUs")
