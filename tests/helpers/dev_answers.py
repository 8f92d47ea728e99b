"""Base-model answers to the dev split with chosen outcomes, written exactly as `rc1 reward base-answers`
writes them (rc1.rewards.responses.obtain_responses), with the generation replaced by a stand-in."""

from __future__ import annotations

from typing import Callable

from rc1.rewards import responses


def write_dev_answers(ws, cfg, solved: Callable[[dict, int], bool], generations: int = 3) -> list[dict]:
    """data/responses_dev_base.jsonl for every dev item (buckets measured as the difficulty gate measures
    them); answer g of item `it` is correct iff `solved(it, g)`. Returns the items with their buckets."""
    from rc1.data import difficulty as D
    from rc1.data.tokens import get_counter

    items, _, _ = responses.load_item_file(ws, cfg.data.eval_path, "dev split")
    measured = {it["id"]: it for it in D.compute_metrics(items, get_counter(None))[0]}

    def generate(cfg, items, *, generations, seed, max_turns=None, batch_size=8):
        out = []
        for it in items:
            for g in range(generations):
                ok = solved(measured[it["id"]], g)
                ans = it["answer"] if ok else ("no" if it["answer"] == "yes" else "wrong answer 0")
                out.append({"item_id": it["id"], "task": it["task"], "final_answer": ans, "turns": 1, "tool_hops": 0,
                            "clarifications": 0, "truncated": False, "model_text": f"ANSWER: {ans}", "transcript": []})
        return out

    real = responses.generate_responses
    responses.generate_responses = generate
    try:
        responses.obtain_responses(ws, cfg, n=len(items), seed=20250820, stratify=True, tag=responses.DEV_BASE_TAG,
                                   generations=generations, items_path=cfg.data.eval_path, regenerate=True)
    finally:
        responses.generate_responses = real
    return list(measured.values())
