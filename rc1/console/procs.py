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


def _child(target: Callable, args: tuple, q) -> None:
    _quiet_child()
    if hasattr(os, "nice"):
        os.nice(10)  # background work yields the CPU to the console the operator is typing in
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


class ChildCall:
    """target(*args, progress=...) started in a daemon child process; poll `done()`, then `result()`.

    A daemon process (not a ProcessPoolExecutor) so that quitting the console never waits for it.
    """

    def __init__(self, target: Callable, *args: Any):
        _ensure_resource_tracker()
        self._q = _CTX.Queue()
        self._proc = _CTX.Process(target=_child, args=(target, args, self._q), daemon=True)
        self._proc.start()
        self._name = getattr(target, "__name__", str(target))
        self._outcome: tuple[str, Any] | None = None

    def done(self) -> bool:
        while self._outcome is None:
            try:
                kind, payload = self._q.get_nowait()
            except queue.Empty:
                if not self._proc.is_alive() and self._q.empty():
                    self._outcome = ("error", RuntimeError(f"{self._name} process exited (code "
                                                           f"{self._proc.exitcode}) without a result"))
                break
            if kind != "progress":
                self._outcome = (kind, payload)
        return self._outcome is not None

    def result(self) -> Any:
        while not self.done():
            import time

            time.sleep(0.02)
        self._proc.join(timeout=5)
        kind, payload = self._outcome
        if kind == "error":
            raise payload
        return payload
