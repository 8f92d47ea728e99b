"""Eval test helpers: tiny item sets, a tiny-model config, a trainer-format checkpoint, crafted reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BUCKET_CYCLE = ("easy", "medium", "hard")


def make_items(n: int, seed: int = 7) -> list[dict]:
    """Real generated pool items (rc1.data) with difficulty buckets assigned in a fixed cycle."""
    from rc1.data.pool import BuildParams, build_pool

    items = build_pool(BuildParams(n=n, seed=seed, id_prefix=f"ev{seed}",
                                    templates_dir=REPO / "templates" / "pack_v2"))
    for i, it in enumerate(items):
        it["bucket"] = BUCKET_CYCLE[i % 3]
    return items


def write_jsonl(path, items) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(it) + "\n" for it in items))


TINY_CONFIG = """\
profile: laptop
gates: configs/gates_local.yaml
run: {{name: evt, seed: 1, threads: 2, device_pref: [cpu]}}
data: {{shadow_path: data/shadow.jsonl, eval_path: data/eval_min.jsonl}}
model: {{base: "random:qwen3-tiny", max_new_tokens: 6, lora: {{enable: false}}}}
finetune: {{method: full}}
eval: {{metric: {metric}}}
"""


@pytest.fixture
def tiny_ws(ws):
    """Workspace with a tiny-model config, a 9-item shadow set and a 3-item eval_min."""
    (ws.root / "configs" / "tiny.yaml").write_text(TINY_CONFIG.format(metric="success"))
    write_jsonl(ws.path("data/shadow.jsonl"), make_items(9, seed=11))
    write_jsonl(ws.path("data/eval_min.jsonl"), make_items(3, seed=12))
    return ws


def write_trainer_checkpoint(ws, cfg, step: int, *, scale: float = 1.0):
    """A checkpoint in the trainer's format (rc1.runtime.checkpoint.write_checkpoint): full weights,
    optionally scaled so the model differs from the base."""
    import torch
    from safetensors.torch import save_file

    from rc1.config.load import config_hash
    from rc1.models.loader import load_model
    from rc1.runtime.checkpoint import MODEL_FILE, write_checkpoint

    model, _ = load_model(cfg, device=torch.device("cpu"), dtype=torch.float32, for_training=True)
    weights = {n: (p.detach() * scale).contiguous() for n, p in model.named_parameters() if p.requires_grad}
    return write_checkpoint(ws, cfg.checkpoint_dir, step,
                            {MODEL_FILE: lambda p: save_file(weights, str(p))},
                            {"config_hash": config_hash(cfg), "config": cfg.model_dump(mode="json"),
                             "run": cfg.run.name})
