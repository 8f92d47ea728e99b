"""Scale-up gate: before/after reports, a real expansion with no overlap, stop at the first failing check."""

from __future__ import annotations

import json

import pytest
from tests.helpers.eval import REPO, write_jsonl

from rc1.runtime.fingerprint import verify_artifact
from tests.helpers.configs import gates_yaml

GATES = gates_yaml({
    "profile": "laptop",
    "note": "test profile: small pools, so the lexical thresholds are relaxed; leak and overlap checks are the production ones",
    "pool": {"distinct2_min": 0.0, "kl3_min": -10.0, "roles_min": 1, "styles_min": 1, "dup_max_pct": 100, "len_min": 0,
             "len_max": 100000, "mix_tol_pp": 100, "leak_ngram": 5, "leak_sim_max": 0.85, "near_dup_jaccard": 0.9,
             "min_items": 1},
    "difficulty": {"hard_min": 0.0, "easy_max": 1.0, "len_max": 100000, "turns_max": 100, "tool_hops_max": 100,
                   "clue_overlap_hard_median_max": 1.0, "clue_overlap_easy_median_min": 0.0,
                   "clue_overlap_easy_max": 1.0, "clue_overlap_hard_min": 0.0},
    "scale": {"stages": {"scale_1000": 24, "scale_5000": 48}, "scorer_variance_max": 0.08, "stability_items": 4},
}, base="configs/gates.yaml")
CONFIG = """\
profile: laptop
gates: configs/gates_scale_test.yaml
run: {name: evt}
data: {shadow_path: data/shadow.jsonl, eval_path: data/eval_min.jsonl, train_path: data/train_min.jsonl}
model: {base: "random:qwen3-tiny", lora: {enable: false}}
finetune: {method: full}
seed_pool: data/rollouts/rc1_seed.balanced.jsonl
pool: {out: data/rollouts/rc1_seed.jsonl, seed: 555, templates_dir: templates/pack_v2}
"""


class GradeJudge:
    """Test double with JudgeClient's score_many interface (no server): K grades per answer, `right` for an
    answer that repeats the item's gold answer, `wrong` otherwise (equal tuples: a constant judge)."""

    def __init__(self, right=(1.0, 1.0, 0.9), wrong=(0.1, 0.0, 0.1)):
        self.right, self.wrong = right, wrong
        self.calls = 0

    def score_many(self, pairs, ids=None):
        import statistics

        from rc1.envs.answers import extract_final_answer
        from rc1.judge.client import JudgeScore, SampleResult

        self.calls += 1
        out = []
        for n, (item, resp) in enumerate(pairs):
            grades = self.right if extract_final_answer(resp) == str(item["answer"]) else self.wrong
            samples = [SampleResult(k, g, "live", "ok") for k, g in enumerate(grades)]
            out.append(JudgeScore(ids[n] if ids else item["id"], statistics.median(grades),
                                  statistics.pvariance(grades), samples))
        return out


@pytest.fixture(scope="module")
def scale_data():
    """Seed pool (raw + balanced), shadow set and v1 pool, built once for the module."""
    from rc1.data import difficulty as D
    from rc1.data.pool import BuildParams, build_pool
    from rc1.data.tokens import get_counter
    from rc1.data.v1 import build_v1_pool

    tpl = REPO / "templates" / "pack_v2"
    raw = build_pool(BuildParams(n=90, seed=555, templates_dir=tpl))
    metrics, _ = D.compute_metrics(raw, get_counter("random:qwen3-tiny"))
    balanced, _ = D.balance(metrics, D.DEFAULT_TARGET, 1)
    shadow, _ = D.compute_metrics(build_pool(BuildParams(n=12, seed=777, templates_dir=tpl, space="shadow",
                                                         id_prefix="shadow")), get_counter("random:qwen3-tiny"))
    v1 = build_v1_pool(BuildParams(n=40, seed=1, templates_dir=tpl))
    return raw, balanced, shadow, v1


@pytest.fixture
def scale_ws(ws, scale_data):
    raw, balanced, shadow, v1 = scale_data
    (ws.root / "configs" / "gates_scale_test.yaml").write_text(GATES)
    (ws.root / "configs" / "scale.yaml").write_text(CONFIG)
    write_jsonl(ws.path("data/rollouts/rc1_seed.jsonl"), raw)
    write_jsonl(ws.path("data/rollouts/rc1_seed.balanced.jsonl"), balanced)
    write_jsonl(ws.path("data/shadow.jsonl"), shadow)
    write_jsonl(ws.path("data/rollouts/rc1_v1.jsonl"), v1)
    return ws


def _ctx(ws, stage, judge=None):
    from rc1.config.load import load_gates_config, load_train_config
    from rc1.gates.base import GateContext

    from rc1.data.expansion import builder

    cfg = load_train_config("configs/scale.yaml", ws)
    gates = load_gates_config(cfg.gates, ws)
    # the expansion builder `rc1 scale run` hands the gate
    return GateContext(ws=ws, gates=gates, round=stage, config=cfg,
                       extras={"expand": builder(ws, cfg, gates.pool), **({"judge": judge} if judge else {})})


def test_scale_1000_expands_with_new_items_and_writes_before_after_reports(scale_ws):
    from rc1.gates.scale import evaluate

    ws = scale_ws
    judge = GradeJudge()
    res = evaluate(_ctx(ws, "scale_1000", judge))
    assert res.passed, [c.to_dict() for c in res.failing]
    new = [json.loads(x) for x in ws.path("data/rollouts/rc1_scale_1000.jsonl").read_text().splitlines()]
    assert len(new) == 24 and verify_artifact(ws, "data/rollouts/rc1_scale_1000.jsonl")
    old_ids = {json.loads(x)["id"] for f in ("data/rollouts/rc1_seed.jsonl", "data/shadow.jsonl")
               for x in ws.path(f).read_text().splitlines()}
    assert not {it["id"] for it in new} & old_ids and all("bucket" in it for it in new)
    for phase in ("before", "after"):
        rep = json.loads(ws.path(f"reports/scale/scale_1000_{phase}.json").read_text())
        assert rep["passed"] and rep["phase"] == phase and {"diversity", "difficulty", "stability"} <= set(rep)
        assert all(c["status"] == "pass" for c in rep["checks"])
        assert verify_artifact(ws, f"reports/scale/scale_1000_{phase}.json")
    names = [c.name for c in res.checks]
    assert names.index("before: scorer stability: mean judge variance") < names.index("after: new items")
    stab = json.loads(ws.path("reports/scale/scale_1000_before.json").read_text())["stability"]
    assert stab["correct"] == 4 and stab["responses"] == 8  # gold and a wrong answer for each item
    assert stab["discrimination"]["auc"] == 1.0
    assert judge.calls == 2  # stability before and after
    assert any(e.path == "data/rollouts/rc1_scale_1000.jsonl" for e in res.evidence)

    # scale_5000 builds on scale_1000: its new items overlap neither the seed pool nor the first expansion
    res5 = evaluate(_ctx(ws, "scale_5000", judge))
    assert res5.passed, [c.to_dict() for c in res5.failing]
    new5 = {json.loads(x)["id"] for x in ws.path("data/rollouts/rc1_scale_5000.jsonl").read_text().splitlines()}
    assert len(new5) == 48 and not new5 & ({it["id"] for it in new} | old_ids)


def test_the_scale_gate_alone_builds_nothing_and_names_the_command_that_does(scale_ws):
    """A gate reads and measures: without the builder `rc1 scale run` hands it (as `rc1 advance` runs it), a
    missing expansion fails its check and no file is written."""
    from rc1.gates.scale import evaluate

    ctx = _ctx(scale_ws, "scale_1000", GradeJudge())
    del ctx.extras["expand"]
    res = evaluate(ctx)
    bad = [c for c in res.checks if not c.passed and c.threshold != "not run"]
    assert [c.name for c in bad] == ["after: expansion built"]
    assert "rc1 scale run --stage scale_1000" in bad[0].detail
    assert not scale_ws.path("data/rollouts/rc1_scale_1000.jsonl").exists()


def test_scale_gate_stops_at_the_first_failing_check_with_a_leaking_pool(scale_ws):
    from rc1.gates.scale import evaluate

    ws = scale_ws
    shadow = ws.path("data/shadow.jsonl").read_text().splitlines()
    leaked = [dict(json.loads(x), id=f"copy-{i}") for i, x in enumerate(shadow[:2])]
    pool_p = ws.path("data/rollouts/rc1_seed.balanced.jsonl")
    pool_p.write_text(pool_p.read_text() + "".join(json.dumps(it) + "\n" for it in leaked))
    judge = GradeJudge()
    res = evaluate(_ctx(ws, "scale_1000", judge))
    assert not res.passed
    failing = [c for c in res.checks if not c.passed and c.threshold != "not run"]
    assert [c.name for c in failing] == ["before: diversity: leak vs shadow set (max 5-gram similarity)"]
    not_run = [c.name for c in res.checks if c.threshold == "not run"]
    assert "before: scorer stability" in not_run and "after: expansion" in not_run and "after: difficulty" in not_run
    assert judge.calls == 0 and not ws.path("data/rollouts/rc1_scale_1000.jsonl").exists()
    after = json.loads(ws.path("reports/scale/scale_1000_after.json").read_text())
    assert not after["passed"] and {c["status"] for c in after["checks"]} == {"not_run"}


@pytest.mark.parametrize("judge,failing", [
    (GradeJudge(right=(0.7, 0.7, 0.7), wrong=(0.7, 0.7, 0.7)), "discrimination"),  # constant: variance 0
    (GradeJudge(right=(0.1, 0.0, 0.1), wrong=(1.0, 1.0, 0.9)), "discrimination"),  # inverted
    (GradeJudge(right=(1.0, 0.2, 1.0), wrong=(0.0, 0.8, 0.0)), "mean judge variance"),  # right on median, unstable
])
def test_scale_stability_fails_a_judge_that_does_not_discriminate_or_is_unstable(scale_ws, judge, failing):
    from rc1.gates.scale import evaluate

    res = evaluate(_ctx(scale_ws, "scale_1000", judge))
    assert not res.passed
    bad = [c for c in res.checks if not c.passed and c.threshold != "not run"]
    assert [c.name for c in bad] == [f"before: scorer stability: {failing}" + (
        " (AUC CI lower bound)" if failing == "discrimination" else "")]
    assert any(c.name == "before: difficulty" and c.threshold == "not run" for c in res.checks)


def test_scale_without_a_judge_fails_stability_clearly_and_scale_5000_needs_scale_1000(scale_ws):
    from rc1.gates.scale import evaluate

    ws = scale_ws
    res = evaluate(_ctx(ws, "scale_1000"))  # no judge server running in this workspace
    stab = next(c for c in res.checks if c.name == "before: scorer stability: mean judge variance")
    assert not stab.passed and "rc1 judge serve" in stab.detail
    assert any(c.name == "before: difficulty" and c.threshold == "not run" for c in res.checks)
    res5 = evaluate(_ctx(ws, "scale_5000", GradeJudge()))
    assert not res5.passed and res5.checks[0].name == "before: previous stage scale_1000 passed"
    assert "did not pass" in res5.checks[0].detail


def test_scale_run_cli_exit_codes(scale_ws):
    from typer.testing import CliRunner

    from rc1.cli.main import app

    ws = scale_ws
    ws.path("data/rollouts/rc1_seed.balanced.jsonl").unlink()
    ws.path("data/rollouts/rc1_seed.jsonl").unlink()
    run = lambda *a: CliRunner().invoke(app, ["--workdir", str(ws.root), "scale", "run", *a])  # noqa: E731
    r = run("--stage", "scale_42", "--config", "configs/scale.yaml")
    assert r.exit_code == 2 and "unknown stage" in r.output
    r = run("--stage", "scale_1000", "--config", "configs/scale.yaml")
    assert r.exit_code == 3 and "FAIL" in r.output and "current pool exists" in r.output
    assert json.loads(ws.path("reports/scale/scale_1000_before.json").read_text())["passed"] is False
