"""rc1's one JSONL reader and writer: bad lines and missing keys are named by file and line; writes are atomic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from rc1.runtime.atomic import atomic_output
from rc1.runtime.errors import ConfigError


def iter_jsonl(path: str | Path, required: Iterable[str] = (), what: str = "item") -> Iterator[dict]:
    """The JSON objects of a JSONL file (blank lines skipped). Raises ConfigError naming file:line for a
    missing file, a malformed line, a line that is not an object, or an object without a `required` key."""
    required = tuple(required)
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: file not found")
    with open(p, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{p}:{lineno}: malformed JSON line ({exc.msg} at column {exc.colno})") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{p}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            missing = [k for k in required if k not in obj]
            if missing:
                raise ConfigError(f"{p}:{lineno}: {what} lacks {', '.join(missing)}")
            yield obj


def read_jsonl(path: str | Path, required: Iterable[str] = (), what: str = "item") -> list[dict]:
    return list(iter_jsonl(path, required, what))


def dumps_item(item: dict) -> str:
    """One canonical line per item (stable key order -> byte-identical files per seed)."""
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: str | Path, items: Iterable[dict]) -> int:
    n = 0
    with atomic_output(path) as fh:
        for item in items:
            fh.write(dumps_item(item))
            fh.write("\n")
            n += 1
    return n


POOL_REQUIRED = ("id", "task", "template", "role", "style", "messages", "question", "answer")


def check_items(path: str | Path, items: list[dict]) -> None:
    """Fail with file:line on items that miss the pool item contract's required keys."""
    for lineno, item in enumerate(items, 1):
        missing = [k for k in POOL_REQUIRED if k not in item]
        if missing:
            raise ConfigError(f"{path}:{lineno}: pool item lacks {', '.join(missing)}")
