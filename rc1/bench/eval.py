"""`rc1 bench eval`: eval throughput (episodes/s, generated tokens/s) of greedy episodes.

Default: the embedded SmolLM2-135M on 16 items (the shadow set's first items when the workspace
has one, else freshly generated pool items), at batch size 16, max_new_tokens 48 (as
configs/local.yaml). `--quick`: 8 items, batch size 8. Options: --model, --n, --batch-size
(repeatable), --max-new-tokens, --threads, --dtype (fp32 | bf16).
"""

from __future__ import annotations

import time
from pathlib import Path

from rc1.runtime.workspace import Workspace

DEFAULT_MODEL = "embedded:smollm2-135m-instruct"


def _items(ws: Workspace, n: int) -> tuple[list[dict], str]:
    from rc1.eval.splits import read_items

    shadow = ws.path("data/shadow_eval_245.jsonl")
    if shadow.exists():
        return read_items(shadow)[:n], ws.rel(shadow)
    from rc1.data.pool import BuildParams, build_pool

    tpl = ws.path("templates/pack_v2")
    if not tpl.exists():
        tpl = Path(__file__).resolve().parents[2] / "templates" / "pack_v2"
    return build_pool(BuildParams(n=n, seed=4242, templates_dir=tpl, id_prefix="bench")), f"generated (seed 4242, {tpl.name})"


def run(ws: Workspace, quick: bool = False, *, model: str = DEFAULT_MODEL, n: int | None = None,
        batch_sizes: list[int] | None = None, max_new_tokens: int = 48, threads: int | None = None,
        dtype: str = "fp32", **_ignored) -> dict:
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.envs.rollout import generate_episodes
    from rc1.models.loader import load_model

    n = n or (8 if quick else 16)
    batch_sizes = batch_sizes or ([8] if quick else [16])
    if threads:
        torch.set_num_threads(int(threads))
    cfg = TrainConfig.model_validate({"model": {"base": model, "lora": {"enable": False}}, "finetune": {"method": "full"}})
    t0 = time.perf_counter()
    if dtype not in ("fp32", "bf16"):
        from rc1.runtime.errors import ConfigError

        raise ConfigError(f"--dtype {dtype!r}: expected fp32 or bf16")
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    mdl, tok = load_model(cfg, device=torch.device("cpu"), dtype=torch_dtype, for_training=False)
    load_s = time.perf_counter() - t0
    items, source = _items(ws, n)
    rows = []
    for bs in batch_sizes:
        t0 = time.perf_counter()
        eps = []
        with torch.no_grad():
            for start in range(0, len(items), bs):
                eps += generate_episodes(mdl, tok, items[start:start + bs], max_new_tokens=max_new_tokens, greedy=True,
                                         seed=1, batch_size=bs)
        secs = time.perf_counter() - t0
        gen_tokens = sum(e.completion_tokens for e in eps)
        rows.append({"batch_size": bs, "episodes": len(eps), "seconds": round(secs, 3),
                     "episodes_per_s": round(len(eps) / secs, 3), "generated_tokens": gen_tokens,
                     "tokens_per_s": round(gen_tokens / secs, 1),
                     "mean_turns": round(sum(e.turns for e in eps) / len(eps), 3),
                     "truncated": sum(bool(e.truncated) for e in eps)})
    result = {"area": "eval", "model": model, "items": len(items), "source": source, "max_new_tokens": max_new_tokens,
              "dtype": dtype, "threads": torch.get_num_threads(), "device": "cpu", "model_load_s": round(load_s, 2), "runs": rows}
    print(f"eval throughput: {model} ({dtype}), {len(items)} items ({source}), max_new_tokens {max_new_tokens}, "
          f"{result['threads']} threads, model load {load_s:.1f} s")
    print(f"{'batch':>6} {'episodes':>9} {'seconds':>8} {'ep/s':>7} {'tok/s':>7} {'turns':>6} {'trunc':>6}")
    for r in rows:
        print(f"{r['batch_size']:>6} {r['episodes']:>9} {r['seconds']:>8.1f} {r['episodes_per_s']:>7.2f} "
              f"{r['tokens_per_s']:>7.1f} {r['mean_turns']:>6.2f} {r['truncated']:>6}")
    return result
