"""Custom tasks (bring your own task): task files, the held-out split, pools, config and the gates' N/A."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.data.generic import read_task_file, split_heldout
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace
from tests.helpers.configs import REPO
from tests.helpers.tasks import ARITH_CONFIG, custom_gates_yaml, write_task_file


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args])


def lines(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def arith_ws(tmp_path):
    """A workspace with an 80-line arithmetic task file, its run config and gates config."""
    ws = Workspace(tmp_path)
    write_task_file(ws.path("data/arith.jsonl"), 80)
    ws.path("configs").mkdir()
    ws.path("configs/arith.yaml").write_text(ARITH_CONFIG.format(steps=20, n=50, shadow_n=10, verifier="numeric"))
    ws.path("configs/gates_arith.yaml").write_text(custom_gates_yaml({"arith": 1.0}, {"pool": {"min_items": 40}}))
    ws.path("configs/weights.json").write_text((REPO / "configs/weights.json").read_text())
    return ws


# ----------------------------------------------------------------------------- task files
def test_a_task_line_becomes_a_pool_item_with_its_verifier(tmp_path):
    f = lines(tmp_path / "t.jsonl", [
        {"question": "What is 2 + 3?", "answer": 5},
        {"id": 7, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of Peru?"}],
         "answer": "Lima", "aliases": ["Lima, Peru"], "supporting": "Lima is the capital of Peru.",
         "meta": {"difficulty": "hard", "source_url": "x"}},
    ])
    a, b = read_task_file(f, task="mine", verifier="exact")
    assert a["id"].startswith("mine-") and len(a["id"]) == len("mine-") + 12
    assert a["messages"] == [{"role": "user", "content": "What is 2 + 3?"}] and a["answer"] == "5"
    assert (a["task"], a["verifier"], a["template"], a["role"], a["needs_clarification"]) == ("mine", "exact", None, None, False)
    assert b["id"] == "7" and b["question"] == "Capital of Peru?" and b["messages"][0]["role"] == "system"
    assert b["supporting"] == ["Lima is the capital of Peru."] and b["meta"]["difficulty"] == "hard"
    assert b["source"].endswith("t.jsonl:2")
    # the content id is stable: the same line elsewhere in the file gets the same id
    g = lines(tmp_path / "g.jsonl", [{"question": "x?", "answer": "1"}, {"question": "What is 2 + 3?", "answer": 5}])
    assert read_task_file(g, task="mine", verifier="exact")[1]["id"] == a["id"]


def test_every_bad_line_is_named_by_file_and_line(tmp_path):
    f = lines(tmp_path / "bad.jsonl", [
        {"question": "ok?", "answer": "4", "id": "a"},
        "{not json",
        {"question": "no answer here?"},
        {"question": "typo?", "anwser": "3"},
        {"question": "words?", "answer": "about four"},
        {"id": "a", "question": "again?", "answer": "2"},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "4"}], "answer": "4"},
        {"question": "hard?", "answer": "1", "meta": {"difficulty": "brutal"}},
        [1, 2],
    ])
    with pytest.raises(ConfigError) as exc:
        read_task_file(f, task="arith", verifier="numeric", shown="data/bad.jsonl")
    got = exc.value.lines
    assert exc.value.message == "data/bad.jsonl: 8 bad line(s) in task 'arith'"
    assert got[0].startswith("data/bad.jsonl:2: malformed JSON")
    assert got[1] == "data/bad.jsonl:3: answer: Field required"
    assert "data/bad.jsonl:4: anwser: unknown key" in got
    assert "data/bad.jsonl:5: answer: the answer 'about four' holds no number (verifier numeric)" in got
    assert "data/bad.jsonl:6: id 'a' repeats line 1" in got
    assert any(x.startswith("data/bad.jsonl:7:") and "end with a user message" in x for x in got)
    assert any(x.startswith("data/bad.jsonl:8: meta:") and "'brutal' is not one of easy, medium, hard" in x for x in got)
    assert got[-1] == "data/bad.jsonl:9: expected a JSON object, got list"


def test_a_line_repeated_without_ids_is_a_duplicate(tmp_path):
    f = lines(tmp_path / "dup.jsonl", [{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"},
                                       {"question": "2+2?", "answer": "4"}])
    with pytest.raises(ConfigError) as exc:
        read_task_file(f, task="arith", verifier="numeric", shown="dup.jsonl")
    assert exc.value.lines[0].startswith("dup.jsonl:3: content (same prompt and answer) 'arith-") \
        and exc.value.lines[0].endswith("repeats line 1")


def test_the_heldout_split_is_disjoint_and_stable_when_the_file_grows(tmp_path):
    small = read_task_file(write_task_file(tmp_path / "a.jsonl", 60), task="arith", verifier="numeric")
    big = read_task_file(write_task_file(tmp_path / "b.jsonl", 120), task="arith", verifier="numeric")
    train, held = split_heldout(small, 0.25, seed=1)
    assert {i["id"] for i in train}.isdisjoint(i["id"] for i in held) and len(train) + len(held) == 60
    assert 5 <= len(held) <= 25
    _, held_big = split_heldout(big, 0.25, seed=1)
    assert {i["id"] for i in held} == {i["id"] for i in held_big if i["id"] in {x["id"] for x in small}}
    assert split_heldout(small, 0.25, seed=2)[1] != held  # the seed chooses another split


# ----------------------------------------------------------------------------- CLI: pool and shadow set
def test_build_pool_and_shadow_set_from_a_task_file_never_share_an_item(arith_ws):
    ws = arith_ws
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "numeric", "--heldout", "0.25",
            "--out", "data/pool.jsonl")
    assert r.exit_code == 0, r.output
    pool = [json.loads(x) for x in ws.path("data/pool.jsonl").read_text().splitlines()]
    assert {it["task"] for it in pool} == {"arith"} and {it["verifier"] for it in pool} == {"numeric"}
    r = rc1(ws, "data", "shadow-set", "--source", "data/arith.jsonl", "--verifier", "numeric", "--heldout", "0.25",
            "--pool", "data/pool.jsonl", "--out", "data/shadow.jsonl", "--manifest", "reports/m.json")
    assert r.exit_code == 0, r.output
    shadow = [json.loads(x) for x in ws.path("data/shadow.jsonl").read_text().splitlines()]
    assert len(pool) + len(shadow) == 80 and {i["id"] for i in pool}.isdisjoint(i["id"] for i in shadow)
    assert all(it["bucket"] == it["meta"]["difficulty"] and it["bucket_source"] == "declared" for it in shadow)
    manifest = json.loads(ws.path("reports/m.json").read_text())
    assert manifest["custom_tasks"]["arith"]["files"]["data/arith.jsonl"] and manifest["n"] == len(shadow)

    # A smaller held-out share moves held-out items into training: refused against the existing shadow set.
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "numeric", "--heldout", "0.05",
            "--out", "data/pool2.jsonl", "--shadow", "data/shadow.jsonl")
    assert r.exit_code == 2 and "share" in r.output and "must never be trained on" in r.output
    assert not ws.path("data/pool2.jsonl").exists()
    # ... and a held-out set that shares items with the existing pool is refused too.
    r = rc1(ws, "data", "shadow-set", "--source", "data/arith.jsonl", "--verifier", "numeric", "--heldout", "0.6",
            "--pool", "data/pool.jsonl", "--out", "data/shadow2.jsonl")
    assert r.exit_code == 2 and "must never be trained on" in r.output and not ws.path("data/shadow2.jsonl").exists()


def test_build_pool_errors_are_clear(arith_ws):
    ws = arith_ws
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "numric")
    assert r.exit_code == 2 and "unknown verifier 'numric'" in r.output
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "python:nowhere:check")
    assert r.exit_code == 2 and "no nowhere.py in the workspace" in r.output
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "numeric", "--n", "500")
    assert r.exit_code == 2 and "asks for 500 arith items" in r.output
    r = rc1(ws, "data", "build-pool", "--mix", "arith:1.0")
    assert r.exit_code == 2 and "unknown task(s) ['arith']" in r.output
    r = rc1(ws, "data", "build-pool", "--source", "data/arith.jsonl", "--verifier", "numeric", "--task", "gsm8k")
    assert r.exit_code == 2 and "--task: 'gsm8k' is a built-in task" in r.output
    lines(ws.path("data/yn.jsonl"), [{"question": "Is ice cold?", "answer": "maybe"}])
    r = rc1(ws, "data", "build-pool", "--source", "data/yn.jsonl", "--verifier", "yes_no")
    assert r.exit_code == 2 and "data/yn.jsonl:1: answer: the answer 'maybe' is not yes/no (verifier yes_no)" in r.output


def test_a_pool_can_mix_a_custom_task_with_built_in_ones(arith_ws):
    ws = arith_ws
    r = rc1(ws, "data", "build-pool", "--config", "configs/arith.yaml", "--mix", "gsm8k:0.5,arith:0.5", "--n", "40",
            "--templates-dir", str(REPO / "templates/pack_v2"), "--out", "data/mixed.jsonl")
    assert r.exit_code == 0, r.output
    pool = [json.loads(x) for x in ws.path("data/mixed.jsonl").read_text().splitlines()]
    assert sorted(it["task"] for it in pool).count("arith") == 20 and len(pool) == 40
    assert all(("verifier" in it) == (it["task"] == "arith") for it in pool)


# ----------------------------------------------------------------------------- config
def test_custom_task_names_must_be_declared_in_the_run_config(arith_ws):
    ws = arith_ws
    assert rc1(ws, "config", "verify", "--config", "configs/arith.yaml").exit_code == 0
    cfg = yaml.safe_load(ws.path("configs/arith.yaml").read_text())
    cfg["datasets"]["mix"] = {"arth": 1.0}
    ws.path("configs/typo.yaml").write_text(yaml.safe_dump(cfg))
    r = rc1(ws, "config", "verify", "--config", "configs/typo.yaml")
    assert r.exit_code == 2 and "datasets.mix: unknown task(s) ['arth']" in r.output
    # the gates config may name a custom task only through the run config that declares it
    r = rc1(ws, "config", "verify", "--config", "configs/gates_arith.yaml")
    assert r.exit_code == 2 and "pool.mix: unknown task(s) ['arith']" in r.output
    cfg = yaml.safe_load(ws.path("configs/arith.yaml").read_text())
    cfg["datasets"]["tasks"]["arith"]["verifier"] = "python:my-mod:check"
    cfg["datasets"]["tasks"]["easy"] = {"path": "x.jsonl", "verifier": "exact"}
    ws.path("configs/bad.yaml").write_text(yaml.safe_dump(cfg))
    r = rc1(ws, "config", "verify", "--config", "configs/bad.yaml")
    assert r.exit_code == 2 and "datasets.tasks.arith.verifier: 'python:my-mod:check' is not python:MODULE:FUNCTION" \
        in r.output
    del cfg["datasets"]["tasks"]["arith"]
    ws.path("configs/bad.yaml").write_text(yaml.safe_dump(cfg))
    r = rc1(ws, "config", "verify", "--config", "configs/bad.yaml")
    assert r.exit_code == 2 and "datasets.tasks: task name 'easy' is reserved" in r.output


# ----------------------------------------------------------------------------- gates: not applicable, and still failing
def _checks(checks):
    """Report checks (dicts) by name, read back as the gate reads them."""
    from rc1.gates.base import Check

    return {c["name"]: Check.from_dict(c) for c in (checks["checks"] if isinstance(checks, dict) else checks)}


def test_pool_checks_a_custom_task_lacks_the_fields_for_are_not_applicable_with_the_reason(arith_ws):
    from rc1.config.load import load_train_config
    from rc1.config.gates import PoolGate
    from rc1.data import diversity as DV
    from rc1.data.generic import load_task

    ws = arith_ws
    cfg = load_train_config("configs/arith.yaml", ws)
    data = load_task(ws, "arith", cfg.datasets.tasks["arith"])
    th = PoolGate.model_validate({"mix": {"arith": 1.0}, "min_items": 10, "len_min": 8, "distinct2_min": 0.3},
                                 context={"tasks": ["arith"]})
    rep = DV.validate(data.train, data.heldout, None, th)
    c = _checks(rep)
    for name in ("roles covered", "styles covered", "3-gram KL vs v1 beyond split-half baseline"):
        assert c[name].status == "not applicable" and c[name].passed and c[name].detail.startswith("not applicable: ")
    assert "template" in c["roles covered"].detail and "pool.v1_pool" in c["3-gram KL vs v1 beyond split-half baseline"].detail
    assert rep["passed"], [x for x in rep["checks"] if not x["passed"]]
    # the checks that do apply still fail on bad custom data: repeated items, the wrong mix, a leak
    dup = data.train + [dict(it, id=it["id"] + "-copy") for it in data.train[:10]]
    assert not _checks(DV.validate(dup, data.heldout, None, th))["duplicates after dedup (%)"].passed
    wrong_mix = DV.validate(data.train, data.heldout, None, th.model_copy(update={"mix": {"gsm8k": 1.0}}))
    assert not _checks(wrong_mix)["task mix max deviation (pp)"].passed
    leaky = DV.validate(data.train, data.heldout + data.train[:2], None, th)
    assert not _checks(leaky)["leak vs shadow set (max 5-gram similarity)"].passed
    # a pool with built-in items is measured as before: roles are counted over the templated items
    from rc1.data.pool import BuildParams, build_pool

    gen = build_pool(BuildParams(n=30, mix={"gsm8k": 1.0}, templates_dir=REPO / "templates/pack_v2", seed=3))
    mixed = _checks(DV.validate(gen + data.train, None, None, th.model_copy(update={"mix": {"gsm8k": 0.5, "arith": 0.5},
                                                                                    "mix_tol_pp": 20})))
    assert mixed["roles covered"].status == "pass" and "None" not in mixed["roles covered"].detail
    assert mixed["3-gram KL vs v1 beyond split-half baseline"].status == "fail"   # built-in tasks: a v1 pool is required


def test_difficulty_uses_declared_buckets_and_measures_clue_overlap_only_with_supporting_text(arith_ws):
    from rc1.config.gates import DifficultyGate
    from rc1.data import difficulty as D
    from rc1.data.generic import read_task_file

    items = read_task_file(arith_ws.path("data/arith.jsonl"), task="arith", verifier="numeric")
    metrics, _ = D.compute_metrics(items)
    assert [m["bucket"] for m in metrics] == [it["meta"]["difficulty"] for it in items]
    assert set(metrics[0]["difficulty"]["not_applicable"]) == {"turns", "tool_hops", "needs_clarification", "clue_overlap"}
    balanced, _ = D.balance(metrics, D.DEFAULT_TARGET, seed=1)
    checks, _ = D.difficulty_checks(balanced, DifficultyGate())
    c = _checks(checks)
    assert c["max len_tokens"].status == "pass"
    for name in ("max turns", "max tool_hops", "clue_overlap median (hard)", "clue_overlap min (hard)"):
        assert c[name].status == "not applicable" and c[name].detail.startswith("not applicable: no item has")
    # the hard/easy share bounds describe the generated pool's design: not applicable to a custom task, even
    # one whose items declare too few hard ones (the outcome check judges its buckets) ...
    easy = [dict(m, bucket="easy") for m in metrics[:20]] + [dict(m, bucket="medium") for m in metrics[20:40]]
    c = _checks(D.difficulty_checks(easy, DifficultyGate())[0])
    assert c["arith: hard share"].status == "not applicable" and "custom task" in c["arith: easy share"].detail
    # ... while a built-in task's shares are still judged
    gsm = [dict(m, task="gsm8k") for m in easy]
    c = _checks(D.difficulty_checks(gsm, DifficultyGate())[0])
    assert c["gsm8k: hard share"].status == "fail" and c["gsm8k: easy share"].status == "fail"
    # items with supporting text and no declared bucket: clue overlap is measured and votes on the bucket
    clued = [dict(it, supporting=[it["question"]], meta={}) for it in items[:30]]
    m, _ = D.compute_metrics(clued)
    assert "clue_overlap" not in (m[0]["difficulty"].get("not_applicable") or {}) and "bucket_source" not in m[0]
    c = _checks(D.difficulty_checks(m, DifficultyGate())[0])
    assert c["clue_overlap max (easy)"].status in ("pass", "fail") and c["clue_overlap median (easy)"].measured == 1.0


def test_report_not_applicable_checks_read_back_as_gate_checks():
    from rc1.data.applicability import na_check
    from rc1.gates.base import Check

    assert Check.from_dict(na_check("roles covered", "why")) == Check.not_applicable("roles covered", "why")





def test_run_config_gate_checks_each_custom_tasks_files_and_verifier(arith_ws):
    from rc1.config.load import load_gates_config, load_train_config
    from rc1.gates import run_config
    from rc1.gates.base import GateContext

    ws = arith_ws

    def task_check():
        cfg = load_train_config("configs/arith.yaml", ws)
        gates = load_gates_config(cfg.gates, ws, tasks=cfg.datasets.tasks)
        res = run_config.evaluate(GateContext(ws=ws, gates=gates, round="round1", config=cfg))
        return next(c for c in res.checks if c.name == "task arith: files and verifier"), {e.path for e in res.evidence}

    check, evidence = task_check()
    assert check.passed and "data/arith.jsonl" in evidence
    text = ws.path("configs/arith.yaml").read_text()
    ws.path("configs/arith.yaml").write_text(text.replace("verifier: numeric", "verifier: python:checks:arith"))
    check, _ = task_check()
    assert not check.passed and "no checks.py in the workspace" in check.detail
    ws.path("checks.py").write_text("def arith(prediction, gold, aliases):\n    return prediction == gold\n")
    check, evidence = task_check()
    assert check.passed and {"data/arith.jsonl", "checks.py"} <= evidence  # editing the verifier later is caught
    ws.path("data/arith.jsonl").unlink()
    check, _ = task_check()
    assert not check.passed and check.detail == "missing data/arith.jsonl"
