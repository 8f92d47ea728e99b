"""`python -m rc1.cli.stagehost FD`: the warm process that rc1.runtime.stagefork forks the pipeline's stages from.

It imports what the stages import (PRELOAD) once, says it is ready, then serves requests on the socket FD, one at a time: each is a
stage's module and argv (`python -m rc1.cli.main ...`), working directory and environment, with the pipe its
output goes to. It forks; the child runs that module as `python -m` would (runpy; stdout and stderr on the pipe,
SIGINT raising KeyboardInterrupt as in any Python process) and exits with its exit code; the host answers with the child's pid, then with its exit code. It ignores
SIGINT itself (a terminal's Ctrl-C reaches the stage, which stops cleanly, not the host) and exits when the
pipeline closes the socket.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import runpy
import signal
import socket
import sys
import traceback
from typing import NoReturn

from rc1.runtime.stagefork import recv_message, send_message

# What the stages import: the slow imports of a cold `rc1` command (python -X importtime, 2-core CPU): torch 1.2 s,
# transformers' model code 1.6 s more (SmolLM2 is a Llama, the production model a Qwen3), scipy.stats 0.7 s, openai
# (the judge client) 0.4 s, llama_cpp and gguf 0.2 s each. peft (3 s, LoRA runs only) and TRL are left to the
# stages that use them.
PRELOAD = (
    "numpy", "scipy.stats", "pydantic", "torch", "transformers", "transformers.models.auto.modeling_auto",
    "transformers.models.llama.modeling_llama", "transformers.models.qwen3.modeling_qwen3", "openai", "llama_cpp",
    "gguf", "rc1.cli.main", "rc1.config.load", "rc1.models.loader", "rc1.generation", "rc1.envs.rollout",
    "rc1.eval.harness", "rc1.data.pipeline", "rc1.gates.registry",
)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a stage that needs it imports it (and reports the error) itself
            print(f"rc1 stage host: preloading {name} failed ({exc.__class__.__name__}: {exc})", file=sys.stderr)


def become_stage(request: dict, out_fd: int) -> NoReturn:
    """In the forked child: `python -m <module> <argv>` as a cold process runs it, then exit with its code."""
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # as `python -m` sets it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, write_through=True)
    if "numpy" in sys.modules:  # numpy's global generator would otherwise be the host's, the same in every stage
        sys.modules["numpy"].random.seed()
    sys.argv = ["-m", *request["argv"]]
    code = 1
    try:
        # a cold `python -m X` runs X as __main__ without an `X` in sys.modules; the host's preloaded copy would
        # make runpy warn, and be the one a later `import X` gets
        sys.modules.pop(request["module"], None)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # as an interpreter does: end by the signal, so the parent sees -SIGINT
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    _finish()
    os._exit(code)


def _finish() -> None:
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass


def serve(sock: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    preload()
    gc.freeze()  # the preloaded objects: never scanned by a stage's collections (their pages stay shared)
    try:
        _serve(sock)
    except OSError:  # the pipeline went away (its end of the socket closed): nothing left to serve
        pass


def _serve(sock: socket.socket) -> None:
    send_message(sock, {"ready": True})
    while True:
        request, fds = recv_message(sock, want_fds=1)
        if request is None:
            return
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            send_message(sock, {"error": f"a request came with {len(fds)} file descriptors instead of 1"})
            continue
        pid = os.fork()
        if pid == 0:
            sock.close()
            become_stage(request, fds[0])
        os.close(fds[0])
        send_message(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        send_message(sock, {"exit": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":  # pragma: no cover - started by rc1.runtime.stagefork.StageHost
    serve(socket.socket(fileno=int(sys.argv[1])))
