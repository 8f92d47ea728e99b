"""Logging to logs/train.log (everything) and the terminal, with secrets redacted."""

from __future__ import annotations

import logging
import sys
from collections import deque
from pathlib import Path

from rc1.runtime.secrets import redact
from rc1.runtime.workspace import Workspace

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_configured: set[str] = set()


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup_logging(ws: Workspace, *, log_file: str | None = None, console: bool = True,
                  level: int = logging.INFO) -> Path:
    """Attach a file handler (append) to the 'rc1' logger; idempotent per file."""
    path = ws.path(log_file or "logs/train.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("rc1")
    logger.setLevel(level)
    logger.propagate = False
    key = str(path)
    if key not in _configured:
        fh = logging.FileHandler(path, encoding="utf-8")
        fh.setFormatter(_RedactingFormatter(FORMAT))
        logger.addHandler(fh)
        _configured.add(key)
    if console and not any(getattr(h, "_rc1_console", False) for h in logger.handlers):
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(_RedactingFormatter("%(levelname)s %(message)s"))
        sh.setLevel(logging.WARNING)
        sh._rc1_console = True  # type: ignore[attr-defined]
        logger.addHandler(sh)
    return path


def tail_lines(path: str | Path, n: int = 200) -> list[str]:
    p = Path(path)
    if not p.exists():
        return []
    with open(p, "r", encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\n") for line in deque(fh, maxlen=n)]
