"""Pool builder: determinism, the item contract, clarify items, bad input, make-min, shadow set."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli

SMALL = ["--n", "300"]


def test_same_seed_same_bytes_other_seed_differs(ws, monkeypatch):
    a = run_cli(ws, "data", "build-pool", *SMALL, "--seed", "7", "--out", "a.jsonl")
    b = run_cli(ws, "data", "build-pool", *SMALL, "--seed", "7", "--out", "b.jsonl")
    c = run_cli(ws, "data", "build-pool", *SMALL, "--seed", "8", "--out", "c.jsonl")
    assert a.exit_code == b.exit_code == c.exit_code == 0, a.output
    assert ws.path("a.jsonl").read_bytes() == ws.path("b.jsonl").read_bytes()
    assert ws.path("a.jsonl").read_bytes() != ws.path("c.jsonl").read_bytes()
    # two worker processes write the very same bytes as one
    monkeypatch.setenv("RC1_WORKERS", "2")
    assert run_cli(ws, "data", "build-pool", *SMALL, "--seed", "7", "--out", "d.jsonl").exit_code == 0
    assert ws.path("d.jsonl").read_bytes() == ws.path("a.jsonl").read_bytes()
    # registered: sidecar and manifest line
    assert ws.path("a.jsonl.sha256").exists()
    assert "a.jsonl" in ws.path("reports/rc1/artifacts.jsonl").read_text()


def test_items_follow_the_contract_and_clarify_items_hide_a_detail(small_ws):
    from rc1.data.io import read_jsonl

    items = read_jsonl(small_ws.path("data/rollouts/rc1_seed.jsonl"))
    assert len({it["id"] for it in items}) == len(items) == 1500
    for it in items:
        assert it["task"] in ("hotpotqa", "strategyqa", "gsm8k")
        assert it["messages"][0]["role"] == "system" and it["messages"][-1]["role"] == "user"
        assert it["question"] in it["messages"][-1]["content"]
        assert it["tools"] == ["wiki", "calc"] and it["max_turns"] == 6
        if it["task"] == "gsm8k":
            assert it["answer"].lstrip("-").isdigit() and it["meta"]["answer_text"].endswith(f"#### {it['answer']}")
        if it["task"] == "strategyqa":
            assert it["answer"] in ("yes", "no")
        if it["task"] == "hotpotqa":
            assert it["answer"] in " ".join(d["text"] for d in it["corpus"])
    clar = [it for it in items if it["needs_clarification"]]
    assert 0.2 < len(clar) / len(items) < 0.4
    for it in clar:
        assert it["hidden_detail"]
        assert it["hidden_detail"] not in it["question"]
    assert all(it["hidden_detail"] is None for it in items if not it["needs_clarification"])


def test_gsm8k_answers_are_exact():
    import random
    import re

    from rc1.data.generators import generate
    from rc1.data.sources import normalize_gsm8k

    for i in range(200):
        rec = generate("gsm8k", random.Random(i), ("easy", "medium", "hard")[i % 3])["source"]
        item = normalize_gsm8k(rec)
        # replay the solution's equations: every line's last "a op b = c" is arithmetic that holds
        for line in item["supporting"]:
            for a, op, b, c in re.findall(r"(\d+) ([-+x/]) (\d+) = (\d+)", line):
                a, b, c = int(a), int(b), int(c)
                assert {"+": a + b, "-": a - b, "x": a * b, "/": a // b if b else None}[op] == c, line
        last = re.findall(r"= (\d+)", item["supporting"][-1])
        assert last and last[-1] == item["answer"]


@pytest.mark.parametrize("args,needle", [
    (["--mix", "hotpotqa:0.5,strategyqa:0.3,gsm8k:0.3"], "sum to 1"),
    (["--mix", "hotpotqa:0.5,chess:0.5"], "unknown task"),
    (["--n", "0"], "--n must be >= 1"),
    (["--tools", "wiki,browser"], "unknown tool"),
    (["--templates-dir", "nowhere"], "templates directory not found"),
])
def test_bad_build_arguments_exit_2_and_write_nothing(ws, args, needle):
    res = run_cli(ws, "data", "build-pool", "--n", "50", *args, "--out", "bad.jsonl")
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert not ws.path("bad.jsonl").exists()
    assert not list(ws.root.glob(".bad.jsonl*"))


def test_make_min_and_shadow_set(ws):
    assert run_cli(ws, "data", "make-min").exit_code == 0
    from rc1.data.io import read_jsonl

    train, ev = read_jsonl(ws.path("data/train_min.jsonl")), read_jsonl(ws.path("data/eval_min.jsonl"))
    assert len(train) >= 100 and len(ev) >= 30
    assert not {it["question"] for it in train} & {it["question"] for it in ev}


def test_shadow_set_is_stratified_and_disjoint_from_pools(small_ws):
    from rc1.data.io import read_jsonl
    from rc1.runtime.fingerprint import sha256_file

    shadow = read_jsonl(small_ws.path("data/shadow_eval_245.jsonl"))
    manifest = json.loads(small_ws.path("reports/rc1/sample_manifest.json").read_text())
    assert len(shadow) == 245 and manifest["sha256"] == sha256_file(small_ws.path("data/shadow_eval_245.jsonl"))
    cells = {(it["task"], it["bucket"]) for it in shadow}
    assert len(cells) == 9  # every task x difficulty stratum is present
    assert abs(sum(manifest["strata"]["hotpotqa"].values()) - 245 * 0.45) <= 2
    pool_ids = {it["id"] for it in read_jsonl(small_ws.path("data/rollouts/rc1_seed.jsonl"))}
    assert not pool_ids & {it["id"] for it in shadow}
