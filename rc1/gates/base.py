"""Gate vocabulary: a check (measured vs threshold), a gate result, and the context a gate sees.

A gate area is a module under `rc1.gates` with one function::

    def evaluate(ctx: GateContext) -> GateResult

It is pure with respect to the machine: it reads files and thresholds, returns what it
measured and the evidence (path + sha256 of every file it looked at), and never changes state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rc1.runtime.fingerprint import Evidence
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import GatesConfig, TrainConfig


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


@dataclass(frozen=True)
class Check:
    """One measured check. `threshold` is human-readable, e.g. '>= 0.60' or 'in [64, 4096]'."""

    name: str
    measured: Any
    threshold: str
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "measured": _jsonable(self.measured), "threshold": self.threshold,
                "passed": bool(self.passed), "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict) -> "Check":
        return cls(d["name"], d.get("measured"), d.get("threshold", ""), bool(d.get("passed")), d.get("detail", ""))

    @classmethod
    def at_least(cls, name: str, measured: float | None, minimum: float, detail: str = "") -> "Check":
        ok = measured is not None and not _is_nan(measured) and measured >= minimum
        return cls(name, measured, f">= {minimum:g}", ok, detail)

    @classmethod
    def greater(cls, name: str, measured: float | None, minimum: float, detail: str = "") -> "Check":
        ok = measured is not None and not _is_nan(measured) and measured > minimum
        return cls(name, measured, f"> {minimum:g}", ok, detail)

    @classmethod
    def at_most(cls, name: str, measured: float | None, maximum: float, detail: str = "") -> "Check":
        ok = measured is not None and not _is_nan(measured) and measured <= maximum
        return cls(name, measured, f"<= {maximum:g}", ok, detail)

    @classmethod
    def less(cls, name: str, measured: float | None, maximum: float, detail: str = "") -> "Check":
        ok = measured is not None and not _is_nan(measured) and measured < maximum
        return cls(name, measured, f"< {maximum:g}", ok, detail)

    @classmethod
    def within(cls, name: str, measured: float | None, lo: float, hi: float, detail: str = "") -> "Check":
        ok = measured is not None and not _is_nan(measured) and lo <= measured <= hi
        return cls(name, measured, f"in [{lo:g}, {hi:g}]", ok, detail)

    @classmethod
    def equals(cls, name: str, measured: Any, expected: Any, detail: str = "") -> "Check":
        return cls(name, measured, f"== {expected!r}", measured == expected, detail)

    @classmethod
    def unavailable(cls, name: str, why: str) -> "Check":
        """A check whose code or input does not exist yet: it fails, it never passes."""
        return cls(name, None, "available", False, f"not available: {why}")


def _is_nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


@dataclass
class GateResult:
    gate: str
    checks: list[Check] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failing(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def to_dict(self) -> dict:
        return {"gate": self.gate, "passed": self.passed, "checks": [c.to_dict() for c in self.checks],
                "evidence": [e.to_dict() for e in self.evidence], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict) -> "GateResult":
        return cls(d["gate"], [Check.from_dict(c) for c in d.get("checks", [])],
                   [Evidence(e["path"], e["sha256"]) for e in d.get("evidence", [])], list(d.get("notes", [])))


@dataclass
class GateContext:
    """What a gate area sees. `round` is the gate being run (e.g. 'round1', 'round2')."""

    ws: Workspace
    gates: "GatesConfig"
    round: str
    config: "TrainConfig | None" = None
    config_path: Path | None = None
    # Free-form extras a caller may pass (e.g. a progress callback); gates must not require them.
    extras: dict = field(default_factory=dict)

    def progress(self, message: str) -> None:
        cb = self.extras.get("progress")
        if cb is not None:
            cb(message)
