"""`rc1 config verify --smoke`: one optimizer step of every shipped train config on random:qwen3-tiny, in a
temporary directory (the workspace provably untouched); exit 2 with the reason when the step cannot run."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from tests.helpers.configs import REPO

runner = CliRunner()
TRAIN_CONFIGS = sorted(p.name for p in (REPO / "configs").glob("*.yaml")
                       if {"run", "model"} & set(yaml.safe_load(p.read_text())))


def tree_hashes(root) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def smoke(ws, config: str):
    return runner.invoke(app, ["--workdir", str(ws.root), "config", "verify", "--config", config, "--smoke"])


def test_the_shipped_train_configs_are_the_five_we_expect():
    assert TRAIN_CONFIGS == ["arith.yaml", "local.yaml", "local_lora.yaml", "ppo_scale.yaml", "train_local.yaml"]


@pytest.mark.parametrize("name", TRAIN_CONFIGS)
def test_smoke_runs_one_step_of_every_shipped_config_and_touches_nothing(ws, name):
    # a workspace with state, a ticket and reports: none of it may change
    for rel, text in (("reports/state/machine.json", '{"state": "round2_pass"}'),
                      ("reports/preflight/round2_pass.json", '{"ticket": 1}'), ("reports/metrics.jsonl", "{}\n"),
                      ("logs/train.log", "earlier run\n")):
        ws.path(rel).parent.mkdir(parents=True, exist_ok=True)
        ws.path(rel).write_text(text)
    if name == "arith.yaml":  # a custom task: its task file, as docs/own-task.md makes it
        from examples.arith.make_arith import main as make_arith

        make_arith(["--out", str(ws.path("data/arith.jsonl"))])
    before = tree_hashes(ws.root)
    res = smoke(ws, f"configs/{name}")
    assert res.exit_code == 0, res.output
    assert "smoke: ok, one optimizer step" in res.output
    cfg = yaml.safe_load((REPO / "configs" / name).read_text())
    accum = cfg["run"]["gradient_accumulation"]
    assert f"gradient_accumulation {accum} -> {accum} micro-steps" in res.output
    assert f"finetune: {cfg['finetune']['method']} (trained: {cfg['finetune']['method']})" in res.output
    assert "end: completed" in res.output
    assert tree_hashes(ws.root) == before
    if cfg["model"]["base"] == "Qwen/Qwen3-4B-Thinking-2507":  # the production format, offline
        assert "chat template: Qwen/Qwen3-4B-Thinking-2507's, vendored by rc1" in res.output
        assert "multi_turn: auto -> split_turns" in res.output and "opens <think>" in res.output
    if name == "ppo_scale.yaml":  # accumulation with ppo_epochs 2: the combination the issue found refused
        assert "ppo_epochs 2: gradient_accumulation 4 -> 4 micro-steps, 2 optimizer update(s)" in res.output


def _variant(ws, base: str, changes: dict) -> str:
    data = yaml.safe_load(ws.path(f"configs/{base}").read_text())
    for dotted, value in changes.items():
        d = data
        *path, key = dotted.split(".")
        for k in path:
            d = d.setdefault(k, {})
        d[key] = value
    ws.path("configs/variant.yaml").write_text(yaml.safe_dump(data))
    return "configs/variant.yaml"


@pytest.mark.parametrize("changes,needle", [
    ({"engine.name": "trl"}, "TRL 1.x has no PPOTrainer"),                             # ppo_scale is PPO
    ({"engine.name": "trl", "strategy.name": "grpo"}, "kl_control: none or early_stop"),  # target_kl adaptive
    ({"engine.name": "trl", "strategy.name": "grpo", "monitor": {"kl_control": "early_stop"},
      "strategy.multi_turn": "split_turns"}, "single-turn"),
])
def test_smoke_exits_2_on_a_combination_the_engine_cannot_run(ws, changes, needle):
    before = tree_hashes(ws.root)
    res = smoke(ws, _variant(ws, "ppo_scale.yaml", changes))
    assert res.exit_code == 2 and needle in res.output, res.output
    assert "smoke: ok" not in res.output
    assert {k: v for k, v in tree_hashes(ws.root).items() if k != "configs/variant.yaml"} == {
        k: v for k, v in before.items() if k != "configs/variant.yaml"}


@pytest.mark.parametrize("changes,needle", [
    ({"model.use_flash_attention_2": True}, "cannot run a step"),          # a GPU setting on a machine without it
    ({"model.lora.enable": True, "finetune.method": "lora",                # another architecture's module names
      "model.lora.target_modules": ["c_attn", "c_proj"]}, "none is a linear layer of this model"),
])
def test_smoke_exits_2_when_the_step_itself_fails(ws, changes, needle):
    res = smoke(ws, _variant(ws, "local.yaml", changes))
    assert res.exit_code == 2 and needle in res.output, res.output
    assert not list(ws.root.rglob("ERROR_*"))  # a refused step is an answer, not a crash report


@pytest.mark.parametrize("reason,step,losses,moved,needle", [
    ("target_kl", 1, [0.1], True, "ended 'target_kl' at step 1 of 4"),   # stopped early
    ("completed", 4, [0.1, float("nan")], True, "no finite loss"),       # diverged
    ("completed", 4, [], True, "no finite loss"),                         # nothing to learn from (no DPO pair)
    ("completed", 4, [0.1], False, "left every trainable parameter unchanged"),
])
def test_the_smoke_refuses_a_step_that_did_not_really_train(reason, step, losses, moved, needle):
    import torch

    from rc1.runtime.errors import ConfigError
    from rc1.training.smoke import check_step

    before = [torch.zeros(3)]
    after = [torch.tensor([0.0, 1e-3, 0.0])] if moved else [torch.zeros(3)]
    records = [{"step": i + 1, "loss": x} for i, x in enumerate(losses)]
    with pytest.raises(ConfigError, match=needle) as err:
        check_step("c.yaml", reason, step, 4, records, before, after)
    assert err.value.exit_code == 2
    check_step("c.yaml", "completed", 4, 4, [{"loss": 0.1}], before, [torch.ones(3)])  # and a real step passes
