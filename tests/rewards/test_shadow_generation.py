"""The real generation path of the shadow run (loader + episode rollouts), on the tiny random Qwen3."""

import json

from rc1.config.schema import TrainConfig
from rc1.rewards.shadow import shadow_run
from rc1.runtime.workspace import Workspace


def test_shadow_run_generates_with_the_base_model(tmp_path):
    from tests.helpers.items import mixed_task_items

    ws = Workspace(tmp_path)
    ws.path("data").mkdir()
    ws.path("data/shadow_eval_245.jsonl").write_text("".join(json.dumps(it) + "\n" for it in mixed_task_items(9)))
    ws.path("configs").mkdir()
    ws.path("configs/weights.json").write_text(json.dumps({"weights": {
        "correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
        "format": 0.08, "clarification": 0.10}}))
    cfg = TrainConfig.model_validate({"model": {"base": "random:qwen3-tiny", "max_new_tokens": 4},
                                      "run": {"device_pref": ["cpu"], "threads": 1},
                                      "finetune": {"method": "full"}})
    rep = shadow_run(ws, cfg, n=3, seed=3, tag="tiny", max_turns=1, batch_size=3)
    rows = [json.loads(x) for x in ws.path("data/shadow_responses_tiny.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rep["n"] == 3 and rep["generation"]["generation_seconds"] > 0
    assert all(r["episode"]["turns"] == 1 and r["episode"]["model_text"] for r in rows)
    assert {r["item_id"] for r in rows} <= {f"t{i:04d}" for i in range(9)}
