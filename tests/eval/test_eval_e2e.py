"""`rc1 eval` end to end on the tiny random Qwen3 (and one short run on the embedded SmolLM2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.runtime.fingerprint import verify_artifact
from tests.helpers.eval import TINY_CONFIG, make_items, write_end_record, write_jsonl, write_trainer_checkpoint


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args])


def test_eval_base_and_checkpoint_then_cached_base_and_report(tiny_ws):
    from rc1.config.load import load_train_config
    from rc1.eval.harness import run_view

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    ck = write_trainer_checkpoint(ws, cfg, 10, scale=1.05)
    write_end_record(ws, "reports/state/training_end.json", ck, train_dtype="bf16")
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--batch-size", "12")
    assert r.exit_code == 0, r.output
    reports = sorted(ws.reports.glob("eval_*.json"))
    assert len(reports) == 1 and verify_artifact(ws, reports[0])
    rep = json.loads(reports[0].read_text())
    assert rep["sets"]["shadow"]["n"] == 9 and rep["sets"]["dev"]["n"] == 3 and rep["dev_set"] == "dev"
    (run,) = rep["runs"]
    held = run_view(rep, run, "shadow")
    assert held["base"]["n"] == 9 and held["trained"]["n"] == 9 and held["delta"]["n_paired"] == 9
    assert run["checkpoint"]["path"] == rep["checkpoint"]["path"] == "checkpoints/evt/step_00010"
    assert run["training"]["reason"] == "completed" and run["training"]["stopped_early"] is False
    # best/ is chosen on the dev split's result, never the held-out one
    assert run["metric"] == {"name": "success", "split": "dev",
                             "value": run["results"]["dev"]["trained"]["success"]["rate"]}
    assert run["best"]["updated"] and run["best"]["selection"]["split"] == "dev"
    assert ws.path("checkpoints/evt/best/step_00010/manifest.json").exists()
    # dtypes: auto is fp32 on a CPU, whatever the CPU supports; the training dtype comes from the end record
    assert rep["dtype"]["eval"] == "fp32" and rep["generation"]["dtype"] == "float32" and rep["dtype"]["train"] == ["bf16"]
    assert held["majority"]["overall"]["n"] == 9 and held["mde"]["overall"]["n"] == 9
    assert "non_truncated" in held["base"] and held["vs_majority"]["success"]["n"] == 9
    assert not rep["throughput"]["base"]["cached"] and rep["throughput"]["runs"][0]["episodes_per_s"] > 0
    assert len(rep["records"]["base"]["shadow"]) == 9 and len(rep["records"]["runs"][0]["dev"]) == 3
    assert "held-out" in r.output and "majority-class baseline" in r.output and "eval dtype fp32" in r.output

    # a second eval (new checkpoint) reuses the base model's episodes of both sets: same records, no regeneration
    write_trainer_checkpoint(ws, cfg, 20, scale=0.95)
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--batch-size", "12")
    assert r.exit_code == 0, r.output
    rep2 = json.loads(sorted(ws.reports.glob("eval_*.json"))[-1].read_text())
    assert rep2["throughput"]["base"]["cached"] and rep2["throughput"]["base"]["cached_sets"] == ["dev", "shadow"]
    assert rep2["records"]["base"] == rep["records"]["base"] and rep2["checkpoint"]["step"] == 20

    # the report reads that eval; the RC1 gate judges it (the random model cannot pass, and says why)
    r = rc1(ws, "report", "--config", "configs/tiny.yaml")
    assert r.exit_code == 0, r.output
    md = ws.path("reports/rc1/rc1_report.md").read_text()
    assert "checkpoints/evt/step_00020" in md and "Held-out success" in md and "majority answer" in md


def test_eval_on_a_users_own_item_file_is_reported_beside_base_and_majority_and_judged_by_no_gate(tiny_ws):
    """`rc1 eval --items FILE`: base and trained on that file only (items rc1 never generated), paired delta and
    majority-class baseline, a verified report under reports/eval_items/; no eval report the gates read, best/
    untouched. A missing or malformed file, or options of the held-out set beside it, is one line and exit 2."""
    from rc1.config.load import load_train_config

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    write_trainer_checkpoint(ws, cfg, 10, scale=1.05)
    write_jsonl(ws.path("mine/test.jsonl"), make_items(5, seed=31))
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--items", "mine/test.jsonl", "--batch-size", "5")
    assert r.exit_code == 0, r.output
    (path,) = ws.path("reports/eval_items").glob("test_*.json")
    assert verify_artifact(ws, path)
    rep = json.loads(path.read_text())
    assert rep["kind"] == "eval_items" and rep["set"]["path"] == "mine/test.jsonl" and rep["set"]["n"] == 5
    (run,) = rep["runs"]
    assert run["checkpoint"]["path"] == "checkpoints/evt/step_00010" and run["delta"]["n_paired"] == 5
    assert len(run["records"]) == len(rep["base_records"]) == 5 and rep["majority"]["overall"]["n"] == 5
    assert "delta vs base" in r.output and "not judged by any gate" in r.output
    assert not list(ws.reports.glob("eval_*.json")) and not ws.path("checkpoints/evt/best").exists()
    # the same file again (the base answers from the cache): a second report, the first kept
    assert rc1(ws, "eval", "--config", "configs/tiny.yaml", "--items", "mine/test.jsonl", "--base-only").exit_code == 0
    assert len(list(ws.path("reports/eval_items").glob("test_*.json"))) == 2

    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--items", "mine/none.jsonl")
    assert r.exit_code == 2 and "--items mine/none.jsonl: no such file" in r.output
    ws.path("mine/bad.jsonl").write_text('{"id": "x", "task": "gsm8k"}\n')
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--items", "mine/bad.jsonl")
    assert r.exit_code == 2 and "mine/bad.jsonl" in r.output
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--items", "mine/test.jsonl", "--n", "3")
    assert r.exit_code == 2 and "--items evaluates that file whole" in r.output


def test_every_seed_run_is_evaluated_against_one_base_pass(tiny_ws):
    """Production trains one run per seed: eval judges each run's latest checkpoint, reports the spread, and
    generates the base model's episodes once."""
    from rc1.config.load import load_train_config

    ws = tiny_ws
    ws.path("configs/tiny.yaml").write_text(ws.path("configs/tiny.yaml").read_text() + "seeds: [1, 2]\n")
    cfg = load_train_config("configs/tiny.yaml", ws)
    for i, scale in ((0, 1.05), (1, 0.95)):
        sr = cfg.seed_run(i)
        ck = write_trainer_checkpoint(ws, cfg, 4, scale=scale, run_dir=sr.checkpoint_dir)
        write_end_record(ws, sr.end_file, ck, reason="completed" if i == 0 else "operator", train_dtype=None)
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--batch-size", "12", "--shadow-only")
    assert r.exit_code == 0, r.output
    rep = json.loads(sorted(ws.reports.glob("eval_*.json"))[-1].read_text())
    assert [x["checkpoint"]["path"] for x in rep["runs"]] == ["checkpoints/evt/seed0/step_00004",
                                                               "checkpoints/evt/seed1/step_00004"]
    assert [x["training"]["stopped_early"] for x in rep["runs"]] == [False, True]
    assert rep["dtype"]["train"] == ["unknown"] and rep["checkpoint"] is None
    assert rep["throughput"]["base"]["generated"]["episodes"] == 9  # one base pass for both seeds
    sp = rep["spread"]["shadow"]
    assert [p["seed_index"] for p in sp["per_seed"]] == [0, 1] and sp["delta_pp"]["n"] == 2
    assert sp["delta_pp"]["min"] <= sp["delta_pp"]["mean"] <= sp["delta_pp"]["max"]
    assert "STOPPED EARLY" in r.output and "across 2 seeds" in r.output
    r = rc1(ws, "report", "--config", "configs/tiny.yaml")
    md = ws.path("reports/rc1/rc1_report.md").read_text()
    assert "### Spread across seeds on the shadow set" in md and "| 1 (2) |" in md
    # --seed-index picks one run
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--shadow-only", "--seed-index", "1")
    assert r.exit_code == 0, r.output
    rep = json.loads(sorted(ws.reports.glob("eval_*.json"))[-1].read_text())
    assert [x["seed_index"] for x in rep["runs"]] == [1] and rep["throughput"]["base"]["cached"]


def test_the_dev_split_may_not_be_the_held_out_set(tiny_ws):
    ws = tiny_ws
    cfg_text = ws.path("configs/tiny.yaml").read_text()
    ws.path("configs/tiny.yaml").write_text(cfg_text.replace("eval_path: data/eval_min.jsonl",
                                                             "eval_path: data/shadow.jsonl"))
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--base-only")
    assert r.exit_code == 2 and "is the held-out set" in r.output
    # a dev file that merely contains some held-out items is refused too
    shadow = [json.loads(x) for x in ws.path("data/shadow.jsonl").read_text().splitlines()]
    write_jsonl(ws.path("data/eval_min.jsonl"), make_items(3, seed=12) + shadow[:1])
    ws.path("configs/tiny.yaml").write_text(cfg_text)
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--base-only")
    assert r.exit_code == 2 and "shares 1 item(s) with the held-out set" in r.output


def test_eval_refuses_a_corrupt_checkpoint(tiny_ws):
    from rc1.config.load import load_train_config

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    ck = write_trainer_checkpoint(ws, cfg, 10)
    with open(ck / "model.safetensors", "r+b") as fh:
        fh.seek(200)
        fh.write(b"\x00\x01\x02")
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml")
    assert r.exit_code == 2 and "corrupt" in r.output
    assert not list(ws.reports.glob("eval_*.json"))


def test_eval_without_checkpoint_or_shadow_set_is_a_clear_error(tiny_ws):
    ws = tiny_ws
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml")
    assert r.exit_code == 2 and "no `latest` checkpoint" in r.output
    ws.path("data/shadow.jsonl").unlink()
    r = rc1(ws, "eval", "--config", "configs/tiny.yaml", "--base-only")
    assert r.exit_code == 2 and "data.shadow_path" in r.output


@pytest.mark.real_model
def test_eval_base_only_on_the_embedded_smollm2(ws):
    (ws.root / "configs" / "small.yaml").write_text(
        TINY_CONFIG.format(metric="success").replace('"random:qwen3-tiny"', "embedded:smollm2-135m-instruct")
        .replace("max_new_tokens: 6", "max_new_tokens: 12").replace("eval: {", "eval: {dtype: bf16, "))
    short = [dict(it, max_turns=2) for it in make_items(12, seed=21) if it["task"] != "hotpotqa"][:3]  # keep it quick
    write_jsonl(ws.path("data/shadow.jsonl"), short)
    r = rc1(ws, "eval", "--config", "configs/small.yaml", "--base-only", "--shadow-only")
    assert r.exit_code == 0, r.output
    rep = json.loads(sorted(ws.reports.glob("eval_*.json"))[-1].read_text())
    assert rep["runs"] == [] and rep["results"]["shadow"]["base"]["n"] == 3 and list(rep["sets"]) == ["shadow"]
    from rc1.runtime.device import cpu_bf16_supported

    # bf16 where the CPU computes it natively; elsewhere fp32 (emulated bf16 measured 3.3x slower)
    assert rep["generation"]["dtype"] == ("bfloat16" if cpu_bf16_supported() else "float32")
    assert rep["dtype"]["eval"] == ("bf16" if cpu_bf16_supported() else "fp32")
    assert rep["dtype"]["requested"] == "bf16" and rep["throughput"]["base"]["episodes_per_s"] > 0


def test_checkpoint_weights_full_and_lora_adapter_are_applied(tiny_ws):
    """The eval model is the trained one: full weights replace the base's, a LoRA adapter is merged."""
    import torch
    from safetensors.torch import save_file

    from rc1.config.load import config_hash, load_train_config
    from rc1.eval.loading import load_base, load_checkpoint_model
    from rc1.models.loader import load_model
    from rc1.runtime.checkpoint import ADAPTER_FILE, write_checkpoint

    ws = tiny_ws
    cpu = torch.device("cpu")
    cfg = load_train_config("configs/tiny.yaml", ws)
    base, _ = load_base(cfg, cpu, torch.float32)
    name = "model.layers.0.self_attn.q_proj.weight"
    ref = dict(base.named_parameters())[name].detach().clone()

    full = write_trainer_checkpoint(ws, cfg, 10, scale=2.0)
    model, _ = load_checkpoint_model(cfg, full, cpu, torch.float32)
    assert torch.allclose(dict(model.named_parameters())[name], 2 * ref)
    assert model.rc1_loaded == {"weights_file": "model.safetensors", "tensors": len(list(base.parameters())),
                                "merged_adapter": False}

    lcfg = cfg.model_copy(deep=True)
    lcfg.model.lora.enable, lcfg.model.lora.r = True, 4
    lcfg.finetune.method = "lora"
    peft_model, _ = load_model(lcfg, device=cpu, dtype=torch.float32, for_training=True)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.fill_(0.01)
    adapter = {n: p.detach().contiguous() for n, p in peft_model.named_parameters() if p.requires_grad}
    ck = write_checkpoint(ws, "checkpoints/lora", 5, {ADAPTER_FILE: lambda p: save_file(adapter, str(p))},
                          {"config_hash": config_hash(lcfg), "config": lcfg.model_dump(mode="json")})
    merged, _ = load_checkpoint_model(cfg, ck, cpu, torch.float32)
    assert merged.rc1_loaded["merged_adapter"] and merged.rc1_loaded["weights_file"] == ADAPTER_FILE
    w = dict(merged.named_parameters())[name]
    assert w.shape == ref.shape and not torch.allclose(w, ref)  # base + B @ A * scaling


def test_eval_bench_reports_episodes_per_second(tiny_ws):
    from rc1.bench.eval import run

    out = run(tiny_ws, quick=True, model="random:qwen3-tiny", n=4, batch_sizes=[2, 4], max_new_tokens=4, dtype="bf16")
    assert out["items"] == 4 and out["dtype"] == "bf16" and [r["batch_size"] for r in out["runs"]] == [2, 4]
    assert all(r["episodes"] == 4 and r["episodes_per_s"] > 0 and r["generated_tokens"] > 0 for r in out["runs"])


def test_eval_bench_times_a_checkpoints_held_out_eval_on_each_backend(tiny_ws):
    """`rc1 bench eval --checkpoint`: the eval's own sets and settings once per backend; the same backend twice
    gives the same results (nothing listed as differing), and llama.cpp's row says what ran and how it compared."""
    from rc1.config.load import load_train_config
    from rc1.generation import installed

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    write_trainer_checkpoint(ws, cfg, 10, scale=1.05)
    backends = ["torch", "torch"] + (["llamacpp:f32"] if installed("llamacpp") else [])
    r = rc1(ws, "bench", "eval", "--checkpoint", "latest", "--config", "configs/tiny.yaml", "--batch-size", "6",
            "--threads", "2", *[a for b in backends for a in ("--backend", b)])
    assert r.exit_code == 0, r.output
    rep = json.loads(ws.path("reports/bench/eval.json").read_text())
    assert rep["mode"] == "checkpoint" and rep["checkpoint"] == "checkpoints/evt/step_00010"
    assert rep["sets"] == {"shadow": 9, "dev": 3} and rep["generation"]["batch_size"] == 6 and rep["threads"] == 2
    first, again, *cpp = rep["rows"]
    assert first["ran"] == again["ran"] == "torch" and first["episodes"] == again["episodes"] == 12
    assert again["differs_from_first"] == [] and again["success_flips"] == 0 and again["speedup_generation"] > 0
    assert sum(first["per_set"].values()) == first["successes"]
    for row in cpp:  # llama.cpp ran after its check, or torch ran and the row says why
        assert row["ran"] == "llamacpp" or ("disagrees" in row["note"] and row["ran"] == "torch")
        assert row["check_max_logprob_diff"] is not None and row["speedup_total"] > 0
        assert all(d["set"] in ("shadow", "dev") for d in row["differs_from_first"])


@pytest.mark.parametrize("spec, message", [("onnx", "unknown backend 'onnx'"),
                                           ("llamacpp:q4_0", "a GGUF type (f32, f16, bf16)"),
                                           ("torch:f16", "a GGUF type (f32, f16, bf16)"),
                                           (None, "it needs --checkpoint")])
def test_eval_bench_refuses_a_bad_backend_in_one_line(tiny_ws, spec, message):
    where = ["--checkpoint", "base", "--config", "configs/tiny.yaml"] if spec else ["--model", "random:qwen3-tiny"]
    r = rc1(tiny_ws, "bench", "eval", *where, "--backend", spec or "torch")
    assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not tiny_ws.path("reports/bench/eval.json").exists()


def test_eval_dtype_on_a_cpu_is_fp32_unless_the_config_asks_for_bf16():
    """SPEC §6: the same config gives the same result on AVX2 and AVX512 machines. `auto` no longer follows a
    training run's bf16 autocast; bf16 only when eval.dtype says so, and only where the CPU computes it natively."""
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.eval.loading import eval_dtype
    from rc1.runtime.device import cpu_bf16_supported

    cpu = torch.device("cpu")

    def cfg(dtype):
        return TrainConfig.model_validate({"run": {"mixed_precision": "bf16"}, "eval": {"dtype": dtype}})

    assert eval_dtype(cfg("auto"), cpu) == torch.float32
    assert eval_dtype(cfg("fp32"), cpu) == torch.float32
    assert eval_dtype(cfg("bf16"), cpu) == (torch.bfloat16 if cpu_bf16_supported() else torch.float32)
