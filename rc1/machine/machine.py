"""The gated state machine, built with `transitions` from the table in rc1.state.table.

The machine is rebuilt from reports/state/machine.json every time (never pickled). A trigger's
gate runs in `conditions`; the ticket, audit entry and new state are written in `before`, so a
failure there leaves the state unchanged, and nothing rolls back after the state changes.
"""

from __future__ import annotations

from typing import Callable

from transitions import Machine, MachineError

from rc1.gates.base import GateResult
from rc1.state import store
from rc1.state.table import STATES, TICKETED, TRANSITIONS
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.layout import GATE_REPORTS
from rc1.runtime.provenance import git_commit
from rc1.runtime.workspace import Workspace

GateRunner = Callable[[str], list[GateResult]]


def write_gate_report(ws: Workspace, gate: str, source: str, dest: str, profile: str | None, results: list,
                      **extra) -> None:
    """The latest result of `gate`, kept for status, the console and benchmarks (a report, not state: a refused
    gate changes neither the machine, the tickets nor the audit log)."""
    atomic_write_json(ws.path(f"{GATE_REPORTS}/{gate}.json"), {
        "gate": gate, "time": store.now_iso(), "from": source, "to": dest,
        "passed": all(r.passed for r in results) and bool(results),
        "profile": profile, "results": [r.to_dict() for r in results], **extra})


class GatedMachine:
    """`state` is the current state; call a trigger (e.g. `pass_round1()`) -> True if it moved."""

    state: str

    def __init__(self, ws: Workspace, gate_runner: GateRunner, *, config_path: str | None = None,
                 config_hash: str | None = None, profile: str | None = None):
        self.ws = ws
        self.gate_runner = gate_runner
        self.record = store.load_record(ws)
        self.config_path = config_path
        self.config_hash = config_hash
        self.profile = profile
        self.last_gate: str | None = None
        self.last_results: list[GateResult] = []
        self._gate_of = {(t["source"], t["dest"]): t["gate"] for t in TRANSITIONS}
        transitions = [
            {"trigger": t["trigger"], "source": t["source"], "dest": t["dest"],
             "conditions": [self._gate_passes], "before": [self._record_pass]}
            for t in TRANSITIONS
        ]
        transitions.append({"trigger": "reset", "source": "*", "dest": "idle", "before": [self._record_reset]})
        self._machine = Machine(model=self, states=list(STATES), transitions=transitions,
                                initial=self.record.state, auto_transitions=False, send_event=True,
                                ignore_invalid_triggers=False)

    # -- conditions / callbacks -----------------------------------------------------------------
    def _gate_passes(self, event) -> bool:
        gate = self._gate_of[(event.transition.source, event.transition.dest)]
        self.last_gate = gate
        self.last_results = list(self.gate_runner(gate))
        write_gate_report(self.ws, gate, event.transition.source, event.transition.dest, self.profile,
                          self.last_results)
        return bool(self.last_results) and all(r.passed for r in self.last_results)

    def _record_pass(self, event) -> None:
        src, dest = event.transition.source, event.transition.dest
        gate = self._gate_of[(src, dest)]
        ticket_sha = None
        if dest in TICKETED:
            _, ticket_sha = store.write_ticket(self.ws, dest, gate, self.last_results, config_path=self.config_path,
                                               config_hash=self.config_hash, profile=self.profile)
        evidence = sorted({(e.path, e.sha256) for r in self.last_results for e in r.evidence})
        store.append_audit(self.ws, {
            "from": src, "to": dest, "trigger": event.event.name, "gate": gate, "passed": True,
            "results": [r.to_dict() for r in self.last_results],
            "evidence": [{"path": p, "sha256": h} for p, h in evidence],
            "ticket_sha256": ticket_sha, "config_path": self.config_path, "config_hash": self.config_hash,
            "profile": self.profile, "git_commit": git_commit()})
        self.record.state = dest
        if ticket_sha:
            self.record.tickets[dest] = ticket_sha
        self.record.config_path = self.config_path or self.record.config_path
        self.record.config_hash = self.config_hash or self.record.config_hash
        store.save_record(self.ws, self.record)

    def _record_reset(self, event) -> None:
        store.append_audit(self.ws, {"from": event.transition.source, "to": "idle", "trigger": "reset",
                                     "gate": None, "passed": True, "git_commit": git_commit()})
        for state in list(self.record.tickets):
            store.ticket_path(self.ws, state).unlink(missing_ok=True)
        self.record = store.MachineRecord()
        store.save_record(self.ws, self.record)

    # -- helpers --------------------------------------------------------------------------------
    def fire(self, trigger: str) -> bool:
        """Run a trigger; False (state unchanged) if its gate refused or it is not valid here."""
        self.last_gate, self.last_results = None, []
        try:
            return bool(self.trigger(trigger))
        except MachineError:
            return False


__all__ = ["GatedMachine", "MachineError"]
