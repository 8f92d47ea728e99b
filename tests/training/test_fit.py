"""The difficulty fit (rc1.training.fit), its round-2 gate, the curriculum sampler, and the reward's
correctness-first grouping."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rc1.training.fit import choose, wilson
from tests.helpers.configs import REPO
from tests.helpers.workspace import make_workspace


def test_wilson_interval_known_values():
    lo, hi = wilson(0, 48)
    assert lo == 0.0 and hi == pytest.approx(0.0741, abs=1e-3)
    lo, hi = wilson(12, 48)
    assert lo == pytest.approx(0.1492, abs=1e-3) and hi == pytest.approx(0.3878, abs=1e-3)  # by hand: centre 0.2685, half-width 0.1193


def row(n, p, majority=0.0):
    from rc1.training.fit import skill

    return {"level": n, "name": f"L{n}", "pass_rate": p, "majority_rate": majority, "skill": skill(p, majority)}


def test_choose_keeps_levels_inside_the_band_and_says_why_a_task_is_dropped():
    band = (0.05, 0.8)
    assert choose([row(0, 0.9), row(1, 0.5), row(2, 0.06), row(3, 0.0)], band) == ([1, 2], None)
    chosen, why = choose([row(0, 0.01), row(1, 0.0)], band)
    assert chosen == [] and why.startswith("too hard") and "level 0" in why
    chosen, why = choose([row(0, 0.95), row(1, 0.9)], band)
    assert chosen == [] and why.startswith("too easy")
    # a yes/no level answered right 40 % of the time is below always-"no" (50 %): no skill to reinforce
    chosen, why = choose([row(0, 0.40, 0.5), row(1, 0.30, 0.5)], band)
    assert chosen == [] and "majority-class baseline of 0.50" in why
    assert choose([row(0, 0.75, 0.5)], band) == ([0], None)  # skill 0.5


def fit_workspace(root: Path, tiny_dir, band=(0.0, 1.0)) -> Path:
    config = make_workspace(root, tiny_dir, extra={
        "difficulty_fit": {"enable": True, "band": list(band), "items_per_level": 4, "samples": 2,
                           "train_per_level": 8, "heldout_per_task": 8, "dev_per_task": 4,
                           "levels": {"gsm8k": [0, 1], "strategyqa": [0, 1]}},
        "datasets": {"mix": {"gsm8k": 0.5, "strategyqa": 0.5}},
        "data": {"max_length": 384, "eval_path": "data/fit/dev.jsonl"},
        "strategy": {"name": "grpo", "num_generations": 2, "prompts_per_step": 2, "max_turns": 1}})
    shutil.copytree(REPO / "templates/pack_v2", root / "templates/pack_v2")
    return config


def run(root, config):
    from rc1.config.load import load_train_config
    from rc1.runtime.workspace import Workspace
    from rc1.training.fit import measure

    ws = Workspace(root)
    cfg = load_train_config(str(config), ws)
    return ws, cfg, measure(ws, cfg)


def gate(ws, cfg, config):
    from rc1.config.load import load_gates_config
    from rc1.gates.base import GateContext
    from rc1.gates.difficulty_fit import evaluate

    return evaluate(GateContext(ws=ws, gates=load_gates_config(cfg.gates, ws), round="round2", config=cfg,
                                config_path=str(config)))


def test_fit_writes_disjoint_item_files_and_the_gate_checks_them(tmp_path, tiny_dir, monkeypatch):
    import rc1.eval.metrics as metrics

    # a random tiny model passes ~nothing: with no majority-class baseline its skill is its pass rate (>= 0)
    monkeypatch.setattr(metrics, "majority_baseline", lambda items: {"overall": {"rate": 0.0}})
    config = fit_workspace(tmp_path, tiny_dir)
    ws, cfg, rep = run(tmp_path, config)
    assert set(rep["tasks"]) == {"gsm8k", "strategyqa"} and rep["kept"] == ["gsm8k", "strategyqa"]
    for task, t in rep["tasks"].items():
        assert [r["level"] for r in t["levels"]] == [0, 1] and t["chosen"] == [0, 1]
        for r in t["levels"]:
            assert r["n"] == 8 and 0 <= r["pass_rate"] <= 1 and r["ci"][0] <= r["pass_rate"] <= r["ci"][1]
    files = {rel: [json.loads(x) for x in ws.path(rel).read_text().splitlines()]
             for rel in ("data/fit/train.jsonl", "data/fit/dev.jsonl", "data/fit/heldout.jsonl")}
    prompts = {rel: {it["messages"][-1]["content"] for it in its} for rel, its in files.items()}
    assert not prompts["data/fit/train.jsonl"] & prompts["data/fit/heldout.jsonl"]
    assert not prompts["data/fit/dev.jsonl"] & prompts["data/fit/heldout.jsonl"]
    assert len(files["data/fit/heldout.jsonl"]) == 16
    assert {it["meta"]["level_n"] for it in files["data/fit/heldout.jsonl"]} == {0, 1}
    assert rep["summary"].startswith("trained and evaluated on gsm8k levels 0 (1 op, bare numbers < 20), 1 ")

    res = gate(ws, cfg, config)
    assert res.passed, [c.detail for c in res.checks if not c.passed]

    # another band: the report is for other settings
    other = yaml.safe_load((tmp_path / config).read_text())
    other["difficulty_fit"]["band"] = [0.1, 0.9]
    (tmp_path / "configs/other.yaml").write_text(yaml.safe_dump(other))
    from rc1.config.load import load_train_config
    cfg2 = load_train_config("configs/other.yaml", ws)
    res = gate(ws, cfg2, "configs/other.yaml")
    assert not res.passed and "fit" in res.checks[-1].detail

    # an item file changed after the fit
    p = ws.path("data/fit/train.jsonl")
    p.write_text(p.read_text().splitlines()[0] + "\n")
    res = gate(ws, cfg, config)
    assert not res.passed and "data/fit/train.jsonl" in res.checks[-2].detail


def test_no_level_in_the_band_refuses_round2_with_the_table_and_the_fix(tmp_path, tiny_dir):
    config = fit_workspace(tmp_path, tiny_dir, band=(0.99, 1.0))  # a random tiny model never passes 99 %
    ws, cfg, rep = run(tmp_path, config)
    assert rep["kept"] == [] and set(rep["dropped"]) == {"gsm8k", "strategyqa"}
    assert not ws.path("data/fit/train.jsonl").exists()
    for t in rep["tasks"].values():  # the walk stops at the first level below the band
        assert t["levels"][0]["n"] == 8 and t["levels"][1].get("not_measured")
    res = gate(ws, cfg, config)
    last = res.checks[-1]
    assert not res.passed and last.name == "tasks with a level in the band" and "difficulty_fit.band" in last.detail
    assert any("gsm8k" in n and "band" not in n for n in res.notes)


def test_a_custom_task_is_fitted_per_item_and_its_items_carry_their_measured_difficulty(tmp_path, tiny_dir,
                                                                                        monkeypatch):
    """No difficulty label and no ladder: the base model's answers to each measured item are its difficulty;
    the held-out items are the task's own held-out split, dev items leave training, and the curriculum
    starts from the measured pass rates."""
    from tests.helpers.tasks import write_task_file
    from rc1.training.fit import measured_bucket
    from rc1.training.sampler import CurriculumSampler

    import rc1.eval.metrics as metrics

    write_task_file(tmp_path / "data/arith.jsonl", 60)
    majority = metrics.majority_baseline
    seen = []
    # a random tiny model passes ~nothing, below the commonest answer's rate: measure that rate, then call it 0
    monkeypatch.setattr(metrics, "majority_baseline", lambda items: (seen.append(majority(items)["overall"]["rate"])
                                                                     or {"overall": {"rate": 0.0}}))
    config = make_workspace(tmp_path, tiny_dir, extra={
        "difficulty_fit": {"enable": True, "band": [0.0, 1.0], "items_per_task": 12, "samples": 2,
                           "heldout_per_task": 10, "dev_per_task": 4},
        "datasets": {"mix": {"arith": 1.0},
                     "tasks": {"arith": {"path": "data/arith.jsonl", "verifier": "numeric", "heldout": 0.25}}},
        "data": {"max_length": 384, "eval_path": "data/fit/dev.jsonl"},
        "strategy": {"name": "grpo", "num_generations": 2, "prompts_per_step": 2, "max_turns": 1}})
    ws, cfg, rep = run(tmp_path, config)
    t = rep["tasks"]["arith"]
    assert rep["kept"] == ["arith"] and t["custom"] and t["chosen"] == [0]
    r = t["levels"][0]
    assert r["items"] == 12 and r["n"] == 24 and len(r["item_pass_rates"]) == 12
    assert sum(r["item_buckets"].values()) == 12
    assert seen and seen[0] > 0  # measured on the task's training items: the commonest answer passes some

    files = {rel: [json.loads(x) for x in ws.path(rel).read_text().splitlines()]
             for rel in ("data/fit/train.jsonl", "data/fit/dev.jsonl", "data/fit/heldout.jsonl")}
    from rc1.data.generic import load_task
    data = load_task(ws, "arith", cfg.datasets.tasks["arith"])
    held_ids = {it["id"] for it in data.heldout}
    train, dev, held = (files[f"data/fit/{n}.jsonl"] for n in ("train", "dev", "heldout"))
    assert len(held) == 10 and {it["id"] for it in held} <= held_ids
    assert len(dev) == 4 and not {it["id"] for it in dev} & {it["id"] for it in train}
    assert not {it["id"] for it in train + dev} & held_ids
    assert len(train) + len(dev) == len(data.train)
    measured = [it for it in train if "fit_pass_rate" in it["meta"]]
    assert len(measured) == 12  # dev items are drawn from the unmeasured ones
    for it in measured:
        assert it["meta"]["difficulty"] == it["bucket"] == measured_bucket(r["item_pass_rates"][it["id"]])
    s = CurriculumSampler.from_config(cfg, train)
    assert s.item_rate == {it["id"]: it["meta"]["fit_pass_rate"] for it in measured}
    assert (measured_bucket(0.0), measured_bucket(0.5), measured_bucket(1.0)) == ("hard", "medium", "easy")

    res = gate(ws, cfg, config)
    assert res.passed, [c.detail for c in res.checks if not c.passed]
    # the task file changed after the fit: the fit is for other data
    p = tmp_path / "data/arith.jsonl"
    p.write_text(p.read_text().replace('"answer": "1', '"answer": "9', 1))
    res = gate(ws, cfg, config)
    assert not res.passed


@pytest.mark.parametrize("fit,problem", [
    ({"band": [0.5, 0.4]}, "0 <= low < high <= 1"),
    ({"band": [-0.1, 0.4]}, "0 <= low < high <= 1"),
    ({"levels": {"gsm8k": [0, 9]}}, "unknown level 9"),
    ({"levels": {"gsm8k": [3, 1]}}, "is empty"),
    ({"levels": {"arith": [0, 1]}}, "not a built-in task"),
])
def test_bad_fit_settings_are_config_errors_with_the_dotted_path(tmp_path, tiny_dir, fit, problem):
    from rc1.config.load import load_train_config
    from rc1.runtime.errors import ConfigError
    from rc1.runtime.workspace import Workspace

    config = make_workspace(tmp_path, tiny_dir, extra={"difficulty_fit": fit})
    with pytest.raises(ConfigError) as exc:
        load_train_config(str(config), Workspace(tmp_path))
    text = "\n".join([str(exc.value), *exc.value.lines])
    assert "difficulty_fit" in text and problem in text


def curriculum_items():
    out = []
    for n in (0, 1, 2):
        for i in range(5):
            out.append({"id": f"g{n}-{i}", "task": "gsm8k", "messages": [], "meta": {"level_n": n}})
    out.append({"id": "s0", "task": "strategyqa", "messages": [], "meta": {"level_n": 0}})
    return out


def sampler(**kw):
    from rc1.training.sampler import CurriculumSampler

    args = dict(window=3, move=0.5, item_low_weight=0.2, seed=1)
    args.update(kw)
    return CurriculumSampler(curriculum_items(), {"gsm8k": 0.5, "strategyqa": 0.5}, (0.1, 0.8),
                             {("gsm8k", 2): 0.25}, **args)


def test_curriculum_moves_weight_up_when_a_level_is_mastered_and_down_when_it_is_out_of_reach():
    s = sampler()
    assert s.level_mix()[("gsm8k", 2)] == pytest.approx(0.25 / 2.25)
    for _ in range(2):
        s.update("g0-0", 1.0)
    assert s.weights[("gsm8k", 0)] == 1.0  # not seen curriculum_window times yet
    s.update("g0-1", 1.0)
    assert s.weights[("gsm8k", 0)] == 0.5 and s.weights[("gsm8k", 1)] == 1.5
    for _ in range(3):
        s.update("g2-0", 0.0)
    assert s.weights[("gsm8k", 2)] == pytest.approx(0.125) and s.weights[("gsm8k", 1)] == pytest.approx(1.625)
    stats = s.stats()
    assert stats["curriculum/moves"] == 2 and stats["curriculum/gsm8k/L0/pass_rate"] == 1.0
    assert sum(v for k, v in stats.items() if k.startswith("curriculum/gsm8k/") and k.endswith("/weight")) == \
        pytest.approx(1.0)
    off = sampler(curriculum=False)
    for _ in range(6):
        off.update("g0-0", 1.0)
    assert off.weights[("gsm8k", 0)] == 1.0


def test_curriculum_item_weights_and_exact_resume():
    s = sampler()
    for i in range(5):
        s.update(f"g0-{i}", 1.0 if i else 0.5)
    s.next_batch(0, 7)
    state = json.loads(json.dumps(s.state_dict()))
    a = [it["id"] for it in s.next_batch(1, 50)]
    t = sampler()
    t.load_state_dict(state)
    assert [it["id"] for it in t.next_batch(1, 50)] == a
    # prime-rl item weights: items whose latest group was all right/all wrong are drawn less
    draws = [it["id"] for it in sampler(seed=3).next_batch(0, 1)]
    assert draws
    u = sampler(seed=5)
    for i in range(1, 5):
        u.update(f"g0-{i}", 1.0)
    u.weights = {k: (1.0 if k == ("gsm8k", 0) else 0.0) for k in u.weights}
    u.task_weights = {"gsm8k": 1.0, "strategyqa": 0.0}
    picks = [it["id"] for it in u.next_batch(0, 2000)]
    assert picks.count("g0-0") / len(picks) == pytest.approx(1 / (1 + 4 * 0.2), abs=0.05)


def test_an_all_wrong_group_gets_no_larger_advantages_than_a_mixed_group():
    import torch

    from rc1.strategies.common import correctness_first
    from rc1.strategies.rl_math import grpo_advantages

    successes = [False, False, False, False, True, False, False, False]
    shaping = [0.30, 0.31, 0.29, 0.30, 0.30, 0.31, 0.29, 0.30]
    rewards = [float(s) + 0.5 * x for s, x in zip(successes, shaping)]
    raw = grpo_advantages(torch.tensor(rewards), 4)
    assert raw[:4].abs().max() > 0.5  # standardised shaping noise: as large as a correctness signal
    adv = grpo_advantages(torch.tensor(correctness_first(rewards, successes, 4)), 4)
    assert adv[:4].abs().max() == 0.0
    assert adv[4] > 1.0 and adv[4:].abs().max() >= adv[:4].abs().max()
    # the shaping still orders wrong answers inside a mixed group
    assert adv[5] > adv[6]


def test_the_rc1_gate_judges_every_kept_task_on_the_fitted_set():
    """One task improves, the other does not: overall the gain is clear, but the per-task check of the
    task that did not improve fails (the fitted set is judged per kept task)."""
    from rc1.config.gates import GatesConfig
    from rc1.eval.metrics import EpisodeRecord, compare, majority_baseline, summarize, versus_baseline
    from rc1.gates.rc1_eval import heldout_checks

    items = [{"id": f"g{i}", "task": "gsm8k", "answer": str(i % 7)} for i in range(60)] + \
            [{"id": f"s{i}", "task": "strategyqa", "answer": "yes" if i % 2 else "no"} for i in range(60)]

    def rec(it, ok):
        return EpisodeRecord(it["id"], it["task"], "easy", False, ok, float(ok), 0, 1, 0, False)
    base = [rec(it, i % 10 == 0) for i, it in enumerate(items)]
    trained = [rec(it, (i % 10 < 7) if it["task"] == "gsm8k" else i % 10 == 0) for i, it in enumerate(items)]
    maj = majority_baseline(items)
    view = {"base": summarize(base), "trained": summarize(trained), "delta": compare(base, trained),
            "vs_majority": versus_baseline(trained, maj["items"]), "majority": maj}
    checks = {c.name: c for c in heldout_checks(GatesConfig().eval, view, per_task=True)}
    assert checks["held-out success delta (pp, CI lower bound)"].passed
    assert checks["gsm8k: held-out success delta (pp, CI lower bound)"].passed
    assert not checks["strategyqa: held-out success delta (pp, CI lower bound)"].passed
    assert not checks["strategyqa: trained success - majority-class baseline (pp, CI lower bound)"].passed
    assert not any(name.startswith("gsm8k:") for name in
                   (c.name for c in heldout_checks(GatesConfig().eval, view, per_task=False)))
