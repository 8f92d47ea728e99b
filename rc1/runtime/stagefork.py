"""Stage processes forked from a warm host instead of started cold.

`rc1 pipeline` runs each of its ~24 stages as its own `rc1` command. A cold `python -m rc1.cli.main` imports
torch, transformers, numpy, scipy and rc1's own modules again for every stage: 1-3 s each on a laptop CPU, 23 s
of a 2-core `make run` (docs/benchmarks.md). `StageHost` starts one process (rc1.cli.stagehost) that imports
them once, while the first stages run cold, and then forks one child per stage: the child is the same `rc1` command with the same argv,
working directory, environment and stdout/stderr (a pipe the pipeline reads), run to its exit code. The stage
still runs in its own process, so a crash, a leak or `os._exit` in a stage cannot reach the pipeline or the next
stage, and SIGINT / SIGTERM reach it exactly as they reach a cold child.

`StageProcess` is the part of `subprocess.Popen` the pipeline uses (pid, stdout, poll, wait, send_signal,
terminate, kill, returncode), so `rc1.runtime.interrupt.stop_child` stops it the same way.

Linux only: on macOS, forking a process that loaded Apple's frameworks (torch's MPS backend) is not safe, so
there, and wherever the host cannot start or dies, `spawn_stage` starts the cold child as before, with one line
saying why. RC1_STAGE_FORK=0 turns the host off (a cold child per stage, the behaviour before it). The pipeline
starts a host only for a run of many stages (`Pipeline.warm_stages`): for one stage its imports would only
compete with the stage.
"""

from __future__ import annotations

import io
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Callable, Sequence

from rc1.runtime.interrupt import interruptible

log = logging.getLogger("rc1.pipeline")

HOST_MODULE = "rc1.cli.stagehost"
ENV_SWITCH = "RC1_STAGE_FORK"
_HEADER = struct.Struct("!I")


def fork_wanted() -> tuple[bool, str]:
    """(use the host here?, why not)."""
    if os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return False, f"{ENV_SWITCH}=0"
    if sys.platform != "linux":
        return False, f"forking a warm process is not safe on {sys.platform}"
    return True, ""


def send_message(sock: socket.socket, obj: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [payload], list(fds))
        payload = payload[sent:]
    if payload:
        sock.sendall(payload)


def recv_message(sock: socket.socket, want_fds: int = 0) -> tuple[dict | None, list[int]]:
    """(message, received fds); (None, []) at end of stream."""
    fds: list[int] = []
    if want_fds:
        data, fds, _flags, _addr = socket.recv_fds(sock, 65536, want_fds)
    else:
        data = sock.recv(65536)
    if not data:
        return None, fds
    while len(data) < _HEADER.size:
        more = sock.recv(65536)
        if not more:
            return None, fds
        data += more
    (size,) = _HEADER.unpack_from(data)
    data = data[_HEADER.size:]
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            return None, fds
        data += more
    return json.loads(data[:size]), fds


class HostDied(RuntimeError):
    pass


class StageProcess:
    """A stage forked by the host: the subset of `subprocess.Popen` the pipeline uses."""

    def __init__(self, host: "StageHost", pid: int, stdout):
        self._host, self.pid, self.stdout = host, pid, stdout
        self.returncode: int | None = None
        self.args = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._host.exit_code(block=0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(HOST_MODULE, timeout)
            self.returncode = self._host.exit_code(block=0.5 if left is None else min(0.5, left))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class StageHost:
    """One warm process that forks the pipeline's stages (see the module's docstring); one stage at a time."""

    def __init__(self, log_path: str | os.PathLike | None = None) -> None:
        """`log_path`: where the host's own output goes (a preload that failed), appended; else the caller's
        stdout/stderr (never a console's screen: the pipeline passes its log)."""
        ours, theirs = socket.socketpair()
        out = open(log_path, "a", encoding="utf-8") if log_path is not None else None
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", HOST_MODULE, str(theirs.fileno())],
                                         pass_fds=[theirs.fileno()], stdout=out, stderr=subprocess.STDOUT if out else None,
                                         preexec_fn=interruptible)
        finally:
            theirs.close()
            if out is not None:
                out.close()
        self.sock = ours
        self._ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self, wait: float = 0.0) -> bool:
        """Whether the host has finished its imports, waiting up to `wait` seconds. The pipeline does not wait:
        until then its stages start cold, so its first stages never wait for the host."""
        if not self._ready and select.select([self.sock], [], [], wait)[0]:
            try:
                msg, _ = recv_message(self.sock)
            except OSError:
                msg = None
            self._ready = bool(msg and msg.get("ready"))
            if not self._ready:
                raise HostDied("the stage host exited while importing")
        return self._ready

    def spawn(self, module: str, argv: Sequence[str], env: dict[str, str], cwd: str) -> StageProcess:
        """Fork `python -m <module> <argv>` in the host; its stdout and stderr go to a pipe whose read end is
        the StageProcess's `stdout` (text, as Popen(text=True) gives it), once the host is ready. Raises HostDied."""
        if not self.ready(wait=120.0):
            raise HostDied("the stage host did not finish its imports in 120 s")
        r, w = os.pipe()
        try:
            send_message(self.sock, {"module": module, "argv": list(argv), "env": env, "cwd": cwd}, [w])
            reply, _ = recv_message(self.sock)
        except OSError as exc:
            os.close(r)
            raise HostDied(f"the stage host stopped answering ({exc})") from exc
        finally:
            os.close(w)
        if not reply or "pid" not in reply:
            os.close(r)
            raise HostDied((reply or {}).get("error") or "the stage host exited")
        # the reader Popen(text=True) gives a child's stdout
        return StageProcess(self, int(reply["pid"]), io.TextIOWrapper(io.open(r, "rb", -1), errors="replace"))

    def exit_code(self, block: float) -> int | None:
        """The running stage's exit code once the host reports it (waiting up to `block` seconds), else None.
        A host that died reports the stage as killed (-SIGKILL)."""
        ready, _, _ = select.select([self.sock], [], [], block)
        if not ready:
            return None
        try:
            msg, _ = recv_message(self.sock)
        except OSError:
            msg = None
        if msg is None:
            return -signal.SIGKILL
        return int(msg["exit"])

    def close(self) -> None:
        """Stop the host (a stage it forked and that still runs is not stopped: stop_child does that)."""
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.terminate()  # idle, or still importing: nothing of it to keep
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def spawn_stage(host: StageHost | None, cmd: list[str], env: dict[str, str],
                warn: Callable[[str], object] = log.warning):
    """Start a stage: forked from `host` when there is one that has finished its imports, else `cmd` as a cold
    child (Popen). `cmd` is `[sys.executable, -m, module, *argv]`. Returns (process, host to keep using or None);
    a host that stopped answering is closed and `warn` gets one line saying so."""
    if host is not None and cmd[:2] == [sys.executable, "-m"]:
        try:
            if host.ready():
                return host.spawn(cmd[2], cmd[3:], env, os.getcwd()), host
        except HostDied as exc:
            warn(f"stage host: {exc}; starting each stage as a new process")
            host.close()
            host = None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                            preexec_fn=interruptible)
    return proc, host
