"""`rc1 train --nproc 2` for real: two gloo ranks on the CPU, started by rc1's launcher through Accelerate.

- N processes compute what 1 process with the same run.gradient_accumulation computes (GRPO with redraws of
  zero-signal groups and the priority sampler's feedback; PPO with a value head, LoRA and 2 epochs);
  metrics.jsonl is written once, with global figures.
- `rc1 stop` stops every rank at the same optimizer step; the run resumes on ONE process and ends where
  the uninterrupted run ends.
- kill -9 of one rank: the other exits within a bounded time, the launcher writes one ERROR report naming
  the killed rank (with the traceback of the rank that lost it), the last checkpoint verifies and
  `rc1 resume --nproc 2` continues from it.
- A rank crashing on a malformed item: the ERROR report carries that rank's traceback; no half-written
  checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from rc1.runtime import trainer_proc
from rc1.runtime.checkpoint import TMP_PREFIX, read_latest, read_meta, verify_checkpoint
from rc1.runtime.workspace import Workspace
from rc1.training.base import read_training_end
from tests.helpers.distributed import final_weights, max_abs_diff, metrics, rc1, run_in_process, wait_for
from tests.helpers.workspace import make_workspace, to_round2_pass

TOLERANCE = 1e-5  # the all-reduce sums gradients in another order than one process does


def _pair(tmp_path, model, **opts):
    one, two = Workspace(tmp_path / "one"), Workspace(tmp_path / "two")
    conf = make_workspace(one.root, model, **opts)
    make_workspace(two.root, model, **opts)
    to_round2_pass(two, conf)
    return one, two, conf


def _error_reports(ws) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(ws.reports.glob("ERROR_*.json"))]


@pytest.mark.parametrize("opts", [
    dict(strategy="grpo", method="full", grad_accum=4, max_steps=8, extra={"strategy.resample_zero_signal": 1}),
    dict(strategy="ppo", method="lora", grad_accum=2, max_steps=4, extra={"strategy.ppo_epochs": 2}),
], ids=["grpo-accum4-redraws", "ppo-lora-2epochs"])
def test_two_processes_train_what_one_process_with_their_accumulation_trains(tmp_path, tiny_model_dir, opts):
    one, two, conf = _pair(tmp_path, tiny_model_dir, save_steps=100, **opts)
    run_in_process(one, conf)
    res = rc1(two, "train", "--config", conf, "--nproc", "2", check=True)
    assert "training completed at step" in res.stdout

    diff = max_abs_diff(final_weights(one), final_weights(two))
    assert diff <= TOLERANCE, f"2 processes differ from 1 process with the same accumulation by {diff}"
    single, lines = metrics(one), metrics(two)
    assert [r["step"] for r in lines] == list(range(2, opts["max_steps"] + 1, 2))  # one line per iteration, once
    assert all(r["world_size"] == 2 and [x["rank"] for x in r["ranks"]] == [0, 1] for r in lines)
    for merged, (a, b) in zip(lines, zip(single[::2], single[1::2])):
        assert merged["reward"] == pytest.approx((a["reward"] + b["reward"]) / 2, abs=1e-9)  # global figures
    assert merged["optimizer_updates"] == single[-1]["optimizer_updates"]
    assert len(read_training_end(two)["kl"]) and read_training_end(two)["world_size"] == 2
    assert (two.logs / "train.rank1.log").exists() and not _error_reports(two)
    manifest = [json.loads(x) for x in two.path("reports/ckpt_manifest.jsonl").read_text().splitlines()]
    assert [m["step"] for m in manifest] == [opts["max_steps"]]  # rank 0 wrote the checkpoint, once


def test_stop_ends_every_rank_at_one_optimizer_step_and_the_run_resumes_on_one_process(tmp_path, tiny_model_dir):
    one, two, conf = _pair(tmp_path, tiny_model_dir, grad_accum=4, max_steps=24, save_steps=100)
    run_in_process(one, conf)
    pid = trainer_proc.start_trainer(two, str(conf), extra_args=["--nproc", "2"])
    wait_for(lambda: two.metrics_path.exists() and metrics(two), 180, "the first metrics line")
    assert trainer_proc.stop_trainer(two, timeout=180)  # what `rc1 stop` does: SIGTERM to the launcher
    assert not trainer_proc.pid_alive(pid)

    end = read_training_end(two)
    assert end["reason"] == "operator" and end["step"] % 4 == 0 and end["step"] < 24, end
    latest = read_latest(two.path("checkpoints/t"))
    assert read_meta(latest)["step"] == end["step"] and read_meta(latest)["world_size"] == 2
    stops = [line for f in ("train.log", "train.rank1.log") for line in (two.logs / f).read_text().splitlines()
             if "stop requested (operator)" in line]
    assert len({line.split("finishing step")[1] for line in stops}) == 1  # both ranks stopped at the same step

    rc1(two, "resume", "--config", conf, "--nproc", "1", check=True)  # another world size: the same computation
    assert max_abs_diff(final_weights(one), final_weights(two)) <= TOLERANCE
    assert [r["step"] for r in metrics(two)][-1] == 24


def test_kill_9_of_one_rank_fails_the_run_cleanly_and_resume_continues(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=400, save_steps=2)
    to_round2_pass(ws, conf)
    launcher_pid = trainer_proc.start_trainer(ws, str(conf), extra_args=["--nproc", "2"])
    doc = wait_for(lambda: (d := trainer_proc.read_pid_file(ws)) and len(d.get("ranks", [])) == 2 and d, 180,
                   "the ranks in the pid file")
    wait_for(lambda: read_latest(ws.path("checkpoints/t")), 180, "a first checkpoint")
    rank1 = next(r["pid"] for r in doc["ranks"] if r["rank"] == 1)
    os.kill(rank1, signal.SIGKILL)
    t0 = time.monotonic()
    wait_for(lambda: not trainer_proc.pid_alive(launcher_pid), 120, "the launcher to exit")
    assert time.monotonic() - t0 < 120
    assert not any(trainer_proc.pid_alive(r["pid"]) for r in doc["ranks"])
    assert trainer_proc.read_pid_file(ws) is None

    (report,) = _error_reports(ws)
    assert report["error"].startswith("rank 1 killed by SIGKILL")
    assert report["traceback_of_rank"] == 0 and "File " in report["traceback"]  # where rank 0 lost rank 1
    assert {r["rank"]: r["signal"] for r in report["ranks"]}.get(1) == "SIGKILL"

    latest = read_latest(ws.path("checkpoints/t"))
    verify_checkpoint(latest)
    step = read_meta(latest)["step"]
    rc1(ws, "resume", "--config", conf, "--nproc", "2", "--max-steps", step + 4, check=True)
    assert read_meta(read_latest(ws.path("checkpoints/t")))["step"] == step + 4
    assert [r["step"] for r in metrics(ws)][-2:] == [step + 2, step + 4]
    assert not [p for p in ws.path("checkpoints/t").iterdir() if p.name.startswith(TMP_PREFIX)]


def _first_draw_of(item_id: str, items: list[dict], seed: int, per_step: int, limit: int = 64) -> int | None:
    from rc1.training.sampler import PrioritySampler

    sampler = PrioritySampler([], items, {}, 0.3, [(0, 0.5)], seed=seed, enable=False)
    return next((s for s in range(limit) if item_id in [it["id"] for it in sampler.next_batch(s, per_step)]), None)


def test_a_rank_crashing_on_a_malformed_item_leaves_its_traceback_and_no_half_checkpoint(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=40, save_steps=2,
                          extra={"priority_sampling.enable": False})
    items = [json.loads(x) for x in ws.path("data/train_min.jsonl").read_text().splitlines()]
    bad = {**items[0], "id": "broken", "messages": [{"role": "user", "content": None}]}  # a row without its text
    items.append(bad)
    ws.path("data/train_min.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    # a run seed whose first draw of the broken row falls on rank 1 (odd micro-step), after the first checkpoint
    seed = next(s for s in range(1, 500) if (k := _first_draw_of("broken", items, s, 2)) is not None
                and k >= 4 and k % 2 == 1)
    cfg = ws.path(conf).read_text().replace("seed: 7", f"seed: {seed}")
    ws.path(conf).write_text(cfg)
    to_round2_pass(ws, conf)

    res = rc1(ws, "train", "--config", conf, "--nproc", "2")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "FATAL: rank 1 failed" in res.stderr
    (report,) = _error_reports(ws)
    assert report["error"].startswith("rank 1 failed") and report["traceback_of_rank"] == 1
    assert "rollout" in report["traceback"] and "content" in report["traceback"]
    assert {r["rank"] for r in report["ranks"]} <= {0, 1}
    latest = read_latest(ws.path("checkpoints/t"))
    verify_checkpoint(latest)
    assert not [p for p in ws.path("checkpoints/t").iterdir() if p.name.startswith(TMP_PREFIX)]


def test_the_trl_engine_trains_on_two_ranks_and_rank_0_publishes_each_checkpoint_once(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, engine="trl", grad_accum=2, max_steps=4, save_steps=2)
    to_round2_pass(ws, conf)
    rc1(ws, "train", "--config", conf, "--nproc", "2", check=True)
    lines = metrics(ws)
    assert [r["step"] for r in lines] == [1, 2, 3, 4] and all(r["reward"] is not None for r in lines)
    manifest = [json.loads(x) for x in ws.path("reports/ckpt_manifest.jsonl").read_text().splitlines()]
    assert [m["step"] for m in manifest] == [2, 4]
    latest = read_latest(ws.path("checkpoints/t"))
    verify_checkpoint(latest)
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in latest.iterdir()}  # both ranks' RNG
    assert read_training_end(ws)["world_size"] == 2


def test_a_one_process_checkpoint_inside_an_accumulation_window_is_refused_on_two_ranks(tmp_path, tiny_model_dir):
    from rc1.gates.base import Check, GateResult
    from rc1.machine.service import open_machine

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=4, save_steps=100)
    to_round2_pass(ws, conf)
    recipe = run_in_process(ws, conf, max_steps=1)  # one micro-step of a 2-micro-step window: pending gradients
    assert recipe.accum_position == 1 and read_meta(read_latest(ws.path("checkpoints/t")))["step"] == 1
    passing = lambda gate: [GateResult(gate, [Check("t", 1, ">= 1", True)])]  # noqa: E731
    assert open_machine(ws, str(conf), gate_runner=passing).fire("start_training")
    res = rc1(ws, "resume", "--config", conf, "--nproc", "2")
    assert res.returncode == 2, res.stderr[-3000:]
    assert "inside an accumulation window (1 of 2 micro-steps, by one process); resume it with one process" in res.stderr
    assert not _error_reports(ws)  # a refusal, not a crash
