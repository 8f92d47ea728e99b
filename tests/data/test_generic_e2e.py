"""A custom task end to end through the public CLI: a task file judged by the `numeric` verifier becomes a
pool, a held-out shadow set and a balanced pool; the round 1 / round 2 gates pass on it; the trainer trains
on it and `rc1 eval` evaluates it. And a verifier that raises stops eval and calibration, naming the item."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.data.generic import read_task_file
from rc1.runtime.workspace import Workspace
from tests.helpers.configs import REPO
from tests.helpers.tasks import ARITH_CONFIG, custom_gates_yaml, write_task_file

# Gate areas judged on a live judge and a base model that solves held-out items, neither of which a
# random-weight test model has; tests/rewards covers them (test_probe_cli, test_shadow_calibrate).
# Every data, config and reward area runs for real.
NOT_HERE = {"scorer": "needs a live judge probe", "shadow_run": "needs a base model that solves shadow items",
            "learning_signal": "needs a base model that solves training items (tests/training/test_learning_signal.py)"}


def rc1(ws, *args):
    res = CliRunner().invoke(app, ["--workdir", str(ws.root), *args])
    return res


def make_workspace(root, verifier: str = "numeric") -> Workspace:
    ws = Workspace(root)
    write_task_file(ws.path("data/arith.jsonl"), 84)
    # the dev split: other problems, other ids (the base model answers it for the difficulty gate)
    raw = write_task_file(root / "arith_dev_task.jsonl", 12, seed=11)
    raw.write_text(raw.read_text().replace('"id": "arith-', '"id": "dev-arith-'))
    dev = read_task_file(raw, task="arith", verifier=verifier)
    ws.path("data/arith_eval.jsonl").write_text("".join(json.dumps(it) + "\n" for it in dev))
    ws.path("configs").mkdir(parents=True)
    ws.path("configs/arith.yaml").write_text(ARITH_CONFIG.format(steps=20, n=60, shadow_n=12, verifier=verifier))
    # 84 generated word problems from nine frames: less lexical variety than a real dataset (distinct-2 ~0.5)
    ws.path("configs/gates_arith.yaml").write_text(custom_gates_yaml(
        {"arith": 1.0}, {"pool": {"min_items": 50, "len_min": 16, "distinct2_min": 0.45}}))
    ws.path("configs/weights.json").write_text((REPO / "configs/weights.json").read_text())
    return ws


def build_data(ws) -> None:
    c = ["--config", "configs/arith.yaml"]
    tiny = ["--base", "random:qwen3-tiny"]
    for args in (["data", "build-pool", *c, "--n", "60", "--out", "data/rollouts/arith.jsonl"],
                 ["data", "shadow-set", *c, "--out", "data/arith_shadow.jsonl", *tiny],
                 ["data", "difficulty", "metrics", "--in", "data/rollouts/arith.jsonl",
                  "--out", "data/rollouts/arith.metrics.jsonl", *tiny],
                 ["data", "difficulty", "bucketize", "--metrics", "data/rollouts/arith.metrics.jsonl",
                  "--out", "data/rollouts/arith.balanced.jsonl", "--mix", "arith:1.0"],
                 ["data", "difficulty", "validate", *c, "--metrics", "data/rollouts/arith.metrics.jsonl",
                  "--balanced", "data/rollouts/arith.balanced.jsonl"],
                 ["data", "validate-pool", "data/rollouts/arith.jsonl", *c, "--shadow", "data/arith_shadow.jsonl",
                  *tiny],
                 # the base model answers the dev split: the difficulty gate checks the buckets against these
                 ["reward", "base-answers", *c, "--generations", "1"]):
        res = rc1(ws, *args)
        assert res.exit_code == 0, (args, res.output)


def gate_runner(ws, config: str, seen: dict):
    """The real gate areas (NOT_HERE ones stand in, saying so); every result is kept in `seen`."""
    from rc1.gates.base import Check, GateResult
    from rc1.gates.registry import GATES, run_area
    from rc1.machine.service import load_for_gates, make_context

    loaded = load_for_gates(ws, config)

    def run(gate):
        ctx = make_context(ws, loaded, gate)
        out = [run_area(a, ctx) if a not in NOT_HERE else
               GateResult(a, [Check(a, None, "covered in tests/rewards", True, NOT_HERE[a])]) for a in GATES[gate]]
        seen[gate] = {r.gate: r for r in out}
        return out
    return run


def test_a_numeric_custom_task_passes_the_gates_trains_and_evaluates(tmp_path):
    from rc1.machine.service import advance, current_state, open_machine

    ws = make_workspace(tmp_path)
    assert rc1(ws, "config", "verify", "--config", "configs/arith.yaml").exit_code == 0
    build_data(ws)
    shadow = [json.loads(x) for x in ws.path("data/arith_shadow.jsonl").read_text().splitlines()]
    pool_ids = {json.loads(x)["id"] for x in ws.path("data/rollouts/arith.jsonl").read_text().splitlines()}
    assert len(shadow) == 12 and pool_ids.isdisjoint(it["id"] for it in shadow)

    seen: dict = {}
    for target in ("round1", "round2"):
        out = advance(ws, target, "configs/arith.yaml",
                      machine=open_machine(ws, "configs/arith.yaml", gate_runner=gate_runner(ws, "configs/arith.yaml", seen)))
        failing = [(r.gate, c.name, c.detail) for _, rs in out.gates for r in rs for c in r.failing]
        assert out.reached, failing
    assert current_state(ws) == "round2_pass"
    r2 = seen["round2"]
    assert all(r2[a].passed for a in ("run_config", "pool", "difficulty", "reward_weights", "overclar_penalty"))
    na = {(a, c.name) for a in ("pool", "difficulty") for c in r2[a].checks if c.status == "not applicable"}
    assert {("pool", "roles covered"), ("pool", "3-gram KL vs v1 beyond split-half baseline"), ("difficulty", "max tool_hops"),
            ("difficulty", "clue_overlap median (hard)")} <= na
    assert all(c.detail.startswith("not applicable: ") for a in ("pool", "difficulty") for c in r2[a].checks
               if c.status == "not applicable")
    assert {c.name: c.status for c in r2["pool"].checks}["task mix max deviation (pp)"] == "pass"
    task_check = next(c for c in r2["run_config"].checks if c.name == "task arith: files and verifier")
    assert task_check.passed and "data/arith.jsonl" in {e.path for e in r2["run_config"].evidence}

    res = rc1(ws, "train", "--config", "configs/arith.yaml", "--max-steps", "2")
    assert res.exit_code == 0, res.output
    steps = [json.loads(x) for x in ws.metrics_path.read_text().splitlines() if x.strip()]
    assert [s["step"] for s in steps if "loss" in s][-1] == 2

    res = rc1(ws, "eval", "--config", "configs/arith.yaml", "--shadow-only", "--batch-size", "12")
    assert res.exit_code == 0, res.output
    from rc1.eval.harness import run_view

    report = json.loads(sorted(ws.reports.glob("eval_*.json"))[-1].read_text())
    held = run_view(report, report["runs"][0], "shadow")
    assert held["base"]["n"] == 12 and held["trained"]["n"] == 12 and list(held["base"]["by_task"]) == ["arith"]
    assert list(held["delta"]["by_task"]) == ["arith"] and held["delta"]["n_paired"] == 12
    assert list(held["majority"]["by_task"]) == ["arith"] and list(held["mde"]["by_task"]) == ["arith"]
    assert {r["item_id"] for r in report["records"]["runs"][0]["shadow"]} == {it["id"] for it in shadow}


RAISES_ON_ONE = """\
def check(prediction, gold, aliases):
    if gold == "{gold}":
        raise ValueError("cannot read units")
    return prediction is not None and prediction.strip() == gold
"""


def answer_every_item(model, tokenizer, items, *, num_generations=1, **_):
    """Stands in for the model in rollouts: every episode answers its item's gold answer in one turn (a random-weight
    model's episodes are truncated, and a truncated episode fails before any verifier is asked)."""
    from rc1.envs.episode import Episode

    return [Episode(item_id=it["id"], task=it["task"], final_answer=it["answer"], turns=1, tool_hops=0,
                    clarifications=0, truncated=False, model_text=f"ANSWER: {it['answer']}")
            for it in items for _ in range(num_generations)]


def test_a_verifier_that_raises_stops_eval_and_calibration_naming_the_item(tmp_path, monkeypatch):
    from rc1.envs import rollout

    monkeypatch.setattr(rollout, "generate_episodes", answer_every_item)
    # every stage samples through the torch backend here, so the scripted answers above are what it gets
    monkeypatch.setattr("rc1.generation.choose_backend", lambda *args, **kwargs: "torch")
    ws = make_workspace(tmp_path, verifier="python:arith_check:check")
    ws.path("arith_check.py").write_text(RAISES_ON_ONE.format(gold="__none__"))
    c = ["--config", "configs/arith.yaml"]
    for args in (["data", "build-pool", *c, "--n", "60", "--out", "data/rollouts/arith.jsonl"],
                 ["data", "shadow-set", *c, "--out", "data/arith_shadow.jsonl"]):
        assert rc1(ws, *args).exit_code == 0
    shadow = [json.loads(x) for x in ws.path("data/arith_shadow.jsonl").read_text().splitlines()]
    assert {it["verifier"] for it in shadow} == {"python:arith_check:check"}
    # the module now raises on one shadow item's answer (one no other shadow item shares)
    victim = next(it for it in shadow if sum(x["answer"] == it["answer"] for x in shadow) == 1)
    ws.path("arith_check.py").write_text(RAISES_ON_ONE.format(gold=victim["answer"]))

    res = rc1(ws, "eval", *c, "--shadow-only", "--base-only", "--batch-size", "12")
    assert res.exit_code == 1, res.output
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert errors == [f"error: verifier python:arith_check:check failed on item {victim['id']}: "
                      "ValueError: cannot read units"], res.output
    assert "Traceback" not in res.output and not list(ws.reports.glob("ERROR_*.json"))

    res = rc1(ws, "reward", "calibrate", *c, "--items", "data/arith_shadow.jsonl", "--n", "12", "--bootstrap", "5",
              "--max-turns", "1")
    assert res.exit_code == 1, res.output
    assert f"failed on item {victim['id']}: ValueError: cannot read units" in res.output
    assert "Traceback" not in res.output
