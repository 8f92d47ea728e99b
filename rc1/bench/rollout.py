"""`rc1 bench rollout`: completion tokens/s of each generation backend, as ratios [--base B] [--new-tokens N]
[--rollout-batch R] [--quick].

The same prompts (episode prompts of `PROMPTS`) and the same length (exactly `new_tokens` per row: no
end-of-turn, no action stop) through every backend of rc1.generation that runs here, at batch 1 and at the
rollout batch (R rows: R/4 prompts x 4 copies, GRPO-shaped, the copies sharing their prompt):

  torch             rc1's KV-cache decoder (rc1.envs.rollout.decode_batch), fp32
  torch bf16 copy   the same decoder on a bf16 copy of the weights (buffers fp32, linear layers on oneDNN's
                    packed layout where available: rc1.models.packed), as generation.rollout_dtype
                    bf16 samples training rollouts; only on CPUs with native bf16 (AVX512-BF16 or AMX)
  llamacpp f32/f16  rc1's batched llama.cpp decoder (rc1.generation.llamacpp) on the served GGUF, and bf16
                    on CPUs with native bf16
  llama.cpp single  llama-cpp-python's own `Llama.generate`, one stream, same GGUF (the reference point)

Each row is set beside llama.cpp single-stream and beside the memory-bandwidth limit: decoding one token
of a batch reads every weight once, so tok/s <= batch x bandwidth / weight bytes. The bandwidth is measured
here (a large numpy copy, bytes read + written per second) and stated in the report; on a shared machine it
and every wall time measure the neighbours too, so process CPU time is reported beside wall time.
"""

from __future__ import annotations

import time

PROMPTS = ["What is 17 times 23?", "Is the Eiffel Tower taller than the Statue of Liberty?", "Who wrote Hamlet?",
           "A shop sells 12 pens for 3 dollars. How much do 40 pens cost?", "Name the capital of Australia.",
           "How many legs do 7 spiders have?", "Is a tomato a fruit?", "What is the boiling point of water in F?"]
COPIES = 4   # completions per prompt in the rollout batch (a GRPO group)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def memory_bandwidth_gbs(mb: int = 256, repeats: int = 3) -> float:
    """Best of `repeats` copies of an `mb` MB array: (bytes read + bytes written) / s, in GB/s."""
    import numpy as np

    src = np.ones(mb * 2**20 // 8, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / best / 1e9


def _llama_single(gguf, prompt: list[int], new_tokens: int, threads: int) -> tuple[int, float, float]:
    """llama-cpp-python used directly: one stream, `new_tokens` sampled tokens; (tokens, wall s, cpu s)."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf), n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    try:
        def go():
            out = []
            for t in llm.generate(prompt, temp=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
                out.append(t)
                if len(out) >= new_tokens:
                    break
            return out
        toks, wall, cpu = _timed(go)
    finally:
        llm.close()
    return len(toks), wall, cpu


def run(ws=None, quick: bool = False, base: str = "embedded:smollm2-135m-instruct", new_tokens: int = 32,
        threads: int | None = None, rollout_batch: int = 32) -> dict:
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.envs.env import ChatFormat, episode_messages
    from rc1.envs.rollout import StopRule, decode_batch, eos_ids
    from rc1.generation import base_ref, installed
    from rc1.generation.serve import served_gguf
    from rc1.models import packed
    from rc1.runtime.device import cpu_bf16_supported

    if quick:
        new_tokens, rollout_batch = min(new_tokens, 16), min(rollout_batch, 8)
    if threads:
        torch.set_num_threads(threads)
    threads = torch.get_num_threads()
    cfg = TrainConfig(model={"base": base})
    ref = base_ref(cfg)
    model, tok = ref.load(torch.device("cpu"), torch.float32)
    fmt = ChatFormat(tok, eos_ids(model, tok))
    fmt.eos_ids = frozenset({-1})   # never stop early: exactly new_tokens per row on every backend
    rule = StopRule(fmt)
    prompts = [fmt.prompt_ids(episode_messages({"question": q})) for q in PROMPTS]
    groups = max(1, rollout_batch // COPIES)
    batches = {1: prompts[:1], rollout_batch: [p for p in (prompts * groups)[:groups] for _ in range(COPIES)]
               [:rollout_batch]}
    rows = []

    def add(what: str, backend: str, batch: int, gen, wall: float, cpu: float, weight_bytes: int | None):
        rows.append({"what": what, "backend": backend, "batch": batch, "tokens": sum(map(len, gen)),
                     "wall_s": wall, "cpu_s": cpu, "weight_bytes": weight_bytes})

    # fp32, then (generation.rollout_dtype bf16) the weights cast to bf16, buffers kept fp32, where bf16 is native
    variants = [("torch fp32", "torch")] + ([("torch bf16 copy", "torch bf16")] if cpu_bf16_supported() else [])
    for name, backend in variants:
        if backend == "torch bf16":
            for p in model.parameters():
                p.data = p.data.to(torch.bfloat16)
            if packed.available() is None:  # as the trainer's bf16 copy runs (rc1.models.packed)
                packed.PackedLinears(model, rows=rollout_batch)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        for batch, ps in batches.items():
            with torch.inference_mode():
                (gen, _, _), wall, cpu = _timed(lambda: decode_batch(
                    model, fmt, ps, max_new_tokens=[new_tokens] * len(ps), greedy=False, temperature=1.0, top_p=1.0,
                    generator=torch.Generator().manual_seed(0), stop_at_action=False))
            add(f"{name} b={batch}", backend, batch, gen, wall, cpu, weight_bytes)
    single = None
    if installed("llamacpp"):
        from rc1.generation.llamacpp import LlamaCppSampler

        # bf16 only where the CPU has native bf16 kernels (elsewhere llama.cpp converts it on the fly)
        outtypes = ("f32",) if quick else ("f32", "f16") + (("bf16",) if cpu_bf16_supported() else ())
        for outtype in outtypes:
            gguf = served_gguf(ref, outtype)
            size = gguf.stat().st_size
            sampler = LlamaCppSampler(gguf, tok, [-1], threads=threads, max_rows=rollout_batch)
            try:
                for batch, ps in batches.items():
                    (gen, _, _), wall, cpu = _timed(lambda: sampler.decode_batch(
                        rule, ps, [new_tokens] * len(ps), [False] * len(ps), greedy=False, temperature=1.0,
                        top_p=1.0, generator=torch.Generator().manual_seed(0)))
                    add(f"llamacpp {outtype} b={batch}", "llamacpp", batch, gen, wall, cpu, size)
            finally:
                sampler.close()
            if outtype == "f32":
                n, wall, cpu = _llama_single(gguf, prompts[0], new_tokens, threads)
                rows.append({"what": "llama.cpp single stream (llama-cpp-python) f32", "backend": "llama.cpp direct",
                             "batch": 1, "tokens": n, "wall_s": wall, "cpu_s": cpu, "weight_bytes": size})
                single = rows[-1]
    bandwidth = memory_bandwidth_gbs(64 if quick else 256)
    for r in rows:
        r["tok_per_s"] = r["tokens"] / r["wall_s"]
        r["tok_per_cpu_s"] = r["tokens"] / max(r["cpu_s"], 1e-9)
    for r in rows:
        r["bandwidth_limit_tok_s"] = r["batch"] * bandwidth * 1e9 / r["weight_bytes"]
        r["vs_bandwidth_limit"] = r["tok_per_s"] / r["bandwidth_limit_tok_s"]
        r["vs_llamacpp_single"] = r["tok_per_s"] / single["tok_per_s"] if single else None
    speedup = {}
    for batch in batches:
        t = next(r for r in rows if r["backend"] == "torch" and r["batch"] == batch)
        for r in rows:
            if r["backend"] in ("llamacpp", "torch bf16") and r["batch"] == batch:
                speedup[r["what"]] = {"vs_torch_wall": r["tok_per_s"] / t["tok_per_s"],
                                      "vs_torch_cpu": r["tok_per_cpu_s"] / t["tok_per_cpu_s"]}
    print(f"memory bandwidth (measured, numpy copy): {bandwidth:.1f} GB/s; threads {threads}")
    print(f"{'what':46} {'tokens':>6} {'wall s':>7} {'tok/s':>7} {'tok/cpu-s':>9} {'x single':>8} {'x BW lim':>8}")
    for r in rows:
        vs = f"{r['vs_llamacpp_single']:8.2f}" if r["vs_llamacpp_single"] is not None else f"{'-':>8}"
        print(f"{r['what']:46} {r['tokens']:6d} {r['wall_s']:7.2f} {r['tok_per_s']:7.1f} {r['tok_per_cpu_s']:9.1f} "
              f"{vs} {r['vs_bandwidth_limit']:8.3f}")
    for what, s in speedup.items():
        print(f"{what}: {s['vs_torch_wall']:.2f}x torch (wall), {s['vs_torch_cpu']:.2f}x (cpu time)")
    return {"base": base, "new_tokens": new_tokens, "rollout_batch": rollout_batch, "threads": threads,
            "bandwidth_gbs": bandwidth, "bandwidth_source": "measured here: numpy copy of a large array, "
                                                           "(read + write bytes) / s, best of 3",
            "rows": rows, "vs_torch_fp32": speedup,
            "note": "wall times on a shared machine include the neighbours' load; cpu_s is this process's CPU time"}
