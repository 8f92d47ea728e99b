"""A SIGTERM to a command that runs rc1 commands as children (rc1 pipeline, rc1 bench seeds/gates) stops the
child cleanly instead of leaving it running alone (rc1.runtime.interrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CHILD = """
import os, signal, sys, time
def stop(*_):
    time.sleep(0.3)  # a step finishing, a checkpoint written
    open(sys.argv[1], "a").write("stopped cleanly\\n")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
open(sys.argv[1], "a").write(f"running {os.getpid()}\\n")
time.sleep(60)
open(sys.argv[1], "a").write("ran to its end\\n")
"""

PARENT = """
import sys
from rc1.runtime.interrupt import run_child
try:
    run_child([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace_s=20)
except KeyboardInterrupt:
    open(sys.argv[2], "a").write("parent interrupted\\n")
    sys.exit(130)
"""


def _wait_for(path, text: str, timeout: float = 30.0) -> str:
    end = time.time() + timeout
    while time.time() < end:
        got = path.read_text() if path.exists() else ""
        if text in got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path}: {got!r}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_to_the_parent_stops_its_child_cleanly_and_waits_for_it(tmp_path):
    """kill PARENT: the child gets one SIGINT, stops cleanly, and is gone before the parent exits (with
    Python's default SIGTERM the parent died at once and the child slept on, unread)."""
    out = tmp_path / "events.txt"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(out)])
    got = _wait_for(out, "running")
    child_pid = int(got.split("running ")[1].split()[0])
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) == 130
    lines = out.read_text().splitlines()
    assert lines[1:] == ["stopped cleanly", "parent interrupted"]  # the child stopped before the parent went
    assert not _alive(child_pid)


def test_a_terminal_ctrl_c_reaches_the_child_once_through_the_parent(tmp_path):
    """The child runs in its own session: a Ctrl-C sent to the parent's process group reaches the parent only,
    which passes one SIGINT on (a second one would end the child's clean stop early)."""
    out = tmp_path / "events.txt"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(out)], start_new_session=True)
    got = _wait_for(out, "running")
    child_pid = int(got.split("running ")[1].split()[0])
    assert os.getpgid(child_pid) != os.getpgid(parent.pid)
    os.killpg(parent.pid, signal.SIGINT)
    assert parent.wait(30) == 130
    assert out.read_text().splitlines()[1:] == ["stopped cleanly", "parent interrupted"]


def test_terminate_as_interrupt_restores_the_previous_handler():
    import pytest

    from rc1.runtime.interrupt import terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode boundary
    assert signal.getsignal(signal.SIGTERM) is before
