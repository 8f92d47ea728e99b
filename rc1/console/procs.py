"""Run CPU-heavy core calls in a spawned process, so the console's UI thread keeps the GIL.

A gate computing n-gram statistics or a full parse of a 100k-line metrics file in a worker
*thread* starves Textual's event loop (key presses took seconds); in a child process they
cost the UI nothing. The worker thread that waits here sleeps in `Queue.get`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
import threading
import traceback
from typing import Any, Callable

_CTX = mp.get_context("spawn")  # never fork a process that runs UI threads
_START_LOCK = threading.Lock()


def _quiet_child() -> None:
    """The child shares the console's terminal: anything it printed would corrupt the screen.
    Results and errors travel back through the queue instead."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _ensure_resource_tracker() -> None:
    """multiprocessing starts its resource tracker passing sys.stderr's fd; under Textual (or
    pytest) sys.stderr is a capture object without a real fd, so start it with the real one."""
    from multiprocessing import resource_tracker

    with _START_LOCK:
        saved = sys.stderr
        try:
            sys.stderr = sys.__stderr__ or saved
            resource_tracker.ensure_running()
        finally:
            sys.stderr = saved


def _run_quiet(target: Callable, *args: Any) -> Any:
    _quiet_child()
    return target(*args)


def _child(target: Callable, args: tuple, q) -> None:
    _quiet_child()
    try:
        result = target(*args, progress=lambda msg: q.put(("progress", str(msg))))
        q.put(("result", result))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            exc.add_note(f"in the child process:\n{tb}")
            q.put(("error", exc))
        except Exception:  # noqa: BLE001 - unpicklable exception: send its text
            q.put(("error", RuntimeError(f"{type(exc).__name__}: {exc}\n{tb}")))


def call_in_process(target: Callable, args: tuple, progress: Callable[[str], None] | None = None) -> Any:
    """target(*args, progress=...) in a spawned child; returns its result or raises its exception."""
    _ensure_resource_tracker()
    q = _CTX.Queue()
    proc = _CTX.Process(target=_child, args=(target, args, q), daemon=True)
    proc.start()
    try:
        while True:
            try:
                kind, payload = q.get(timeout=0.5)
            except queue.Empty:
                if not proc.is_alive():
                    raise RuntimeError(f"{getattr(target, '__name__', target)} process exited "
                                       f"(code {proc.exitcode}) without a result") from None
                continue
            if kind == "progress":
                if progress is not None:
                    progress(payload)
            elif kind == "result":
                return payload
            else:
                raise payload
    finally:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def submit(target: Callable, *args: Any):
    """A Future for target(*args) in a one-off spawned process (for non-blocking polling)."""
    from concurrent.futures import ProcessPoolExecutor

    _ensure_resource_tracker()
    pool = ProcessPoolExecutor(max_workers=1, mp_context=_CTX)
    future = pool.submit(_run_quiet, target, *args)
    future.add_done_callback(lambda _f: pool.shutdown(wait=False))
    return future
