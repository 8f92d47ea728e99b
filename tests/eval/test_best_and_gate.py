"""best/ is append-only; the RC1 gate passes and fails on crafted eval reports and refuses tampered ones."""

from __future__ import annotations

import json

import pytest

from rc1.eval.harness import best_index, update_best
from rc1.eval.metrics import EpisodeRecord, compare, summarize
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.checkpoint import MODEL_FILE, write_checkpoint
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_tree

RUN = "checkpoints/evt"


def fake_ckpt(ws, step: int, payload: bytes = b"weights"):
    """A complete checkpoint in the trainer's on-disk format (manifest written last), without a model."""
    return write_checkpoint(ws, RUN, step, {MODEL_FILE: lambda p: p.write_bytes(payload + bytes([step % 256]))},
                            {"config_hash": "h", "run": "evt"})


def test_best_is_append_only(ws):
    c10 = fake_ckpt(ws, 10)
    r = update_best(ws, RUN, c10, "success", 0.30, "reports/ppo_eval_a.json")
    assert r["updated"] and r["path"] == f"{RUN}/best/step_00010"
    tree10 = sha256_tree(ws.path(r["path"]))
    c20 = fake_ckpt(ws, 20)
    r = update_best(ws, RUN, c20, "success", 0.25, "reports/ppo_eval_b.json")  # worse: nothing copied
    assert not r["updated"] and "does not beat" in r["reason"]
    assert not ws.path(f"{RUN}/best/step_00020").exists()
    c30 = fake_ckpt(ws, 30)
    r = update_best(ws, RUN, c30, "success", 0.40, "reports/ppo_eval_c.json")
    assert r["updated"] and r["previous_best"] == 0.30
    # the earlier best is still there, byte for byte; the index grew by one line per new best
    assert sha256_tree(ws.path(f"{RUN}/best/step_00010")) == tree10
    idx = best_index(ws, RUN)
    assert [e["step_dir"] for e in idx] == ["step_00010", "step_00030"] and [e["value"] for e in idx] == [0.30, 0.40]
    # a re-eval of an already-copied step never overwrites its copy
    (ws.path(f"{RUN}/step_00030") / MODEL_FILE).write_bytes(b"changed later")
    r = update_best(ws, RUN, ws.path(f"{RUN}/step_00030"), "success", 0.50, "reports/ppo_eval_d.json")
    assert "already exists" in r["reason"]
    assert (ws.path(f"{RUN}/best/step_00030") / MODEL_FILE).read_bytes() != b"changed later"


# ----------------------------------------------------------------------------- crafted eval reports
def recs(n_ok_need: int, n_overclar: int, turns: int, n_ok_hard: int) -> list[EpisodeRecord]:
    """20 items: 0-9 need clarification, 10-19 do not; 10-19 are hard hotpotqa/strategyqa."""
    out = []
    for i in range(20):
        need = i < 10
        hard = i >= 10
        ok = (i < n_ok_need) if need else (i - 10 < n_ok_hard)
        clar = 1 if need or (i - 10 < n_overclar) else 0
        out.append(EpisodeRecord(f"i{i}", "hotpotqa" if i % 2 else "strategyqa", "hard" if hard else "easy", need, ok,
                                 float(ok), clar, turns, 0, False))
    return out


def write_report(ws, ckpt, base, trained, name="ppo_eval_20261122_000001.json"):
    held = {"base": summarize(base), "trained": summarize(trained), "delta": compare(base, trained)}
    doc = {"kind": "ppo_eval", "profile": "laptop", "run_dir": RUN, "heldout_set": "shadow",
           "sets": {"shadow": {"path": "data/shadow.jsonl", "n": len(base), "sha256": "0" * 64}},
           "model": {"base": "random:qwen3-tiny"}, "generation": {"max_new_tokens": 8},
           "checkpoint": {"path": ws.rel(ckpt), "step": 10, "manifest_sha256": sha256_file(ckpt / "manifest.json")},
           "results": {"shadow": held}, "throughput": {"base": None, "trained": None}}
    p = atomic_write_json(ws.reports / name, doc)
    register_artifact(ws, p, "ppo_eval")
    return p


@pytest.fixture
def gate_ctx(ws):
    from rc1.config.load import load_gates_config
    from rc1.gates.base import GateContext

    return GateContext(ws=ws, gates=load_gates_config("configs/gates_local.yaml", ws), round="rc1_eval")


BASE = recs(n_ok_need=3, n_overclar=5, turns=3, n_ok_hard=4)


def checks(res):
    return {c.name: c for c in res.checks}


def test_rc1_gate_passes_when_every_threshold_holds(ws, gate_ctx):
    from rc1.gates.rc1_eval import evaluate

    ck = fake_ckpt(ws, 10)
    write_report(ws, ck, BASE, recs(n_ok_need=5, n_overclar=2, turns=3, n_ok_hard=6))
    res = evaluate(gate_ctx)
    assert res.passed, [c.to_dict() for c in res.failing]
    c = checks(res)
    assert c["needs-clarification success delta (pp)"].measured == pytest.approx(20.0)
    assert c["over-clarification relative reduction"].measured == pytest.approx(0.6)
    assert c["average turns increase"].measured == 0
    assert c["hard-bucket success delta, hotpotqa+strategyqa (pp)"].measured == pytest.approx(20.0)
    assert "95% CI" in c["needs-clarification success delta (pp)"].detail and "->" in c["average turns increase"].detail
    assert {e.path for e in res.evidence} >= {"reports/ppo_eval_20261122_000001.json", f"{RUN}/step_00010/manifest.json"}


@pytest.mark.parametrize("trained,failing", [
    (recs(n_ok_need=3, n_overclar=2, turns=3, n_ok_hard=6), "needs-clarification success delta (pp)"),
    (recs(n_ok_need=5, n_overclar=5, turns=3, n_ok_hard=6), "over-clarification relative reduction"),
    (recs(n_ok_need=5, n_overclar=2, turns=4, n_ok_hard=6), "average turns increase"),
    (recs(n_ok_need=5, n_overclar=2, turns=3, n_ok_hard=4), "hard-bucket success delta, hotpotqa+strategyqa (pp)"),
])
def test_rc1_gate_fails_on_each_threshold(ws, gate_ctx, trained, failing):
    from rc1.gates.rc1_eval import evaluate

    write_report(ws, fake_ckpt(ws, 10), BASE, trained)
    res = evaluate(gate_ctx)
    assert not res.passed and [c.name for c in res.failing] == [failing]


def test_rc1_gate_refuses_an_edited_report(ws, gate_ctx):
    from rc1.gates.rc1_eval import evaluate

    p = write_report(ws, fake_ckpt(ws, 10), BASE, recs(5, 2, 3, 6))
    doc = json.loads(p.read_text())
    doc["results"]["shadow"]["delta"]["needs_clar_success"]["delta_pp"] = 99.0
    p.write_text(json.dumps(doc))  # edited after its sidecar was written
    res = evaluate(gate_ctx)
    assert not res.passed and res.checks[0].name == "eval report sha256" and len(res.checks) == 1
    assert "edited" in res.checks[0].detail


def test_rc1_gate_refuses_a_report_for_an_older_checkpoint(ws, gate_ctx):
    from rc1.gates.rc1_eval import evaluate

    write_report(ws, fake_ckpt(ws, 10), BASE, recs(5, 2, 3, 6))
    fake_ckpt(ws, 20)  # training went on: latest is step 20 now
    res = evaluate(gate_ctx)
    assert not res.passed
    assert checks(res)["report is for the current checkpoint"].passed is False


def test_rc1_gate_without_a_report_fails(ws, gate_ctx):
    from rc1.gates.rc1_eval import evaluate

    res = evaluate(gate_ctx)
    assert not res.passed and "rc1 eval" in res.checks[0].detail


def test_report_numbers_equal_the_json(ws):
    from rc1.eval.report import build_report, fmt_pp, fmt_rate_ci

    ck = fake_ckpt(ws, 10)
    p = write_report(ws, ck, BASE, recs(5, 2, 3, 6))
    with open(ws.metrics_path, "w") as fh:
        for s in range(1, 6):
            fh.write(json.dumps({"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.01 * s,
                                 "reward/correctness": 0.2 * s}) + "\n")
    md_path = build_report(ws)
    md = md_path.read_text()
    held = json.loads(p.read_text())["results"]["shadow"]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in md.splitlines() if line.startswith("| ")}
    overall = rows["overall"]
    assert overall[2] == fmt_rate_ci(held["base"]["success"]) and overall[3] == fmt_rate_ci(held["trained"]["success"])
    assert overall[4] == fmt_pp(held["delta"]["success"]["delta_pp"])
    need = rows["needs clarification"]
    assert need[4] == fmt_pp(held["delta"]["needs_clar_success"]["delta_pp"]) == "+20.0 pp"
    assert rows["hard bucket, hotpotqa+strategyqa"][3] == fmt_rate_ci(held["trained"]["hard_hq_sq"])
    assert f"{100 * held['trained']['success']['rate']:.1f}%" in md.split("**Held-out success")[1].split("**")[0]
    for png in ("training_curves", "bucket_success", "reward_dims"):
        assert f"plots/{png}.png" in md and (md_path.parent / "plots" / f"{png}.png").stat().st_size > 1000
    assert sha256_file(p) in md and "code commit" in md and (md_path.parent / "rc1_report.md.sha256").exists()


def test_report_refuses_a_tampered_eval_report(ws):
    from rc1.eval.report import build_report
    from rc1.runtime.errors import ConfigError

    p = write_report(ws, fake_ckpt(ws, 10), BASE, recs(5, 2, 3, 6))
    p.write_text(p.read_text().replace('"laptop"', '"production"'))
    with pytest.raises(ConfigError, match="sidecar"):
        build_report(ws)
