"""Stopping a command that runs other rc1 commands as children, without leaving them running.

`rc1 pipeline` runs each stage as a child process and `rc1 bench seeds` / `rc1 bench gates` run `rc1 pipeline`.
Ctrl-C in a terminal reaches the whole foreground process group; a `kill PID` (SIGTERM) or a job scheduler's stop
reaches only the process it names, and Python's default SIGTERM action ends that process at once: its child
(a training run, an eval) went on alone, with nobody reading its output, and on a 2-core machine beside the next
run it doubled every timing measured there.

`terminate_as_interrupt()` makes SIGTERM take the Ctrl-C path (KeyboardInterrupt), so the parent's own clean stop
runs: the pipeline lets its stage stop (the trainer finishes its step and checkpoints) and stops the judge server.
`run_child()` runs one child to its end, in its own session, and on Ctrl-C or SIGTERM passes exactly one SIGINT
on to it, waits for it, and only then re-raises.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from typing import Callable, Iterator, Sequence

INTERRUPT_GRACE_S = 180  # a training step on a laptop CPU plus its checkpoint


def interruptible() -> None:
    """In a child, before exec: SIGINT back to its default. A command started in the background of a
    non-interactive shell (`make run &`), or by a process that ignores SIGINT, passes the ignore on, and
    Python keeps an inherited ignore: the child would then never see the Ctrl-C / cancel that lets it
    checkpoint and stop cleanly."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl-C does); the previous
    handler is restored after it. Elsewhere than in the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_child(proc: subprocess.Popen, grace_s: float = INTERRUPT_GRACE_S,
               wait: Callable[[float], object] | None = None) -> int:
    """SIGINT to `proc`, then up to `grace_s` seconds for it to stop cleanly (a second Ctrl-C or SIGTERM ends
    the wait), then SIGTERM and, 10 s later, SIGKILL. Returns its exit code. `wait(seconds)` waits for it
    (default `proc.wait`; the pipeline's keeps reading the child's output meanwhile)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        (wait or proc.wait)(grace_s)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def run_child(argv: Sequence[str], *, cwd=None, grace_s: float = INTERRUPT_GRACE_S) -> int:
    """Run `argv` to its end and return its exit code. It runs in its own session, so a terminal's Ctrl-C
    reaches it once, through here: on Ctrl-C or SIGTERM it gets one SIGINT (stop_child), and the
    KeyboardInterrupt is re-raised once it has stopped."""
    with terminate_as_interrupt():
        proc = subprocess.Popen(list(argv), cwd=cwd, preexec_fn=interruptible, start_new_session=True)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            stop_child(proc, grace_s)
            raise
