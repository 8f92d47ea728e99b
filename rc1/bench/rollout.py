"""`rc1 bench rollout`: rollout throughput [--base B] [--new-tokens N] [--quick].

Measures completion tokens/s of `decode_batch` (the rollout decoder) at batch 1 and 8, the same
work through HF `generate()` for reference, and a GRPO-shaped rollout (8 prompts x 4
completions) through `generate_episodes`. Wall time AND process CPU time are reported: on a
shared machine wall time mostly measures the neighbours.
"""

from __future__ import annotations

import time

PROMPTS = ["What is 17 times 23?", "Is the Eiffel Tower taller than the Statue of Liberty?", "Who wrote Hamlet?",
           "A shop sells 12 pens for 3 dollars. How much do 40 pens cost?", "Name the capital of Australia.",
           "How many legs do 7 spiders have?", "Is a tomato a fruit?", "What is the boiling point of water in F?"]


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run(ws=None, quick: bool = False, base: str = "embedded:smollm2-135m-instruct", new_tokens: int = 32,
        threads: int | None = None) -> dict:
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.envs.env import ChatFormat, episode_messages
    from rc1.envs.rollout import decode_batch, generate_episodes
    from rc1.models.loader import load_model

    if threads:
        torch.set_num_threads(threads)
    model, tok = load_model(TrainConfig(model={"base": base}), device=torch.device("cpu"), for_training=False)
    fmt = ChatFormat(tok)
    prompts = [fmt.prompt_ids(episode_messages({"question": q})) for q in PROMPTS]
    rows = []
    for batch in ((1, 8) if not quick else (8,)):
        # Never stop early (no eos, no action stop): exactly `new_tokens` per row, like the HF reference.
        fmt_noeos = ChatFormat(tok)
        fmt_noeos.eos_ids = frozenset({-1})
        with torch.inference_mode():
            (gen, _, _), wall, cpu = _timed(lambda: decode_batch(
                model, fmt_noeos, prompts[:batch], max_new_tokens=[new_tokens] * batch, greedy=False,
                temperature=1.0, top_p=1.0, generator=torch.Generator().manual_seed(0), stop_at_action=False))
        n = sum(map(len, gen))
        rows.append({"what": f"rc1 decode_batch b={batch}", "tokens": n, "wall_s": wall, "cpu_s": cpu})
        width = max(map(len, prompts[:batch]))
        ids = torch.full((batch, width), tok.pad_token_id)
        attn = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts[:batch]):
            ids[i, width - len(p):], attn[i, width - len(p):] = torch.tensor(p), 1
        with torch.inference_mode():
            _, wall, cpu = _timed(lambda: model.generate(input_ids=ids, attention_mask=attn, do_sample=True,
                                                         max_new_tokens=new_tokens, min_new_tokens=new_tokens))
        rows.append({"what": f"HF generate b={batch}", "tokens": batch * new_tokens, "wall_s": wall, "cpu_s": cpu})
    items = [{"id": str(i), "task": "gsm8k", "question": q, "tools": ["wiki", "calc"], "corpus": []}
             for i, q in enumerate(PROMPTS)]
    eps, wall, cpu = _timed(lambda: generate_episodes(model, tok, items, num_generations=4, max_turns=1,
                                                      max_new_tokens=new_tokens, seed=0, batch_size=32))
    rows.append({"what": "generate_episodes 8x4 (1 turn)", "tokens": sum(e.completion_tokens for e in eps),
                 "wall_s": wall, "cpu_s": cpu})
    for r in rows:
        r["tok_per_s"] = r["tokens"] / r["wall_s"]
        r["tok_per_cpu_s"] = r["tokens"] / max(r["cpu_s"], 1e-9)
    print(f"{'what':34} {'tokens':>6} {'wall s':>7} {'tok/s':>7} {'cpu s':>7} {'tok/cpu-s':>9}")
    for r in rows:
        print(f"{r['what']:34} {r['tokens']:6d} {r['wall_s']:7.2f} {r['tok_per_s']:7.1f} {r['cpu_s']:7.2f} "
              f"{r['tok_per_cpu_s']:9.1f}")
    return {"base": base, "new_tokens": new_tokens, "threads": torch.get_num_threads(), "rows": rows}

