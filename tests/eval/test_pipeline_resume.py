"""`rc1 pipeline` (make run) picks up where it stopped: finished stages whose evidence still verifies are
skipped, changed evidence is redone, training resumes from `latest`, and eval reruns for a new checkpoint."""

from __future__ import annotations

import json

from tests.helpers.eval import write_trainer_checkpoint


def _pipeline(ws, config="configs/local.yaml"):
    from rc1.config.load import load_train_config
    from rc1.pipeline import Pipeline

    return Pipeline(ws, config, load_train_config(config, ws), echo=lambda _: None)


def _stage(pipe, name):
    return next(s for s in pipe.stages() if s.name == name)


def test_stage_order_walks_the_gated_machine_through_the_rc1_gate(ws):
    names = [s.name for s in _pipeline(ws).stages()]
    # local.yaml fits the work to the model before round 1 and trains one seed
    order = ["data: make-min", "scorer: live probe", "data: difficulty fit", "gate: round2 (difficulty fit)",
             "reward: base answers (dev split)",
             "gate: round1", "reward: calibrate", "reward: shadow run", "learning signal", "gate: round2", "train",
             "drift", "gate: training done", "eval", "report", "gate: RC1"]
    assert [n for n in names if n in order] == order
    assert _stage(_pipeline(ws), "gate: RC1").argv == ["advance", "--to", "scale_1000", "--config", "configs/local.yaml"]
    pipe = _pipeline(ws)
    shadow = _stage(pipe, "reward: shadow run")  # reads eval.shadow_run_source (eval_base here) and its n from the config
    assert shadow.argv == ["reward", "shadow-run", "--config", "configs/local.yaml"]
    assert pipe.cfg.eval.shadow_run_source == "eval_base" and pipe.cfg.eval.shadow_run_n is None


def test_finished_data_stage_is_skipped_until_its_evidence_changes(ws):
    pipe = _pipeline(ws)
    make_min = _stage(pipe, "data: make-min")
    assert not make_min.done()
    pipe.run_stage(make_min)  # the real command, as `make run` runs it
    assert make_min.done() and pipe.timings["data: make-min"] > 0
    train = ws.path(pipe.cfg.data.train_path)
    train.write_text(train.read_text().replace('"gsm8k"', '"GSM8K"', 1))  # an edit after the stage ran
    assert not _pipeline(ws).stages()[0].done()


def test_failed_stage_names_its_exit_and_failpack(ws):
    import pytest

    from rc1.pipeline import Stage, StageFailed

    pipe = _pipeline(ws)
    with pytest.raises(StageFailed) as exc:
        pipe.run_stage(Stage("data: validate pool", ["data", "validate-pool", "data/no_such_pool.jsonl"]))
    assert exc.value.exit_code in (2, 3) and "FAIL pack: reports/FAIL_" in str(exc.value)


def test_interrupted_training_resumes_from_latest_and_eval_reruns_for_a_new_checkpoint(tiny_ws):
    from rc1.config.load import load_train_config
    from rc1.eval.harness import run_eval
    from rc1.state import store

    ws = tiny_ws
    pipe = _pipeline(ws, "configs/tiny.yaml")
    store.save_record(ws, store.MachineRecord(state="training"))
    train = _stage(pipe, "train")
    assert "--resume" not in train.argv and not train.done()  # nothing to resume yet

    cfg = load_train_config("configs/tiny.yaml", ws)
    write_trainer_checkpoint(ws, cfg, 4)
    pipe = _pipeline(ws, "configs/tiny.yaml")
    train = _stage(pipe, "train")
    assert train.argv[-2:] == ["--resume", "latest"]

    end = ws.path(cfg.seed_run(0).end_file)
    end.parent.mkdir(parents=True, exist_ok=True)
    end.write_text(json.dumps({"reason": "operator", "step": 4, "seed": cfg.seed_list[0]}))
    assert not _stage(pipe, "train").done()  # stopped by the operator: resumed, not skipped
    end.write_text(json.dumps({"reason": "completed", "step": cfg.run.max_steps, "seed": cfg.seed_list[0]}))
    assert _stage(pipe, "train").done()  # finished: not run again

    store.save_record(ws, store.MachineRecord(state="eval"))
    assert not _stage(pipe, "eval").done()
    run_eval(ws, cfg, checkpoint="latest", n=3, shadow_only=True, batch_size=4)
    assert _stage(pipe, "eval").done()
    write_trainer_checkpoint(ws, cfg, 8, scale=0.9)  # a newer latest (training went on)
    assert not _stage(_pipeline(ws, "configs/tiny.yaml"), "eval").done()


def test_the_drift_stage_is_done_only_for_the_current_latest_checkpoint(tiny_ws):
    from rc1.config.load import load_train_config
    from rc1.eval.drift import drift_report_path
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.fingerprint import register_artifact, sha256_file
    from rc1.state import store

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    store.save_record(ws, store.MachineRecord(state="training"))
    ck = write_trainer_checkpoint(ws, cfg, 4)
    drift = _stage(_pipeline(ws, "configs/tiny.yaml"), "drift")
    assert drift.argv == ["drift", "--config", "configs/tiny.yaml"] and not drift.done()
    path = ws.path(drift_report_path(0))
    atomic_write_json(path, {"checkpoint": {"manifest_sha256": sha256_file(ck / "manifest.json")}})
    assert not drift.done()                       # no sidecar: a half-written report is never taken
    register_artifact(ws, path, "drift")
    assert drift.done()
    write_trainer_checkpoint(ws, cfg, 8, scale=0.9)  # training went on: the report measured an older checkpoint
    assert not drift.done()


def test_ctrl_c_lets_the_running_stage_stop_cleanly_while_its_output_is_read(ws):
    """The trainer answers SIGINT by finishing its step and checkpointing; the pipeline must keep reading its
    output until it exits (it once quit at once, and the trainer died on a broken pipe after its checkpoint)."""
    import io
    import os
    import subprocess
    import sys

    script = ("import signal, sys, time\n"
              "def stop(*_):\n"
              "    time.sleep(0.5)\n"
              "    print('checkpoint written, stopping cleanly', flush=True)\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGINT, stop)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, bufsize=1)
    assert child.stdout.readline().strip() == "ready"
    os.set_blocking(child.stdout.fileno(), False)
    log, tail = io.StringIO(), []
    _pipeline(ws)._stop_child(child, log, tail)
    assert child.returncode == 0 and "checkpoint written, stopping cleanly" in tail
    assert "stage stopped (exit 0)" in log.getvalue()


def test_shadow_run_scores_the_eval_base_pass_and_eval_reuses_it(tiny_ws):
    """--source eval_base: the shadow run generates the eval's greedy base pass once; `rc1 eval` then reads it."""
    from rc1.config.load import load_train_config
    from rc1.eval.harness import run_eval
    from rc1.rewards.shadow import shadow_run

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    rep = shadow_run(ws, cfg, source="eval_base", tag="t")
    assert rep["source"] == "eval_base" and rep["n"] == 9 and rep["n_success"] + rep["n_failure"] == 9
    # the pipeline's `rc1 reward shadow-run --config` passes no --source: the config's eval.shadow_run_source
    by_config = shadow_run(ws, cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"shadow_run_source":
                                                                                       "eval_base"})}), tag="t")
    assert by_config["source"] == "eval_base" and by_config["inputs"]["responses"] == rep["inputs"]["responses"]
    cache = rep["inputs"]["responses"]
    assert cache.startswith("reports/eval_cache/base_") and ws.path(cache + ".sha256").exists()
    write_trainer_checkpoint(ws, cfg, 2)
    _, ev = run_eval(ws, cfg, checkpoint="latest", shadow_only=True, batch_size=4)
    assert ev["throughput"]["base"]["cached"] and ev["throughput"]["base"]["cache"] == cache


def test_every_seed_is_a_training_run_and_eval_waits_for_all_of_them(tiny_ws):
    """`seeds: [a, b, c]`: three train stages, each with its --seed-index, its own checkpoints and end
    record; the eval stage is done only when a report evaluated every seed's latest checkpoint."""
    import yaml

    from rc1.config.load import load_train_config
    from rc1.state import store

    ws = tiny_ws
    doc = yaml.safe_load(ws.path("configs/tiny.yaml").read_text())
    doc["seeds"] = [1, 12, 13]  # run.seed is seeds[0]
    ws.path("configs/tiny3.yaml").write_text(yaml.safe_dump(doc))
    store.save_record(ws, store.MachineRecord(state="training"))
    pipe = _pipeline(ws, "configs/tiny3.yaml")
    trains = [s for s in pipe.stages() if s.name.startswith("train")]
    assert [s.name for s in trains] == ["train (seed 1 of 3)", "train (seed 2 of 3)", "train (seed 3 of 3)"]
    assert [s.argv[s.argv.index("--seed-index") + 1] for s in trains] == ["0", "1", "2"]
    cfg = load_train_config("configs/tiny3.yaml", ws)
    end = ws.path(cfg.seed_run(1).end_file)
    end.parent.mkdir(parents=True, exist_ok=True)
    end.write_text(json.dumps({"reason": "completed", "step": cfg.run.max_steps, "seed": 12}))
    assert [s.done() for s in _pipeline(ws, "configs/tiny3.yaml").stages() if s.name.startswith("train")] == \
        [False, True, False]
    write_trainer_checkpoint(ws, cfg.for_seed(0), 4)
    store.save_record(ws, store.MachineRecord(state="eval"))
    assert not _stage(_pipeline(ws, "configs/tiny3.yaml"), "eval").done()  # seeds 2 and 3 have no checkpoint
