"""The real `rc1 console` in a pseudo-terminal: it draws the workspace's state and `q` exits 0."""

from __future__ import annotations

import os
import shutil
import sys

import pexpect


def rc1_argv() -> list[str]:
    exe = shutil.which("rc1", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "rc1.cli.main"]


def test_rc1_console_in_a_pty_shows_state_and_quits_with_q(console_ws):
    argv = rc1_argv() + ["--workdir", str(console_ws.root), "console"]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    child = pexpect.spawn(argv[0], argv[1:], dimensions=(40, 120), env=env, timeout=40, encoding="utf-8",
                          codec_errors="replace")
    try:
        child.expect("Overview")          # the footer is drawn
        child.expect("round2_pass")       # the state diagram / blockers from the workspace
        child.expect("cache hit rate")    # a failing check of the refused round2 gate
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
