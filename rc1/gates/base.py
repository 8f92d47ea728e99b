"""Gate vocabulary: a check (measured vs threshold), a gate result, and the context a gate sees.

A gate area is a module under `rc1.gates` with one function::

    def evaluate(ctx: GateContext) -> GateResult

It is pure with respect to the machine: it reads files and thresholds, returns what it
measured and the evidence (path + sha256 of every file it looked at), and never changes state.

A check has one of four statuses:

  pass            measured, and meets its threshold
  fail            measured, and misses it (or its input is missing or broken)
  not measurable  its inputs cannot show a difference (both arms at rate 0, nobody ever asked for
                  clarification): never a pass. Whether it blocks is the gates config's
                  `not_measurable` policy: `block` (production) or `warn` (laptop profile; the
                  report says so)
  not applicable  the check makes no sense for this data (a custom task without supporting text
                  has no clue overlap); never blocks, and always says why
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rc1.runtime.fingerprint import Evidence
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.gates import GatesConfig
    from rc1.config.schema import TrainConfig


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


PASS, FAIL, NOT_MEASURABLE, NOT_APPLICABLE = "pass", "fail", "not measurable", "not applicable"
# What a check did to its gate (GateResult.outcome): not measurable splits by the profile's policy.
OUTCOMES = (PASS, FAIL, "blocked", "warned", "not_applicable")
STATUSES = (PASS, FAIL, NOT_MEASURABLE, NOT_APPLICABLE)


@dataclass(frozen=True)
class Check:
    """One measured check. `threshold` is human-readable, e.g. '>= 0.60' or 'in [64, 4096]'.

    `passed` is whether it lets the gate through on its own (True for pass and not applicable);
    `status` is what happened (see the module docstring); it defaults from `passed`."""

    name: str
    measured: Any
    threshold: str
    passed: bool
    detail: str = ""
    status: str = ""

    def __post_init__(self):
        if not self.status:
            object.__setattr__(self, "status", PASS if self.passed else FAIL)
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name!r}: unknown status {self.status!r}")
        if (self.status == NOT_APPLICABLE) != bool(self.passed) and self.status in (NOT_APPLICABLE, NOT_MEASURABLE):
            raise ValueError(f"check {self.name!r}: status {self.status!r} with passed={self.passed}")

    def to_dict(self) -> dict:
        return {"name": self.name, "measured": _jsonable(self.measured), "threshold": self.threshold,
                "passed": bool(self.passed), "status": self.status, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict) -> "Check":
        return cls(d["name"], d.get("measured"), d.get("threshold", ""), bool(d.get("passed")), d.get("detail", ""),
                   d.get("status", ""))

    @classmethod
    def not_measurable(cls, name: str, threshold: str, why: str, measured: Any = None) -> "Check":
        """Inputs that cannot show a difference: never a pass (the gates config says whether it blocks)."""
        return cls(name, measured, threshold, False, f"not measurable: {why}", NOT_MEASURABLE)

    @classmethod
    def not_applicable(cls, name: str, why: str) -> "Check":
        """The check makes no sense for this data: it does not block, and says why."""
        return cls(name, None, "applicable", True, f"not applicable: {why}", NOT_APPLICABLE)

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
    # The gates config's `not_measurable` policy (rc1.gates.registry sets it): True = block (production).
    not_measurable_blocks: bool = True

    def blocks(self, c: Check) -> bool:
        return c.status == FAIL or (c.status == NOT_MEASURABLE and self.not_measurable_blocks)

    def outcome(self, c: Check) -> str:
        """What `c` did to this gate, as the CLI and the report word it: one of OUTCOMES."""
        if c.status == NOT_MEASURABLE:
            return "blocked" if self.blocks(c) else "warned"
        if c.status == NOT_APPLICABLE:
            return "not_applicable"
        return PASS if c.passed else FAIL

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not any(self.blocks(c) for c in self.checks)

    @property
    def failing(self) -> list[Check]:
        return [c for c in self.checks if self.blocks(c)]

    @property
    def warnings(self) -> list[Check]:
        """Not-measurable checks the laptop policy lets through: shown, never counted as passes."""
        return [c for c in self.checks if c.status == NOT_MEASURABLE and not self.not_measurable_blocks]

    def to_dict(self) -> dict:
        return {"gate": self.gate, "passed": self.passed, "checks": [c.to_dict() for c in self.checks],
                "evidence": [e.to_dict() for e in self.evidence], "notes": list(self.notes),
                "not_measurable": "block" if self.not_measurable_blocks else "warn"}

    @classmethod
    def from_dict(cls, d: dict) -> "GateResult":
        return cls(d["gate"], [Check.from_dict(c) for c in d.get("checks", [])],
                   [Evidence(e["path"], e["sha256"]) for e in d.get("evidence", [])], list(d.get("notes", [])),
                   d.get("not_measurable", "block") == "block")


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


def read_identified_report(ctx: GateContext, res: GateResult, rel: str, what: str, cmd: str, identity,
                           missing: str = "") -> tuple[dict, str, dict] | None:
    """A stage's report that a gate judges: it exists, its sha256 sidecar verifies, and its `identity` is the one
    `identity(ws, config)` gives now (else the report was made for other settings). Returns (report, identity,
    settings); on any failure appends the failing check (named after `what`, naming `cmd` as the fix) and
    returns None. The report file goes into the evidence."""
    import json

    from rc1.runtime.fingerprint import read_sidecar, sha256_file

    path = ctx.ws.path(rel)
    if not path.exists():
        res.checks.append(Check(f"{what} report", None, "exists", False, f"{rel} missing: run `{cmd}`{missing}"))
        return None
    digest = sha256_file(path)
    res.evidence.append(Evidence(ctx.ws.rel(path), digest))
    side = read_sidecar(path)
    if side != digest:
        res.checks.append(Check(f"{what} report sha256", digest[:12], "matches its .sha256 sidecar", False,
                                "no sidecar" if side is None else "the report was edited after it was written"))
        return None
    rep = json.loads(path.read_text())
    ident, settings = identity(ctx.ws, ctx.config)
    if rep.get("identity") != ident:
        changed = sorted(k for k in settings if rep.get("settings", {}).get(k) != settings[k])
        res.checks.append(Check(f"{what} report is for this config", rep.get("identity", "")[:12], f"== {ident[:12]}",
                                False, f"made with other settings ({', '.join(changed) or 'unknown'}): run `{cmd}` again"))
        return None
    return rep, ident, settings
