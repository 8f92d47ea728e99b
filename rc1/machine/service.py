"""What the CLI and the console call: load the machine, run gates, advance, read status."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from rc1.config.load import config_hash, load_run_gates, load_train_config
from rc1.config.gates import GatesConfig
from rc1.config.schema import TrainConfig
from rc1.gates.base import GateContext, GateResult
from rc1.gates.registry import GATES, run_area, run_gate
from rc1.state import store
from rc1.machine.machine import GatedMachine, write_gate_report
from rc1.runtime.layout import GATE_REPORTS
from rc1.state.table import ALIASES, STATES, TRANSITIONS, path_to
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace


@dataclass
class Loaded:
    config: TrainConfig | None
    config_path: str | None
    gates: GatesConfig
    gates_path: str | None
    config_hash: str | None


def load_for_gates(ws: Workspace, config_path: str | None) -> Loaded:
    """The run config (explicit, else the one the machine last used) and its gates config.

    With no run config at all the production thresholds apply and the run-config check fails;
    an explicit path that does not load is a config error (exit 2).
    """
    rec = store.load_record(ws)
    path = config_path or rec.config_path
    if path is None:
        return Loaded(None, None, GatesConfig(), None, None)
    cfg = load_train_config(path, ws)
    gates = load_run_gates(cfg, ws)
    return Loaded(cfg, ws.rel(ws.path(path)), gates, cfg.gates, config_hash(cfg))


def make_context(ws: Workspace, loaded: Loaded, gate: str, progress: Callable[[str], None] | None = None) -> GateContext:
    return GateContext(ws=ws, gates=loaded.gates, round=gate, config=loaded.config,
                       config_path=ws.path(loaded.config_path) if loaded.config_path else None,
                       extras={"progress": progress, "config_path_rel": loaded.config_path,
                               "gates_path_rel": loaded.gates_path})


def open_machine(ws: Workspace, config_path: str | None = None,
                 progress: Callable[[str], None] | None = None,
                 gate_runner: Callable[[str], list[GateResult]] | None = None) -> GatedMachine:
    loaded = load_for_gates(ws, config_path)
    runner = gate_runner or (lambda gate: run_gate(gate, make_context(ws, loaded, gate, progress)))
    return GatedMachine(ws, runner, config_path=loaded.config_path, config_hash=loaded.config_hash,
                        profile=loaded.gates.profile)


def resolve_state(name: str) -> str:
    state = ALIASES.get(name, name)
    if state not in STATES:
        raise ConfigError(f"unknown state {name!r}; states: {', '.join(STATES)} (alias: round2)")
    return state


@dataclass
class AdvanceOutcome:
    start: str
    state: str
    target: str
    gates: list[tuple[str, list[GateResult]]] = field(default_factory=list)

    @property
    def reached(self) -> bool:
        return self.state == self.target


def advance(ws: Workspace, target: str, config_path: str | None = None,
            progress: Callable[[str], None] | None = None,
            on_gate: Callable[[str, list[GateResult]], None] | None = None,
            machine: GatedMachine | None = None) -> AdvanceOutcome:
    """Move forward gate by gate until `target`, stopping at the first refusal."""
    target = resolve_state(target)
    m = machine or open_machine(ws, config_path, progress)
    try:
        steps = path_to(m.state, target)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    outcome = AdvanceOutcome(m.state, m.state, target)
    for t in steps:
        moved = m.fire(t["trigger"])
        outcome.gates.append((m.last_gate or t["gate"], m.last_results))
        if on_gate:
            on_gate(m.last_gate or t["gate"], m.last_results)
        outcome.state = m.state
        if not moved:
            break
    return outcome


def judge_early(ws: Workspace, gate: str, area: str, config_path: str | None = None,
                progress: Callable[[str], None] | None = None) -> GateResult:
    """One area of `gate`, judged before the machine reaches the gate, where the stages between cannot run
    without what it checks (the difficulty fit kept no level: no fitted dev split for the base answers, no
    training items). A refusal is written as `gate`'s latest report, as a refusal at the gate would be; a pass
    writes nothing (the gate judges every area again when the machine gets there). The state, the tickets and
    the audit log never change here."""
    if area not in GATES.get(gate, ()):
        raise ConfigError(f"gate {gate!r} has no area {area!r}; its areas: {', '.join(GATES.get(gate, ())) or '-'}")
    loaded = load_for_gates(ws, config_path)
    result = run_area(area, make_context(ws, loaded, gate, progress))
    if not result.passed:
        t = next(t for t in TRANSITIONS if t["gate"] == gate)
        write_gate_report(ws, gate, current_state(ws), t["dest"], loaded.gates.profile, [result],
                          judged_early=f"{area}, before the machine reached the gate")
    return result


def last_gate_reports(ws: Workspace) -> dict[str, dict]:
    out = {}
    d = ws.path(GATE_REPORTS)
    if d.exists():
        for p in sorted(d.glob("*.json")):
            try:
                out[p.stem] = json.loads(p.read_text())
            except json.JSONDecodeError:
                continue
    return out


def current_state(ws: Workspace) -> str:
    return store.load_record(ws).state
