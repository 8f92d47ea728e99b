"""The resources gate refuses a plan that does not fit the machine, with the figure and the knobs; and QLoRA
where bitsandbytes cannot run 4-bit."""

from __future__ import annotations

import pytest
import yaml

from rc1.config.load import load_gates_config
from rc1.config.schema import TrainConfig
from rc1.gates.base import FAIL, NOT_MEASURABLE, PASS, GateContext
from rc1.gates.resources import MEMORY_CHECK, Machine, evaluate
from rc1.runtime.workspace import Workspace
from tests.helpers.configs import gates_yaml

LAPTOP_24GB = Machine("cpu", "fp32", 24e9)


def _ctx(tmp_path, cfg, machine=LAPTOP_24GB, profile="configs/gates.yaml", **gates_over):
    (tmp_path / "gates.yaml").write_text(gates_yaml(gates_over, base=profile))
    gates = load_gates_config(tmp_path / "gates.yaml")
    return GateContext(Workspace(tmp_path), gates, "round1", cfg, extras={"machine": machine} if machine else {})


def _cfg(method: str, **over) -> TrainConfig:
    """A Qwen3-4B-Thinking-2507 run config (the user's model), production-like unless overridden."""
    base = {"model": {"base": "Qwen/Qwen3-4B-Thinking-2507", "max_new_tokens": 1024, "gradient_checkpointing": True,
                      "lora": {"r": 16}},
            "data": {"max_length": 4096}, "finetune": {"method": method},
            "strategy": {"name": "grpo", "num_generations": 4, "prompts_per_step": 4}, "run": {"device_pref": ["cpu"]}}
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v}
    return TrainConfig.model_validate(base)


def _check(result, name=MEMORY_CHECK):
    return next(c for c in result.checks if c.name == name)


def test_full_finetune_of_the_4b_shape_is_refused_on_a_24gb_machine_naming_the_figure(tmp_path):
    res = evaluate(_ctx(tmp_path, _cfg("full")))
    c = _check(res)
    assert c.status == FAIL and not res.passed
    assert c.measured > 64                                          # fp32 weights + reference + grads + AdamW alone
    assert f"estimated {c.measured} GB does not fit cpu RAM 24.0 GB" in c.detail
    assert "budget 21.6 GB" in c.detail and "<= 21.6" in c.threshold
    # the combination of knobs, a micro-batch first (issue 26), or none
    assert "fits with: run.micro_batch_size: 1, finetune.method:" in c.detail or "no change" in c.detail
    assert "qwen3-4b (4.02B params), full" in c.detail


def test_full_finetune_knobs_name_lora_or_qlora_first_when_they_fit(tmp_path):
    cfg = _cfg("full", model={"max_new_tokens": 64}, data={"max_length": 512},
               strategy={"num_generations": 2, "prompts_per_step": 1, "max_turns": 1})
    c = _check(evaluate(_ctx(tmp_path, cfg)))
    assert c.status == FAIL
    knobs = c.detail.split("fits with: ")[1]
    assert knobs.startswith(("finetune.method: lora ->", "finetune.method: qlora ->"))


def test_a_lora_plan_that_fits_passes(tmp_path):
    cfg = _cfg("lora", model={"max_new_tokens": 128}, data={"max_length": 512},
               strategy={"num_generations": 2, "prompts_per_step": 1, "max_turns": 1})
    c = _check(evaluate(_ctx(tmp_path, cfg)))
    assert c.status == PASS and 16 < c.measured <= 21.6       # 16 GB of fp32 weights + a small step


def test_the_same_plan_fits_a_gpu_but_not_a_16gb_laptop(tmp_path):
    cfg = _cfg("lora", model={"max_new_tokens": 128}, data={"max_length": 512},
               strategy={"num_generations": 2, "prompts_per_step": 1, "max_turns": 1})
    assert _check(evaluate(_ctx(tmp_path, cfg, Machine("cuda", "bf16", 80e9)))).status == PASS
    small = _check(evaluate(_ctx(tmp_path, cfg, Machine("cpu", "fp32", 16e9))))
    assert small.status == FAIL and "finetune.method: qlora" in small.detail


def test_memory_fraction_is_a_stated_threshold(tmp_path):
    cfg = _cfg("lora", model={"max_new_tokens": 128}, data={"max_length": 512},
               strategy={"num_generations": 2, "prompts_per_step": 1, "max_turns": 1})
    c = _check(evaluate(_ctx(tmp_path, cfg, resources={"memory_max_fraction": 0.5})))
    assert c.status == FAIL and "0.5 x cpu RAM 24.0 GB" in c.threshold
    data = yaml.safe_load(gates_yaml())
    del data["resources"]["memory_max_fraction"]
    (tmp_path / "partial.yaml").write_text(yaml.safe_dump(data))
    from rc1.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="threshold"):
        load_gates_config(tmp_path / "partial.yaml")


def test_unknown_hub_model_is_not_measurable_and_blocks_in_production(tmp_path):
    from rc1.gates.registry import run_area

    cfg = _cfg("lora", model={"base": "someorg/unknown-model-7b"})
    ctx = _ctx(tmp_path, cfg)
    res = run_area("resources", ctx)
    c = _check(res)
    assert c.status == NOT_MEASURABLE and "not known offline" in c.detail
    assert not res.passed  # production: not measurable blocks


def test_no_run_config_is_not_measurable(tmp_path):
    res = evaluate(_ctx(tmp_path, None, machine=None))
    assert _check(res).status == NOT_MEASURABLE


def test_qlora_where_bitsandbytes_cannot_run_4bit_is_refused_naming_lora(tmp_path):
    # No MPS here: the probe runs a real nf4 layer on a device bitsandbytes cannot quantize on (meta),
    # which is what happens on a device without 4-bit kernels.
    res = evaluate(_ctx(tmp_path, _cfg("qlora", model={"max_new_tokens": 64}, data={"max_length": 256}),
                        Machine("meta", "fp32", 24e9)))
    c = _check(res, "fine-tune support on meta")
    assert c.status == FAIL and "qlora is not supported on device meta" in c.detail
    assert "use finetune.method: lora" in c.detail
    tiny = _cfg("qlora", model={"base": "random:qwen3-tiny", "max_new_tokens": 64}, data={"max_length": 256})
    ok = _check(evaluate(_ctx(tmp_path, tiny)), "fine-tune support on cpu")
    assert ok.status == PASS, ok.detail  # bitsandbytes >= 0.48 runs nf4 on a CPU


def test_preflight_refuses_a_full_4b_finetune_on_this_machine_naming_the_figure(tmp_path, monkeypatch):
    """`rc1 advance --to round2` on the real machine (no injected Machine): exit 3, the estimate and the fix."""
    from typer.testing import CliRunner

    from rc1.cli.main import app
    from tests.helpers.workspace import make_workspace

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the shape comes from rc1's table; nothing is downloaded
    monkeypatch.setattr("rc1.gates.resources.this_machine", lambda cfg: LAPTOP_24GB)
    conf = make_workspace(tmp_path, "Qwen/Qwen3-4B-Thinking-2507", method="full",
                          extra={"model.max_new_tokens": 1024, "data.max_length": 4096, "strategy.max_turns": 1,
                                 "model.gradient_checkpointing": True})
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "advance", "--to", "round2", "--config", str(conf)])
    assert res.exit_code == 3, res.output
    line = next(l for l in res.output.splitlines() if "failing: resources/step memory (GB)" in l)
    assert "does not fit cpu RAM 24.0 GB (budget 21.6 GB)" in line and "qwen3-4b (4.02B params), full" in line
    assert float(line.split("estimated ")[1].split(" GB")[0]) > 64   # weights, reference, gradients, AdamW
    assert "fits with: finetune.method: " in line or "fits with: run.micro_batch_size: " in line


def test_qlora_on_a_mac_is_refused_at_preflight_naming_lora(tmp_path, monkeypatch):
    """A faked MPS device (this machine has none): rc1 picks it, warns, trains in fp16, and the real bitsandbytes
    probe on 'mps' fails, so preflight refuses QLoRA and names LoRA; memory is judged against the MPS working
    set, and the knobs it offers never suggest QLoRA there."""
    import torch

    from rc1.runtime import device as device_mod

    monkeypatch.setattr(device_mod, "_available", lambda name: name in ("mps", "cpu"))
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 48e9, raising=False)
    small = {"model": {"max_new_tokens": 128}, "data": {"max_length": 512},
             "strategy": {"num_generations": 2, "prompts_per_step": 1, "max_turns": 1}}
    cfg = _cfg("qlora", run={"device_pref": ["mps", "cuda", "cpu"]}, **small)
    with pytest.warns(UserWarning, match="flash-attention and torch.compile are disabled"):
        res = evaluate(_ctx(tmp_path, cfg, machine=None))
    support = _check(res, "fine-tune support on mps")
    assert support.status == FAIL and "qlora is not supported on device mps" in support.detail
    assert "use finetune.method: lora" in support.detail
    mem = _check(res)
    assert "unified memory (MPS working set) 48.0 GB" in mem.threshold and "fp16 on mps" in mem.detail
    full = _check(evaluate(_ctx(tmp_path, _cfg("full", run={"device_pref": ["mps", "cpu"]}, **small), machine=None)))
    knobs = full.detail.split("fits with: ")[1].split(". ")[0]
    assert full.status == FAIL and knobs.startswith("finetune.method: lora ->") and "qlora" not in knobs


def test_auto_multi_turn_is_judged_as_the_chat_template_resolves_it(monkeypatch):
    """`auto` rows: concat where the template keeps history, split_turns where it rewrites it (Qwen3), and
    split_turns (the worst case) when the tokenizer cannot be read offline."""
    from rc1.config.schema import TrainConfig
    from rc1.envs import env
    from rc1.gates import resources
    from rc1.models import loader

    cfg = TrainConfig.model_validate({"strategy": {"multi_turn": "auto"}})
    monkeypatch.setattr(loader, "load_tokenizer", lambda base, revision=None: object())
    for rewrites, mode in ((False, "concat"), (True, "split_turns")):
        monkeypatch.setattr(env, "ChatFormat", lambda tok, r=rewrites: type("F", (), {"rewrites_history": r})())
        assert resources.multi_turn_mode(cfg) == mode

    def offline(base, revision=None):
        raise OSError("not in the cache")
    monkeypatch.setattr(loader, "load_tokenizer", offline)
    assert resources.multi_turn_mode(cfg) == "split_turns"
    assert resources.multi_turn_mode(TrainConfig.model_validate({"strategy": {"multi_turn": "concat"}})) == "concat"
