"""The live judge in the reward loop (reward.source hybrid | judge) on a tiny random-weight model and an
in-process fake judge (tests/helpers/fault_server.py): per-step judge figures, faults that checkpoint and
stop, exact resume with the grades replayed from the cache, budgets, a refused key before step 1."""

from __future__ import annotations

import json

import pytest

from rc1.config.load import load_train_config
from rc1.judge.cache import JudgeStore
from rc1.judge.live import JudgeGradeFailed, JudgeUnavailable
from rc1.runtime.checkpoint import read_latest
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe, read_training_end
from tests.helpers.fault_server import USAGE, FaultServer
from tests.helpers.judges import rubric_judge
from tests.helpers.workspace import make_workspace

KEY_ENV = "RC1_TEST_JUDGE_KEY"
EPISODES = 2 * 3  # prompts_per_step x num_generations of make_workspace
K = 3


@pytest.fixture
def judge_server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key")
    srv = FaultServer()
    srv.responder = rubric_judge(spread=1)
    yield srv
    srv.close()


def judge_workspace(root, model_dir, srv, *, source="hybrid", scorer=None, **kw):
    sc = {"provider": "openai", "samples": K, "concurrency": 4, "max_retries": 0, "timeout_s": 5.0,
          "providers": {"openai": {"base_url": srv.base_url, "model": "fake-judge", "api_key_env": KEY_ENV},
                        "local": {"base_url": "auto", "model": "smollm2-135m-instruct"}}}
    sc.update(scorer or {})
    extra = {"reward.source": source, "scorer": sc, **kw.pop("extra", {})}
    return make_workspace(root, model_dir, extra=extra, **kw)


def run(ws, config, *, resume=None):
    cfg = load_train_config(config, ws)
    recipe = make_recipe(ws, cfg, config_path=str(config), resume=resume)
    recipe.setup()
    try:
        recipe.train()
    finally:
        recipe.cleanup()
    return recipe


def records(ws) -> list[dict]:
    return [json.loads(line) for line in ws.metrics_path.read_text().splitlines()]


def weights(ws):
    from safetensors.torch import load_file

    latest = read_latest(ws.path("checkpoints/t"))
    (f,) = [p for p in latest.iterdir() if p.suffix == ".safetensors"]
    return load_file(str(f))


def test_hybrid_run_writes_live_judge_figures_per_step(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=2, save_steps=100)
    recipe = run(ws, conf)
    recs = records(ws)
    assert [r["step"] for r in recs] == [1, 2]
    for r in recs:
        assert r["judge/calls"] == EPISODES * K and r["judge/live"] == EPISODES * K and r["judge/cache"] == 0
        assert r["judge/billable_tokens"] == EPISODES * K * USAGE["total_tokens"]
        assert r["judge/latency_p50_s"] > 0 and r["judge/latency_p95_s"] >= r["judge/latency_p50_s"]
        assert r["judge/seconds"] > 0 and r["judge/n429"] == 0
    assert recs[-1]["judge/billable_tokens_total"] == 2 * EPISODES * K * USAGE["total_tokens"]
    # one rubric prompt per episode sample, asking exactly the rubric dimensions (+1: the preflight call)
    asked = [b for b in judge_server.requests if "<0-10>" in b["messages"][0]["content"]]
    assert len(asked) == 2 * EPISODES * K == len(judge_server.requests) - 1
    assert all("reasoning: <0-10>" in b["messages"][0]["content"] and "format" not in b["messages"][0]["content"]
               for b in asked)
    end = read_training_end(ws, recipe.cfg)
    assert end["reason"] == "completed" and end["judge"]["billable_tokens"] == recs[-1]["judge/billable_tokens_total"]
    assert end["judge"]["dimensions"] == ["reasoning", "grounding", "clarity", "clarification"]


def test_judge_dimensions_come_from_the_judge_and_success_from_the_verifier(tmp_path, judge_server):
    from types import SimpleNamespace

    from rc1.judge.live import TrainingJudge
    from rc1.rewards.reward import RewardModel
    from tests.helpers.items import arithmetic_items
    from tests.helpers.workspace import WEIGHTS

    ws = Workspace(tmp_path)
    ws.ensure()
    (ws.root / "configs").mkdir(exist_ok=True)
    judge_server.responder = rubric_judge(spread=0)
    conf = judge_workspace(ws.root, tmp_path, judge_server, source="judge")
    cfg = load_train_config(conf, ws)
    item = arithmetic_items(1)[0]
    right = SimpleNamespace(item_id=item["id"], task="gsm8k", final_answer=item["answer"], turns=1, tool_hops=0,
                            clarifications=0, truncated=False, model_text=f"ANSWER: {item['answer']}")
    wrong = SimpleNamespace(**{**right.__dict__, "final_answer": "0", "model_text": "ANSWER: 0"})
    with_judge = RewardModel(WEIGHTS, cfg.reward, True, judge=TrainingJudge(ws, cfg))
    a, b = with_judge.score_many([item, item], [right, wrong])
    assert a.success and not b.success and a.total > b.total
    assert a.judge["provenance"] == ["live"] * K and set(a.dims) == set(WEIGHTS)
    rules = RewardModel(WEIGHTS, cfg.reward, True).score(item, right)
    assert a.dims != rules.dims  # every dimension came from the judge, correctness included


def test_judge_down_mid_run_checkpoints_stops_and_resume_equals_uninterrupted(tmp_path, tiny_model_dir,
                                                                             judge_server):
    total = 4
    a, b = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    conf = judge_workspace(a.root, tiny_model_dir, judge_server, max_steps=total, save_steps=100)
    judge_workspace(b.root, tiny_model_dir, judge_server, max_steps=total, save_steps=100)
    run(a, conf)

    # the judge goes away inside step 3, after grading 5 of its samples
    judge_server.requests.clear()
    judge_server.down_after = 1 + 2 * EPISODES * K + 5
    with pytest.raises(JudgeUnavailable, match="retry policy"):
        run(b, conf)
    end = read_training_end(b)
    assert end["reason"] == "judge_unavailable" and end["step"] == 2 and "did not answer" in end["reason_detail"]
    assert read_latest(b.path("checkpoints/t")).name == "step_00002"

    # the judge is back: resume replays step 3, its 5 given grades from the cache
    judge_server.down, judge_server.down_after = False, None
    second = run(b, conf, resume="latest")
    assert second.step == total
    ra, rb = records(a), records(b)
    assert [r["step"] for r in rb] == [1, 2, 3, 4]
    assert rb[2]["judge/cache"] == 5 and rb[2]["judge/live"] == EPISODES * K - 5
    assert [r["loss"] for r in ra] == [r["loss"] for r in rb]
    assert [r["reward"] for r in ra] == [r["reward"] for r in rb]
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys() and all(wa[n].equal(wb[n]) for n in wa)


def test_judge_down_in_the_dev_eval_keeps_the_step_stops_and_resume_equals_uninterrupted(tmp_path, tiny_model_dir,
                                                                                          judge_server):
    """The dev eval after step 2 loses the judge: step 2 is kept and checkpointed, the run stops with the reason,
    and resuming (no dev eval at step 2) trains what an uninterrupted run trains."""
    total = 4
    a, b = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    extra = {"callbacks": ["eval_dev", "logging", "checkpoint"], "run.eval_steps": 2}
    conf = judge_workspace(a.root, tiny_model_dir, judge_server, max_steps=total, save_steps=100, extra=extra)
    judge_workspace(b.root, tiny_model_dir, judge_server, max_steps=total, save_steps=100, extra=extra)
    run(a, conf)
    assert [json.loads(x)["step"] for x in a.path("reports/eval_dev.jsonl").read_text().splitlines()] == [2, 4]

    # the judge goes away inside the dev eval after step 2, after grading 2 of its samples
    judge_server.requests.clear()
    judge_server.down_after = 1 + 2 * EPISODES * K + 2
    with pytest.raises(JudgeUnavailable) as raised:
        run(b, conf)
    assert any("dev eval was not taken" in line for line in raised.value.lines)
    end = read_training_end(b)
    assert end["reason"] == "judge_unavailable" and end["step"] == 2 and "did not answer" in end["reason_detail"]
    assert read_latest(b.path("checkpoints/t")).name == "step_00002"
    assert records(b)[-1]["step"] == 2 and records(b)[-1]["eval/error"] == "judge_unavailable"
    assert not b.path("reports/eval_dev.jsonl").exists()

    judge_server.down, judge_server.down_after = False, None
    second = run(b, conf, resume="latest")
    assert second.step == total
    ra, rb = records(a), records(b)
    assert [r["step"] for r in rb] == [1, 2, 3, 4]
    assert [r["loss"] for r in ra] == [r["loss"] for r in rb]
    assert ra[-1]["eval/success"] == rb[-1]["eval/success"]
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys() and all(wa[n].equal(wb[n]) for n in wa)


def test_unparseable_grade_is_a_fault_never_a_zero_nor_cached(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=2, save_steps=100)
    judge_server.responder = lambda body: "reasoning: 7\ngrounding: 12"  # a dimension missing, one out of range
    with pytest.raises(JudgeGradeFailed, match="no valid grade"):
        run(ws, conf)
    end = read_training_end(ws)
    assert end["reason"] == "judge_grade_failed" and end["step"] == 0
    assert not ws.metrics_path.exists() or not ws.metrics_path.read_text().strip()
    with JudgeStore(ws.path("reports/judge_cache.sqlite")) as store:
        assert store.cache_size() == 0


def test_billable_token_budget_stops_after_the_step_with_the_reason(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    per_step = EPISODES * K * USAGE["total_tokens"]
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=4, save_steps=100,
                           scorer={"max_billable_tokens": per_step + 1})
    recipe = run(ws, conf)
    end = read_training_end(ws, recipe.cfg)
    assert end["reason"] == "judge_budget" and end["step"] == 2
    assert "scorer.max_billable_tokens" in end["reason_detail"]
    assert read_latest(ws.path("checkpoints/t")).name == "step_00002"

    # resuming with the budget spent refuses before a step; a raised budget continues the same run
    with pytest.raises(ConfigError, match="scorer.max_billable_tokens"):
        run(ws, conf, resume="latest")
    assert [r["step"] for r in records(ws)] == [1, 2]
    judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=4, save_steps=100,
                    scorer={"max_billable_tokens": 10 * per_step})
    assert run(ws, conf, resume="latest").step == 4
    assert [r["step"] for r in records(ws)] == [1, 2, 3, 4]
    assert read_training_end(ws)["reason"] == "completed"


def test_cost_budget_uses_the_price_table(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    price = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # 41 tokens -> 0.041 per call
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=4, save_steps=100,
                           scorer={"max_cost": 0.5, "prices": {"openai": price}})
    recipe = run(ws, conf)
    recs = records(ws)
    assert recs[0]["judge/cost"] == pytest.approx(EPISODES * K * 41 * 1000.0 / 1e6)
    end = read_training_end(ws, recipe.cfg)
    assert end["reason"] == "judge_budget" and end["step"] == 1 and "scorer.max_cost" in end["reason_detail"]


def test_refused_key_stops_before_the_first_step_naming_the_variable(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=2)
    judge_server.script = [("401",)]
    with pytest.raises(ConfigError, match=KEY_ENV):
        run(ws, conf)
    assert not ws.metrics_path.exists()
    assert read_latest(ws.path("checkpoints/t")) is None


def test_unstable_grades_are_logged_and_their_advantage_down_weighted(tmp_path, tiny_model_dir, judge_server):
    from tests.helpers.items import arithmetic_items

    ws = Workspace(tmp_path)
    shaky = {it["id"]: it["question"] for it in arithmetic_items(12)[::2]}
    judge_server.responder = rubric_judge(unstable_on=tuple(f"Question: {q}\n" for q in shaky.values()))
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=3, save_steps=100,
                           extra={"reward.unstable_downweight": 0.25, "reward.difficulty_beta": 0.0})
    cfg = load_train_config(conf, ws)
    recipe = make_recipe(ws, cfg, config_path=str(conf))
    recipe.setup()
    seen = []
    plan = recipe.strategy.plan
    recipe.strategy.plan = lambda batch, ro: seen.append(ro) or plan(batch, ro)
    try:
        recipe.train()
    finally:
        recipe.cleanup()
    scales = [(it["id"], s) for ro in seen for it, s in zip(ro.items, ro.advantage_scales)]
    unstable = [s for i, s in scales if i in shaky]
    assert unstable and set(unstable) == {0.25}
    assert {s for i, s in scales if i not in shaky} == {1.0}
    lines = [json.loads(x) for x in ws.path("reports/unstable_samples.jsonl").read_text().splitlines()]
    assert len(lines) == len(unstable) and all(x["variance"] > cfg.reward.unstable_variance for x in lines)
    assert sum(r["judge/unstable"] for r in records(ws)) == len(unstable)


def test_grades_are_requested_concurrently_within_the_bound(tmp_path, tiny_model_dir, judge_server):
    ws = Workspace(tmp_path)
    judge_server.delay = 0.05
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=1, save_steps=100,
                           scorer={"concurrency": 3})
    run(ws, conf)
    assert judge_server.max_inflight == 3
    (rec,) = records(ws)
    # 18 samples x 50 ms, 3 in flight: about 0.3 s of judge time in the step, not 0.9 s
    assert rec["judge/seconds"] < EPISODES * K * 0.05 * 0.8


@pytest.mark.judge
def test_hybrid_with_the_real_local_judge_grades_live_and_says_its_grades_are_plumbing(tmp_path, tiny_model_dir,
                                                                                      caplog):
    """The embedded local judge (llama.cpp + SmolLM2-135M) in the training loop: the rubric prompt with a grammar,
    live calls and per-step figures. Its rubric grades are not discriminative, and the run says so."""
    from rc1.judge.server import start_judge, stop_judge

    ws = Workspace(tmp_path)
    # 2 prompts x 2 answers, 2 samples each: 8 live calls a step (each about a second on a 2-core machine), still
    # several samples per episode and several episodes per step
    episodes, samples = 2 * 2, 2
    conf = make_workspace(ws.root, tiny_model_dir, max_steps=2, save_steps=100, extra={
        "reward.source": "hybrid", "strategy.num_generations": 2,
        "scorer": {"provider": "local", "samples": samples, "concurrency": 2, "timeout_s": 120}})
    start_judge(ws, n_ctx=1024, n_threads=1)  # as tests/rewards/test_local_judge.py: one thread
    try:
        with caplog.at_level("WARNING", logger="rc1.judge.live"):
            recipe = run(ws, conf)
    finally:
        stop_judge(ws)
    recs = records(ws)
    assert [r["judge/live"] for r in recs] == [episodes * samples] * 2 and all(r["judge/seconds"] > 0 for r in recs)
    assert "cannot grade rubric dimensions" in caplog.text
    end = read_training_end(ws, recipe.cfg)
    assert "not a discriminative reward" in end["judge"]["note"]


def test_cli_judge_killed_mid_run_then_rc1_resume_continues(tmp_path, tiny_model_dir, judge_server):
    """As the operator sees it: `rc1 train` stops with the reason and a checkpoint when the judge goes away,
    `rc1 resume` continues once it is back, and assert-live reads the training-time window."""
    from typer.testing import CliRunner

    from rc1.cli.main import app
    from tests.helpers.workspace import to_round2_pass

    ws = Workspace(tmp_path)
    conf = judge_workspace(ws.root, tiny_model_dir, judge_server, max_steps=3, save_steps=100)
    to_round2_pass(ws, conf)

    def cli(*args):
        return CliRunner().invoke(app, ["--workdir", str(ws.root), *args])

    judge_server.down_after = 1 + EPISODES * K + 2
    res = cli("train", "--config", str(conf))
    assert res.exit_code == 1 and "did not answer" in res.output
    assert "training stopped (judge_unavailable) at step 1" in res.output and "rc1 resume" in res.output
    assert read_training_end(ws)["reason"] == "judge_unavailable"
    assert read_latest(ws.path("checkpoints/t")).name == "step_00001"
    judge_server.down, judge_server.down_after = False, None
    res = cli("resume", "--config", str(conf))
    assert res.exit_code == 0, res.output
    assert read_training_end(ws)["reason"] == "completed" and [r["step"] for r in records(ws)] == [1, 2, 3]
    res = cli("reward", "assert-live", "--cache-hit-lt", "0.10", "-c", str(conf))
    assert res.exit_code == 0 and "training scoring" in res.output, res.output


def test_a_bad_rubric_reply_is_asked_again_and_billed(tmp_path, judge_server):
    from rc1.judge.live import TrainingJudge
    from tests.helpers.items import arithmetic_items
    from types import SimpleNamespace

    ws = Workspace(tmp_path)
    conf = judge_workspace(ws.root, tmp_path, judge_server, scorer={"samples": 1, "max_retries": 2})
    cfg = load_train_config(conf, ws)
    judge = TrainingJudge(ws, cfg)
    judge_server.script = [("ok", "reasoning: 7"), ("ok", "grounding: 99"), ("ok", "")]  # 3 tries, none graded
    item = arithmetic_items(1)[0]
    ep = SimpleNamespace(model_text="ANSWER: 5", clarifications=0)
    with pytest.raises(JudgeGradeFailed, match="empty reply"):
        judge.grade([item], [ep])
    figures = judge.step_figures()
    assert figures["judge/failed"] == 1 and figures["judge/billable_tokens"] == 3 * USAGE["total_tokens"]
    judge_server.script = [("ok", "clarity: 5")]  # one bad reply, then the judge answers properly
    (sc,) = judge.grade([item], [ep])
    assert sc.ok and set(sc.dims) == set(judge.dims) and sc.samples[0].prompt_tokens == 2 * USAGE["prompt_tokens"]
