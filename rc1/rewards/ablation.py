"""Over-clarification ablation: what the reward prefers with and without the penalty.

For each shadow item the base model produces N candidate episodes (`--generations`). Each arm
picks, per item, the candidate its reward scores highest (best-of-N: the policy a reward-greedy
optimizer moves toward), and reports on the picked episodes: over-clarification rate (asked
although the item did not need it), average turns and task success. The arms differ only in
`use_overclar_penalty`. Acceptance thresholds come from the gates config (ablation section).
"""

from __future__ import annotations

import time

from rc1.config.schema import TrainConfig
from rc1.rewards.responses import obtain_responses, pair_rows
from rc1.rewards.reward import RewardModel
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.workspace import Workspace


def arm_metrics(picked: list[tuple[dict, object, bool]]) -> dict:
    no_need = [ep for it, ep, _ in picked if not it.get("needs_clarification")]
    need = [ep for it, ep, _ in picked if it.get("needs_clarification")]
    return {
        "items": len(picked),
        "overclar_rate": sum(ep.clarifications > 0 for ep in no_need) / len(no_need) if no_need else 0.0,
        "asked_when_needed_rate": sum(ep.clarifications > 0 for ep in need) / len(need) if need else None,
        "avg_turns": sum(ep.turns for _, ep, _ in picked) / len(picked) if picked else 0.0,
        "success": sum(ok for _, _, ok in picked) / len(picked) if picked else 0.0,
    }


def best_of_n(groups: dict[str, list[tuple[dict, object]]], model: RewardModel) -> list[tuple[dict, object, bool]]:
    picked = []
    for cands in groups.values():
        scored = [(model.score(it, ep), it, ep) for it, ep in cands]
        best = max(range(len(scored)), key=lambda i: (scored[i][0].total, -i))  # first on ties
        b, it, ep = scored[best]
        picked.append((it, ep, b.success))
    return picked


def ablate_overclar(ws: Workspace, cfg: TrainConfig, *, n: int = 245, generations: int = 4, seed: int = 20250820,
                    tag: str = "overclar_ablation", stratify: bool = True, max_turns: int | None = None,
                    batch_size: int = 8) -> dict:
    from rc1.config.load import load_run_gates
    from rc1.config.gates import GatesConfig

    base = RewardModel.from_config(cfg, ws)
    with_pen = RewardModel(base.weights, cfg.reward, use_overclar_penalty=True)
    without = RewardModel(base.weights, cfg.reward, use_overclar_penalty=False)
    items, rows, meta = obtain_responses(ws, cfg, n=n, seed=seed, stratify=stratify, tag=tag, generations=generations,
                                         max_turns=max_turns, batch_size=batch_size)
    pairs = pair_rows({it["id"]: it for it in items}, rows)
    groups: dict[str, list] = {}
    for it, ep in pairs:
        groups.setdefault(it["id"], []).append((it, ep))
    a_without, a_with = arm_metrics(best_of_n(groups, without)), arm_metrics(best_of_n(groups, with_pen))
    g = load_run_gates(cfg, ws).ablation if ws.path(cfg.gates).exists() else GatesConfig().ablation
    rate_red = ((a_without["overclar_rate"] - a_with["overclar_rate"]) / a_without["overclar_rate"]
                if a_without["overclar_rate"] > 0 else None)
    success_drop_pp = (a_without["success"] - a_with["success"]) * 100
    deltas = {"overclar_rate_reduction": rate_red, "avg_turns_change": a_with["avg_turns"] - a_without["avg_turns"],
              "success_drop_pp": success_drop_pp}
    acceptance = {
        "overclar_rate_reduction_min": g.overclar_rate_reduction_min, "success_drop_max_pp": g.success_drop_max_pp,
        "rate_ok": rate_red is not None and rate_red >= g.overclar_rate_reduction_min,
        "turns_ok": deltas["avg_turns_change"] <= 1e-12, "success_ok": success_drop_pp <= g.success_drop_max_pp,
    }
    acceptance["passed"] = acceptance["rate_ok"] and acceptance["turns_ok"] and acceptance["success_ok"]
    if rate_red is None:
        acceptance["note"] = "no over-clarification among the candidates without the penalty: reduction undefined"
    ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    report = {"time": ts, "method": "best-of-N selection by reward with vs without the over-clarification penalty",
              "n_items": len(groups), "generations": generations, "seed": seed, "model_base": cfg.model.base,
              "alpha": cfg.reward.overclar.alpha, "cap": cfg.reward.overclar.cap,
              "candidates": arm_metrics([(it, ep, without.score(it, ep).success) for it, ep in pairs]),
              "without_penalty": a_without, "with_penalty": a_with, "deltas": deltas, "acceptance": acceptance,
              "responses": f"data/shadow_responses_{tag}.jsonl", "responses_sha256": meta["sha256"]}
    out = f"reports/overclar_ablation_{ts}.json"
    atomic_write_json(ws.path(out), report)
    register_artifact(ws, out, "overclar_ablation", passed=acceptance["passed"])
    report["report_path"] = out
    return report
