"""The gated machine against an explicit table of allowed moves, random trigger sequences, and tampering."""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rc1.gates.base import Check, GateResult
from rc1.state import store
from rc1.machine.service import advance, open_machine
from rc1.state.table import STATES, TRANSITIONS
from rc1.runtime.errors import TamperError
from rc1.runtime.fingerprint import Evidence
from rc1.runtime.workspace import Workspace

# The only forward moves there are: (state, trigger) -> next state.
ALLOWED = {
    ("idle", "pass_round1"): "round1",
    ("round1", "pass_round2"): "round2_pass",
    ("round2_pass", "start_training"): "training",
    ("training", "finish_training"): "eval",
    ("eval", "pass_rc1"): "scale_1000",
    ("scale_1000", "pass_scale_5000"): "scale_5000",
}
TRIGGERS = sorted({t["trigger"] for t in TRANSITIONS})


def passing(gate):
    return [GateResult(gate, [Check("ok", 1, ">= 1", True)])]


def failing(gate):
    return [GateResult(gate, [Check("bad", 0, ">= 1", False, "measured too low")])]


def snapshot(ws: Workspace) -> dict:
    """Every file under reports/state and reports/preflight with its bytes."""
    out = {}
    for d in (ws.state_dir, ws.preflight_dir):
        if d.exists():
            for p in sorted(d.rglob("*")):
                if p.is_file():
                    out[str(p)] = p.read_bytes()
    return out


def test_table_matches_allowed_moves():
    assert {(t["source"], t["trigger"]): t["dest"] for t in TRANSITIONS} == ALLOWED
    assert list(STATES) == ["idle", "round1", "round2_pass", "training", "eval", "scale_1000", "scale_5000"]


def test_no_auto_transitions(ws):
    m = open_machine(ws, gate_runner=passing)
    assert not hasattr(m, "to_training") and not hasattr(m, "to_round2_pass")


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("trigger", TRIGGERS)
def test_every_trigger_in_every_state(tmp_path, state, trigger):
    ws = Workspace(tmp_path)
    store.save_record(ws, store.MachineRecord(state=state))
    m = open_machine(ws, gate_runner=passing)
    moved = m.fire(trigger)
    expected = ALLOWED.get((state, trigger))
    assert moved == (expected is not None)
    assert m.state == (expected or state)
    assert store.load_record(ws).state == m.state


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.lists(st.tuples(st.sampled_from(TRIGGERS + ["reset"]), st.booleans()), max_size=12))
def test_random_trigger_sequences(tmp_path_factory, seq):
    ws = Workspace(tmp_path_factory.mktemp("m"))
    state = "idle"
    for trigger, gate_ok in seq:
        before_files = snapshot(ws)
        m = open_machine(ws, gate_runner=passing if gate_ok else failing)
        moved = m.fire(trigger)
        if trigger == "reset":
            assert moved and m.state == "idle"
            state = "idle"
            continue
        nxt = ALLOWED.get((state, trigger))
        if nxt is not None and gate_ok:
            assert moved and m.state == nxt
            state = nxt
            assert ws.path(f"reports/preflight/{nxt}.json").exists()
        else:
            assert not moved and m.state == state
            assert snapshot(ws) == before_files, "a refused trigger changed state files"
        assert store.load_record(ws).state == state
    audit = store.read_audit(ws)
    assert all(e["passed"] for e in audit)


def test_refused_gate_changes_nothing_but_its_report(ws):
    before = snapshot(ws)
    out = advance(ws, "round1", machine=open_machine(ws, gate_runner=failing))
    assert not out.reached and out.state == "idle"
    assert snapshot(ws) == before
    rep = json.loads((ws.reports / "gates" / "round1.json").read_text())
    assert rep["passed"] is False and rep["results"][0]["checks"][0]["detail"] == "measured too low"


def _to_round2(ws, evidence_file):
    def runner(gate):
        return [GateResult(gate, [Check("ok", 1, ">= 1", True)], [Evidence.of(ws, evidence_file)])]
    out = advance(ws, "round2", machine=open_machine(ws, gate_runner=runner))
    assert out.reached


def test_ticket_carries_evidence_and_verifies(ws):
    pool = ws.data / "pool.jsonl"
    pool.parent.mkdir(parents=True)
    pool.write_text('{"id": 1}\n')
    _to_round2(ws, pool)
    body = store.verify_ticket(ws, "round2_pass")
    assert {"path": "data/pool.jsonl", "sha256": Evidence.of(ws, pool).sha256} in body["evidence"]
    audit = store.read_audit(ws)
    assert [e["to"] for e in audit] == ["round1", "round2_pass"]
    assert audit[-1]["ticket_sha256"] and audit[-1]["git_commit"]


def test_evidence_changed_after_pass_is_refused_naming_the_file(ws):
    pool = ws.data / "pool.jsonl"
    pool.parent.mkdir(parents=True)
    pool.write_text('{"id": 1}\n')
    _to_round2(ws, pool)
    pool.write_text('{"id": 2}\n')
    with pytest.raises(TamperError, match="data/pool.jsonl"):
        store.verify_ticket(ws, "round2_pass")


def test_edited_ticket_is_refused(ws):
    pool = ws.data / "pool.jsonl"
    pool.parent.mkdir(parents=True)
    pool.write_text("x\n")
    _to_round2(ws, pool)
    p = store.ticket_path(ws, "round2_pass")
    doc = json.loads(p.read_text())
    doc["evidence"] = []
    p.write_text(json.dumps(doc, indent=2))
    with pytest.raises(TamperError, match="edited"):
        store.verify_ticket(ws, "round2_pass")


def test_hand_written_ticket_is_refused_and_nothing_trains(ws):
    p = store.ticket_path(ws, "round2_pass")
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"round": "round2", "ts": "2025-08-20T00:00:00Z", "pass": True}, indent=2))
    with pytest.raises(TamperError, match="not written by a passing gate"):
        store.verify_ticket(ws, "round2_pass")
    # Even forcing the state file does not help: the signature does not match.
    store.save_record(ws, store.MachineRecord(state="round2_pass", tickets={"round2_pass": __import__(
        "rc1.runtime.fingerprint", fromlist=["sha256_file"]).sha256_file(p)}))
    with pytest.raises(TamperError, match="signature"):
        store.verify_ticket(ws, "round2_pass")
    out = advance(ws, "training")
    assert not out.reached and out.state == "round2_pass"
    checks = [c for r in out.gates[-1][1] for c in r.checks]
    assert not checks[0].passed and "signature" in checks[0].detail


def test_state_file_write_is_atomic(ws, monkeypatch):
    store.save_record(ws, store.MachineRecord(state="round1"))
    original = ws.path(store.MACHINE_FILE).read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.save_record(ws, store.MachineRecord(state="round2_pass"))
    assert ws.path(store.MACHINE_FILE).read_bytes() == original
    assert not [p for p in ws.state_dir.iterdir() if p.name.endswith(".tmp")]


def test_backwards_target_is_a_config_error(ws):
    from rc1.runtime.errors import ConfigError

    store.save_record(ws, store.MachineRecord(state="round1"))
    with pytest.raises(ConfigError, match="behind"):
        advance(ws, "idle", machine=open_machine(ws, gate_runner=passing))
