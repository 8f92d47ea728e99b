"""best/ is append-only and chosen on the dev split; the RC1 gate judges CI bounds, says `not measurable`, refuses
an early-stopped run unless the operator accepted it, and refuses tampered or stale reports; the report says it all."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rc1.eval.best import best_index, update_best
from rc1.runtime.checkpoint import MODEL_FILE, write_checkpoint
from rc1.runtime.fingerprint import sha256_file, sha256_tree
from tests.helpers.eval import crafted_report, items_for, recs, write_end_record

RUN = "checkpoints/evt"
END = "reports/state/training_end.json"
DEV_A = {"split": "dev", "path": "data/eval_min.jsonl", "n": 24, "key": "a" * 64}
DEV_B = {"split": "dev", "path": "data/eval_min.jsonl", "n": 30, "key": "b" * 64}


def fake_ckpt(ws, step: int, payload: bytes = b"weights", run: str = RUN):
    """A complete checkpoint in the trainer's on-disk format (manifest written last), without a model."""
    return write_checkpoint(ws, run, step, {MODEL_FILE: lambda p: p.write_bytes(payload + bytes([step % 256]))},
                            {"config_hash": "h", "run": "evt"})


def test_best_is_append_only_and_compares_like_with_like(ws):
    c10 = fake_ckpt(ws, 10)
    r = update_best(ws, RUN, c10, "success", 0.30, "reports/eval_a.json", DEV_A)
    assert r["updated"] and r["path"] == f"{RUN}/best/step_00010"
    tree10 = sha256_tree(ws.path(r["path"]))
    c20 = fake_ckpt(ws, 20)
    r = update_best(ws, RUN, c20, "success", 0.25, "reports/eval_b.json", DEV_A)  # worse: nothing copied
    assert not r["updated"] and "does not beat" in r["reason"]
    assert not ws.path(f"{RUN}/best/step_00020").exists()
    c30 = fake_ckpt(ws, 30)
    r = update_best(ws, RUN, c30, "success", 0.40, "reports/eval_c.json", DEV_A)
    assert r["updated"] and r["previous_best"] == 0.30
    # the earlier best is still there, byte for byte; the index grew by one line per new best
    assert sha256_tree(ws.path(f"{RUN}/best/step_00010")) == tree10
    idx = best_index(ws, RUN)
    assert [e["step_dir"] for e in idx] == ["step_00010", "step_00030"] and [e["value"] for e in idx] == [0.30, 0.40]
    assert all(e["selection"]["split"] == "dev" for e in idx)
    # a re-eval of an already-copied step never overwrites its copy
    (ws.path(f"{RUN}/step_00030") / MODEL_FILE).write_bytes(b"changed later")
    r = update_best(ws, RUN, ws.path(f"{RUN}/step_00030"), "success", 0.50, "reports/eval_d.json", DEV_A)
    assert "already exists" in r["reason"]
    assert (ws.path(f"{RUN}/best/step_00030") / MODEL_FILE).read_bytes() != b"changed later"


def test_best_is_never_chosen_without_a_dev_result(ws):
    c10, c20 = fake_ckpt(ws, 10), fake_ckpt(ws, 20)
    r = update_best(ws, RUN, c10, "success", 0.90, "reports/eval_a.json", None)  # a held-out-only eval
    assert not r["updated"] and "dev split" in r["reason"] and not ws.path(f"{RUN}/best").exists()
    update_best(ws, RUN, c10, "success", 0.50, "reports/eval_b.json", DEV_A)
    # other dev items: a value on them is not comparable with 0.50 on DEV_A, so it is the first of its kind
    r = update_best(ws, RUN, c20, "success", 0.40, "reports/eval_c.json", DEV_B)
    assert r["updated"] and r["previous_best"] is None


# ----------------------------------------------------------------------------- the RC1 gate on crafted reports
BASE = recs(ok_need=10, overclar=25, ok_hard=15)
GOOD = recs(ok_need=25, overclar=5, ok_hard=30)


@pytest.fixture
def gate_ctx(ws):
    from rc1.config.load import load_gates_config
    from rc1.gates.base import GateContext

    return GateContext(ws=ws, gates=load_gates_config("configs/gates_local.yaml", ws), round="rc1_eval")


def run_gate(ctx, gates: str | None = None):
    """The gate as `rc1 advance` runs it (the registry applies the profile's not_measurable policy)."""
    from rc1.config.load import load_gates_config
    from rc1.gates.registry import run_area

    if gates:
        ctx.gates = load_gates_config(gates, ctx.ws)
    return run_area("rc1_eval", ctx)


def report_for(ws, trained, base=BASE, *, reason="completed", items=None, step=10):
    ck = fake_ckpt(ws, step)
    write_end_record(ws, END, ck, reason=reason, step=step, max_steps=10 if reason == "completed" else 24)
    return crafted_report(ws, base, [(ck, trained, END, RUN)], items=items)


def checks(res):
    return {c.name: c for c in res.checks}


def test_rc1_gate_passes_when_every_ci_bound_holds(ws, gate_ctx):
    report_for(ws, GOOD)
    res = run_gate(gate_ctx)
    assert res.passed and not res.warnings, [c.to_dict() for c in res.failing]
    c = checks(res)
    s = c["held-out success delta (pp, CI lower bound)"]
    assert 0 < s.measured < 30 and "point estimate +30.0 pp" in s.detail  # judged on the bound, point printed
    assert c["needs-clarification success delta (pp, CI lower bound)"].measured < 30
    oc = c["over-clarification relative reduction (CI lower bound)"]
    assert 0.2 <= oc.measured < 0.8 and "point estimate 0.80" in oc.detail
    turns = c["average turns increase (CI upper bound)"]
    assert turns.measured == 0 and turns.status == "pass"  # turns vary, and the trained model's equal the base's
    assert "majority" in c["trained success - majority-class baseline (pp, CI lower bound)"].detail
    assert c["run completed (or early stop accepted)"].passed
    assert {e.path for e in res.evidence} >= {"reports/eval_20261122_000001.json", f"{RUN}/step_00010/manifest.json",
                                              END}
    assert any("smallest success increase" in n for n in res.notes)


@pytest.mark.parametrize("trained,failing", [
    (recs(ok_need=10, overclar=5, ok_hard=30), "needs-clarification success delta (pp, CI lower bound)"),
    (recs(ok_need=25, overclar=25, ok_hard=30), "over-clarification relative reduction (CI lower bound)"),
    (recs(ok_need=25, overclar=5, ok_hard=30, turns=lambda i: 2 + i % 2 + (i % 3 == 0)),
     "average turns increase (CI upper bound)"),
    (recs(ok_need=25, overclar=5, ok_hard=15), "hard-bucket success delta, hotpotqa+strategyqa (pp, CI lower bound)"),
    # +6 pp on needs-clarification items: the point estimate clears +5 pp, the CI lower bound does not
    (recs(ok_need=13, overclar=5, ok_hard=30), "needs-clarification success delta (pp, CI lower bound)"),
])
def test_rc1_gate_fails_on_each_threshold(ws, gate_ctx, trained, failing):
    report_for(ws, trained)
    res = run_gate(gate_ctx)
    assert not res.passed and [c.name for c in res.failing] == [failing]


def test_a_trained_model_no_better_than_the_base_fails_the_overall_check(ws, gate_ctx):
    report_for(ws, list(BASE))
    c = checks(run_gate(gate_ctx))["held-out success delta (pp, CI lower bound)"]
    assert c.status == "fail" and c.measured == 0 and "point estimate +0.0 pp" in c.detail


def test_rc1_gate_fails_a_model_below_the_majority_class_baseline(ws, gate_ctx):
    """strategyqa items whose gold answer is always 'no': answering 'no' to everything scores 100 %."""
    base = recs(ok_need=10, overclar=25, ok_hard=15, task="strategyqa")
    trained = recs(ok_need=25, overclar=5, ok_hard=30, task="strategyqa")
    report_for(ws, trained, base, items=items_for(base, answer=lambda i: "no"))
    res = run_gate(gate_ctx)
    c = checks(res)["trained success - majority-class baseline (pp, CI lower bound)"]
    assert [x.name for x in res.failing] == [c.name] and "strategyqa 'no'" in c.detail and c.measured < 0


def test_inputs_that_cannot_show_a_difference_are_not_measurable(ws, gate_ctx):
    """Nobody over-clarifies (0 -> 0) and every episode takes 1 turn: not measurable, never a pass. The laptop
    profile lets them through as warnings; production blocks."""
    one_turn = lambda i: 1  # noqa: E731
    report_for(ws, recs(ok_need=25, overclar=0, ok_hard=30, turns=one_turn),
               recs(ok_need=10, overclar=0, ok_hard=15, turns=one_turn))
    res = run_gate(gate_ctx)
    nm = {c.name for c in res.checks if c.status == "not measurable"}
    assert nm == {"over-clarification relative reduction (CI lower bound)", "average turns increase (CI upper bound)"}
    assert all(not c.passed for c in res.checks if c.name in nm)
    assert res.passed and {c.name for c in res.warnings} == nm and any("not measurable" in n for n in res.notes)
    prod = run_gate(gate_ctx, "configs/gates.yaml")
    assert not prod.passed and {c.name for c in prod.failing} == nm


def test_base_never_over_clarifying_and_trained_starting_to_is_a_failure(ws, gate_ctx):
    report_for(ws, recs(ok_need=25, overclar=10, ok_hard=30), recs(ok_need=10, overclar=0, ok_hard=15))
    c = checks(run_gate(gate_ctx))["over-clarification relative reduction (CI lower bound)"]
    assert c.status == "fail" and "the trained model does" in c.detail


def test_no_items_of_a_kind_in_any_set_is_not_applicable_not_a_warning(ws, gate_ctx):
    """A run whose sets hold no item that needs clarification (a custom task without any) cannot carry that
    check by construction: not applicable with the reason, so no shipped config warns or blocks on it."""
    def no_need(r):  # the same records, none needing clarification
        from dataclasses import replace
        return [replace(x, needs_clarification=False) for x in r]

    report_for(ws, no_need(GOOD), no_need(BASE))
    c = checks(run_gate(gate_ctx))["needs-clarification success delta (pp, CI lower bound)"]
    assert c.status == "not applicable" and "no item of any set needs clarification" in c.detail


def test_hard_bucket_check_is_not_applicable_without_hotpotqa_or_strategyqa_items(ws, gate_ctx):
    base = recs(ok_need=10, overclar=25, ok_hard=15, task="gsm8k")
    report_for(ws, recs(ok_need=25, overclar=5, ok_hard=30, task="gsm8k"), base)
    res = run_gate(gate_ctx)
    c = checks(res)["hard-bucket success delta, hotpotqa+strategyqa (pp, CI lower bound)"]
    assert c.status == "not applicable" and c.passed and "tasks: gsm8k" in c.detail and res.passed


def test_an_early_stopped_run_needs_the_operators_audited_acceptance(ws, gate_ctx):
    from rc1.config.load import load_train_config
    from rc1.eval.runs import accept_early_stop

    (ws.root / "configs" / "evt.yaml").write_text("profile: laptop\ngates: configs/gates_local.yaml\n"
                                                  "run: {name: evt, seed: 1}\n")
    cfg = load_train_config("configs/evt.yaml", ws)
    report_for(ws, GOOD, reason="operator", step=10)
    name = "run completed (or early stop accepted)"
    c = checks(run_gate(gate_ctx))[name]
    assert not c.passed and "--accept-early-stop" in c.detail and "operator at step 10/24" in c.detail

    entries = accept_early_stop(ws, cfg, "operator stopped at 10 of 24 steps to free the machine")
    assert len(entries) == 1 and entries[0]["end_record_sha256"] == sha256_file(ws.path(END))
    res = run_gate(gate_ctx)
    assert res.passed and "accepted by" in checks(res)[name].detail

    # a later run writes a new end record: the old acceptance does not carry over
    write_end_record(ws, END, ws.path(f"{RUN}/step_00010"), reason="early_stop", step=10, max_steps=24)
    assert not checks(run_gate(gate_ctx))[name].passed
    # a completed run needs nothing; a missing end record cannot be judged
    write_end_record(ws, END, ws.path(f"{RUN}/step_00010"))
    assert checks(run_gate(gate_ctx))[name].passed
    ws.path(END).unlink()
    assert "no training end record" in checks(run_gate(gate_ctx))[name].detail


def test_stopped_early_defaults_from_the_reason(ws):
    from rc1.eval.runs import RunEnd

    assert RunEnd("e", {"reason": "operator"}, "h").stopped_early is True
    assert RunEnd("e", {"reason": "completed"}, "h").stopped_early is False
    assert RunEnd("e", {"reason": "completed", "stopped_early": True}, "h").stopped_early is True
    assert RunEnd("e", {"reason": "early_stop"}, "h").train_dtype == "unknown"


def test_accept_early_stop_cli(ws):
    from rc1.cli.main import app
    from rc1.state.store import read_audit

    (ws.root / "configs" / "evt.yaml").write_text("profile: laptop\ngates: configs/gates_local.yaml\n"
                                                  "run: {name: evt, seed: 1}\n")

    def rc1(*args):
        return CliRunner().invoke(app, ["--workdir", str(ws.root), *args])

    ck = fake_ckpt(ws, 10)
    write_end_record(ws, END, ck)
    r = rc1("advance", "--to", "scale_1000", "--config", "configs/evt.yaml", "--accept-early-stop", "why")
    assert r.exit_code == 2 and "no training run of this config stopped early" in r.output
    write_end_record(ws, END, ck, reason="operator", max_steps=24)
    r = rc1("advance", "--to", "scale_1000", "--config", "configs/evt.yaml", "--accept-early-stop", "  ")
    assert r.exit_code == 2 and "needs a reason" in r.output
    r = rc1("advance", "--to", "eval", "--config", "configs/evt.yaml", "--accept-early-stop", "why")
    assert r.exit_code == 2 and "RC1 gate" in r.output
    assert not [e for e in read_audit(ws) if e.get("trigger") == "accept_early_stop"]
    r = rc1("advance", "--to", "scale_1000", "--config", "configs/evt.yaml", "--accept-early-stop", "budget ran out")
    assert "accepted early stop of checkpoints/evt" in r.output and r.exit_code == 3  # then round1 refuses (empty ws)
    (entry,) = [e for e in read_audit(ws) if e.get("trigger") == "accept_early_stop"]
    assert entry["why"] == "budget ran out" and entry["checkpoint"] == f"{RUN}/step_00010"
    assert entry["end_record_sha256"] == sha256_file(ws.path(END)) and entry["operator"]


def test_seeds_are_pooled_not_judged_one_by_one_and_the_spread_is_noted(ws, gate_ctx):
    """Two seeds: +30 and +0 pp on needs-clarification items. The pooled mean (+15 pp) is judged with a
    two-level bootstrap CI, whose lower bound does not reach +5 pp; only the run checks stay per seed."""
    runs = []
    for i, trained in enumerate((GOOD, recs(ok_need=10, overclar=5, ok_hard=30))):
        run_dir, end = f"{RUN}/seed{i}", f"reports/state/training_end_seed{i}.json"
        ck = fake_ckpt(ws, 10, run=run_dir)
        write_end_record(ws, end, ck)
        runs.append((ck, trained, end, run_dir))
    crafted_report(ws, BASE, runs)
    res = run_gate(gate_ctx)
    name = "needs-clarification success delta (pp, CI lower bound)"
    assert not res.passed and [c.name for c in res.failing] == [name]
    assert "point estimate +15.0 pp" in checks(res)[name].detail and "over 2 seeds" in checks(res)[name].detail
    assert sum(c.name.startswith("seed 0: ") for c in res.checks) == sum(c.name.startswith("seed 1: ") for c in res.checks) == 2
    assert any("2 seeds: held-out success delta min +15.0 / mean +22.5 / max +30.0 pp" in n for n in res.notes)


def test_rc1_gate_refuses_an_edited_report(ws, gate_ctx):
    p = report_for(ws, GOOD)
    doc = json.loads(p.read_text())
    doc["runs"][0]["results"]["shadow"]["delta"]["needs_clar_success"]["ci95_pp"][0] = 99.0
    p.write_text(json.dumps(doc))  # edited after its sidecar was written
    res = run_gate(gate_ctx)
    assert not res.passed and res.checks[0].name == "eval report sha256" and len(res.checks) == 1
    assert "edited" in res.checks[0].detail


def test_rc1_gate_refuses_a_report_for_an_older_checkpoint(ws, gate_ctx):
    report_for(ws, GOOD)
    fake_ckpt(ws, 20)  # training went on: latest is step 20 now
    res = run_gate(gate_ctx)
    assert not res.passed and checks(res)["report is for the current checkpoint"].passed is False


def test_rc1_gate_without_a_report_fails(ws, gate_ctx):
    res = run_gate(gate_ctx)
    assert not res.passed and "rc1 eval" in res.checks[0].detail


# ----------------------------------------------------------------------------- the markdown report
def md_rows(md: str) -> dict[str, list[str]]:
    return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in md.splitlines() if line.startswith("| ")}


def test_report_numbers_equal_the_json(ws):
    from rc1.eval.harness import run_view
    from rc1.report.build import build_report
    from rc1.runtime.fmt import fmt_pct, fmt_pp, fmt_rate_ci

    p = report_for(ws, GOOD)
    with open(ws.metrics_path, "w") as fh:
        for s in range(1, 6):
            fh.write(json.dumps({"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.01 * s,
                                 "reward/correctness": 0.2 * s, "curriculum/gsm8k/L0/weight": 1.0 - 0.1 * s,
                                 "curriculum/gsm8k/L1/weight": 0.1 * s, "curriculum/gsm8k/L0/pass_rate": 0.15 * s})
                     + "\n")
    md_path = build_report(ws)
    md = md_path.read_text()
    rep = json.loads(p.read_text())
    held = run_view(rep, rep["runs"][0], "shadow")
    rows = md_rows(md)
    overall = rows["overall"]
    assert overall[2] == fmt_rate_ci(held["base"]["success"]) and overall[3] == fmt_rate_ci(held["trained"]["success"])
    assert overall[4] == fmt_pp(held["delta"]["success"]["delta_pp"])
    need = rows["needs clarification"]
    assert need[4] == fmt_pp(held["delta"]["needs_clar_success"]["delta_pp"]) == "+30.0 pp"
    assert rows["hard bucket, hotpotqa+strategyqa"][3] == fmt_rate_ci(held["trained"]["hard_hq_sq"])
    assert f"{100 * held['trained']['success']['rate']:.1f}%" in md.split("**Held-out success")[1].split("**")[0]
    # the per-task baseline table: majority answer and baseline, MDE
    (task,) = [r for line in md.splitlines() if line.startswith("| hotpotqa |")
               for r in [[c.strip() for c in line.split("|")[1:-1]]] if len(r) == 11]
    assert task[3] == fmt_pct(held["majority"]["by_task"]["hotpotqa"]["rate"]) == "1.0%"
    assert task[10] == f"{100 * held['mde']['by_task']['hotpotqa']['mde']:.1f} pp"
    assert "Eval dtype: **fp32**" in md and "Training dtype: **fp32**" in md
    assert "smallest success increase" in md and "completed (step 10/10)" in md
    for png in ("training_curves", "bucket_success", "reward_dims", "curriculum", "gain"):
        assert f"plots/{png}.png" in md and (md_path.parent / "plots" / f"{png}.png").stat().st_size > 1000
    assert sha256_file(p) in md and "code commit" in md and (md_path.parent / "rc1_report.md.sha256").exists()


def test_metrics_rows_are_split_into_one_run_per_seed_for_the_plots():
    from rc1.report.plots import _by_seed

    steps = [1, 2, 3, 2, 3, 4, 1, 2, 1, 2]   # seed 0 resumed from step 1 (repeats 2-3), then seeds 1 and 2
    runs = _by_seed([{"step": s} for s in steps])
    assert {i: [r["step"] for r in rows] for i, rows in runs.items()} == {0: [1, 2, 3, 2, 3, 4], 1: [1, 2], 2: [1, 2]}
    tagged = _by_seed([{"step": 1, "seed_index": 1}, {"step": 1, "seed_index": 0}])
    assert list(tagged) == [0, 1]


def test_the_difficulty_fit_plot_draws_every_task_and_skips_a_run_without_a_fit(tmp_path):
    from rc1.report.plots import plot_difficulty_fit

    def level(n, p, chosen):
        return {"level": n, "pass_rate": p, "ci": [max(0, p - 0.1), min(1, p + 0.1)], "majority_rate": 0.05,
                "chosen": chosen}
    fit = {"band": [0.05, 0.8], "tasks": {
        "gsm8k": {"chosen": [0], "levels": [level(0, 0.2, True), level(1, 0.02, False),
                                            {"level": 2, "pass_rate": None, "chosen": False}]},
        "hotpotqa": {"chosen": [], "levels": [level(0, 0.0, False)]}}}
    out = tmp_path / "fit.png"
    assert plot_difficulty_fit(fit, out) and out.stat().st_size > 1000
    assert not plot_difficulty_fit(None, tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_report_states_not_measurable_checks_and_early_stops(ws):
    from rc1.report.build import build_report

    one_turn = lambda i: 1  # noqa: E731
    report_for(ws, recs(ok_need=25, overclar=0, ok_hard=30, turns=one_turn),
               recs(ok_need=10, overclar=0, ok_hard=15, turns=one_turn), reason="operator")
    prod = md_rows(build_report(ws).read_text())  # no run config: the production thresholds and policy
    assert prod["average turns increase (CI upper bound)"][3] == "NOT MEASURABLE (blocks)"
    (ws.root / "configs" / "evt.yaml").write_text("profile: laptop\ngates: configs/gates_local.yaml\n")
    md = build_report(ws, config_path="configs/evt.yaml").read_text()
    rows = md_rows(md)
    assert rows["over-clarification relative reduction (CI lower bound)"][3].startswith("not measurable (warning only")
    assert rows["average turns increase (CI upper bound)"][3].startswith("not measurable (warning only")
    assert "let through as warnings by the `laptop` profile" in md and "production profile blocks" in md
    assert "**stopped early** (operator at step 10/24" in md
    assert rows["run completed (or early stop accepted)"][3] == "FAIL"


def test_report_refuses_a_tampered_eval_report(ws):
    from rc1.report.build import build_report
    from rc1.runtime.errors import ConfigError

    p = report_for(ws, GOOD)
    p.write_text(p.read_text().replace('"laptop"', '"production"'))
    with pytest.raises(ConfigError, match="sidecar"):
        build_report(ws)
