"""k steps + stop + resume == an uninterrupted run, bit-exactly on CPU, for every pure_pt strategy."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from rc1.callbacks.base import BaseCallback
from rc1.config.load import load_train_config
from rc1.training.base import make_recipe
from rc1.runtime.checkpoint import read_latest
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


class StopAt(BaseCallback):
    """Stops the run after `k` steps, exactly as SIGTERM / `rc1 stop` would."""

    def __init__(self, k):
        self.k = k

    def on_step_end(self, trainer, record):
        if trainer.step == self.k:
            trainer.request_stop("operator")


def run(ws: Workspace, config, *, resume=None, stop_at=None):
    cfg = load_train_config(config, ws)
    recipe = make_recipe(ws, cfg, config_path=str(config), resume=resume)
    recipe.setup()
    if stop_at is not None:
        recipe.callbacks.insert(0, StopAt(stop_at))
    recipe.train()
    recipe.cleanup()
    return recipe


def losses(ws: Workspace) -> list[tuple[int, float | None]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, ws.metrics_path.read_text().splitlines())]


def final_weights(ws: Workspace) -> dict:
    latest = read_latest(ws.path("checkpoints/t"))
    (f,) = [p for p in latest.iterdir() if p.suffix == ".safetensors"]
    return load_file(str(f))


@pytest.mark.parametrize("engine,strategy,method,grad_accum,k,micro", [
    ("pure_pt", "grpo", "full", 1, 2, None),
    ("pure_pt", "grpo", "lora", 2, 3, None),      # k inside a gradient-accumulation window, LoRA reference = adapters off
    ("pure_pt", "ppo", "full", 2, 1, None),       # value head + adaptive KL state, mid-window
    ("pure_pt", "dpo", "full", 1, 2, None),
    ("pure_pt", "rloo", "lora", 1, 1, None),
    ("pure_pt", "sft", "full", 2, 3, None),
    ("trl", "grpo", "full", 1, 2, None),          # TRL's GRPOTrainer, resumed from an rc1 checkpoint
    ("trl", "grpo", "lora", 2, 1, None),          # TRL steps are optimizer steps (accumulation inside one step)
    # run.micro_batch_size: each step's rows in micro-batches, mid-window stops included
    ("pure_pt", "grpo", "lora", 2, 3, 2),
    ("pure_pt", "ppo", "full", 2, 2, 4),          # 6 rows in micro-batches of 4 and 2, two epochs per window
    ("pure_pt", "dpo", "full", 1, 2, 2),
    ("pure_pt", "sft", "full", 2, 3, 1),
    ("trl", "grpo", "full", 2, 1, 3),             # TRL: 12 rows per optimizer step, 3 per forward/backward
])
def test_resume_equals_uninterrupted(tmp_path, tiny_model_dir, engine, strategy, method, grad_accum, k, micro):
    total = 4
    a = Workspace(tmp_path / "a")
    b = Workspace(tmp_path / "b")
    extra = {"run.micro_batch_size": micro}
    if strategy == "ppo" and micro:
        extra["strategy.ppo_epochs"] = 2
    opts = dict(engine=engine, strategy=strategy, method=method, grad_accum=grad_accum, max_steps=total,
                save_steps=100, extra=extra)
    conf = make_workspace(a.root, tiny_model_dir, **opts)
    make_workspace(b.root, tiny_model_dir, **opts)
    run(a, conf)
    first = run(b, conf, stop_at=k)
    assert first.step == k and first.stop_reason == "operator"
    assert read_latest(b.path("checkpoints/t")).name == f"step_{k:05d}"
    second = run(b, conf, resume="latest")
    assert second.step == total

    la, lb = losses(a), losses(b)
    assert [s for s, _ in lb] == list(range(1, total + 1))  # steps continue from k+1, no repeats
    assert la == lb, f"losses differ:\n{la}\n{lb}"
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys() and wa
    for name in wa:
        assert wa[name].equal(wb[name]), f"{name} differs after resume"
    # training really moved the weights
    assert any(l is not None and l != 0.0 for _, l in la)
