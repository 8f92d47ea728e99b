"""Unhandled errors: print `FATAL: <msg>`, write reports/ERROR_<ts>.json atomically, exit 1."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from pathlib import Path

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.logs import tail_lines
from rc1.runtime.secrets import redact
from rc1.runtime.workspace import Workspace

# Set by long-running code (the trainer) so an ERROR report can say where it died.
CONTEXT: dict = {}


def utc_stamp() -> str:
    t = time.time()
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(t)) + f"{int((t % 1) * 1000):03d}Z"


def write_error_report(ws: Workspace, exc: BaseException, *, step: int | None = None,
                       config_hash: str | None = None) -> Path:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "error": redact(f"{exc.__class__.__name__}: {exc}"),
        "traceback": redact(tb),
        "step": step if step is not None else CONTEXT.get("step"),
        "config_hash": config_hash or CONTEXT.get("config_hash"),
        **({"rank": CONTEXT["rank"]} if "rank" in CONTEXT else {}),
        "argv": [redact(a) for a in sys.argv],
        "log_tail": [redact(line) for line in tail_lines(ws.train_log, 200)],
    }
    path = ws.reports / f"ERROR_{utc_stamp()}.json"
    return atomic_write_json(path, report)


def record_for_launcher(exc: BaseException) -> None:
    """In a rank started by torchrun / `accelerate launch`: the exception and its traceback into the error
    file the launcher's agent reads (TORCHELASTIC_ERROR_FILE), so the launcher can report it."""
    if not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return
    try:
        from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

        ErrorHandler().record_exception(exc)
    except Exception as rec_err:  # noqa: BLE001 - never hide the original error behind this one
        print(f"(could not record the error for the launcher: {rec_err})", file=sys.stderr)


def report_fatal(ws: Workspace, exc: BaseException, **kw) -> Path | None:
    """FATAL line, and reports/ERROR_<ts>.json unless this process is a rank that leaves the report to its
    launcher or to rank 0 (CONTEXT["error_report"] False)."""
    logging.getLogger("rc1").error("FATAL: %s", exc, exc_info=exc)
    record_for_launcher(exc)
    path = None
    try:
        if CONTEXT.get("error_report", True):
            path = write_error_report(ws, exc, **kw)
    except OSError as write_err:  # the workspace itself may be the problem
        print(f"(could not write the ERROR report: {write_err})", file=sys.stderr)
    print(f"FATAL: {redact(str(exc)) or exc.__class__.__name__}", file=sys.stderr)
    if path is not None:
        print(f"error report: {ws.rel(path)}", file=sys.stderr)
    return path
