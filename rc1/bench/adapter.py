"""`rc1 bench adapter`: what one LoRA adapter swap into llama.cpp costs, for a model shape [--shape S] [--r R]
[--repeats N] [--base-dtype f16] [--threads T].

The step sync of `generation.rollout_backend: llamacpp` (rc1.generation.adapter_sync) for LoRA rank r on every
linear layer (q, k, v, o, gate, up, down) of the shape, each part through rc1's own code, medians of N:

  write   PEFT-named LoRA tensors (random fp32 values in PEFT's layouts; values do not change the timing) to an
          adapter GGUF: rc1.models.export.lora_gguf_tensors + write_lora_tensors, what write_lora_gguf runs on
          the live PEFT model
  load    llama_adapter_lora_init on the base already loaded in llama.cpp (LlamaCppSampler.set_lora)
  set     llama_set_adapters_lora on its context (set_lora, which then clears the KV cache and frees the
          previous adapter). llama.cpp only records the adapter there and re-plans its compute graph at the
          next decode, so a one-token decode right after each swap is timed beside a second one: the
          difference is that deferred cost, within the noise of a decode

The base: smollm2-135m-instruct is the embedded SmolLM2's real weights as rc1 serves them
(rc1.generation.serve.served_gguf). qwen3-4b has no weights here, so its base is synthesised with the `gguf`
package, as is qwen3-tiny's (the 4B path's test stand-in): the shape's tensors with zero matrices and unit
norms, and the embedded SmolLM2 GGUF's tokenizer, hence its vocabulary (49152) instead of the shape's; the
embedding is not adapted, so the adapter is the same. It is written to a temporary directory (refused when the
disk would keep under FREE_MARGIN free), loaded with mmap like any served GGUF, and deleted afterwards.
On a shared machine every wall time includes the neighbours' load.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rc1.runtime.errors import ConfigError

GB = 1e9
FREE_MARGIN = 12 * 2**30           # disk left free after the synthesised base and the adapters are written
REAL_BASES = {"smollm2-135m-instruct": "embedded:smollm2-135m-instruct"}  # shapes whose real weights are here
CONTEXT_TOKENS = 256               # the context the swaps and decodes run in: one sequence (the smallest rc1 makes)
SEED = 0


def _ms(seconds: list[float]) -> float:
    return 1000 * statistics.median(seconds)


def _rss_gb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / GB


# ----------------------------------------------------------------------------- the adapter
def peft_lora_tensors(shape, r: int, targets, seed: int = SEED) -> dict:
    """{PEFT parameter name: random fp32 tensor} of LoRA rank r on `targets` of every layer of `shape`: the names
    (`base_model.model.model.layers.<i>.self_attn.q_proj.lora_A.default.weight`) and layouts (A [r, in],
    B [out, r]) a PEFT model's named_parameters() gives."""
    import torch

    g = torch.Generator().manual_seed(seed)
    linear = shape.linear_shapes()
    out = {}
    for i in range(shape.layers):
        for module in targets:
            d_in, d_out = linear[module]
            parent = "mlp" if module in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            prefix = f"base_model.model.model.layers.{i}.{parent}.{module}"
            out[f"{prefix}.lora_A.default.weight"] = torch.randn(r, d_in, generator=g) / d_in ** 0.5
            out[f"{prefix}.lora_B.default.weight"] = torch.randn(d_out, r, generator=g) * 1e-3
    return out


# ----------------------------------------------------------------------------- a synthesised base
def synth_plan(shape, dtype: str, vocab: int) -> list[tuple[str, tuple[int, ...], bool]]:
    """(GGUF tensor name, numpy shape, is a norm) of every tensor of `shape`'s base GGUF with `vocab` tokens."""
    import gguf

    T, name = gguf.MODEL_TENSOR, lambda t, i=None: gguf.TENSOR_NAMES[t].format(bid=i) + ".weight"
    linear = {"q_proj": T.ATTN_Q, "k_proj": T.ATTN_K, "v_proj": T.ATTN_V, "o_proj": T.ATTN_OUT,
              "gate_proj": T.FFN_GATE, "up_proj": T.FFN_UP, "down_proj": T.FFN_DOWN}
    plan = [(name(T.TOKEN_EMBD), (vocab, shape.hidden), False), (name(T.OUTPUT_NORM), (shape.hidden,), True)]
    if not shape.tied:
        plan.append((name(T.OUTPUT), (vocab, shape.hidden), False))
    for i in range(shape.layers):
        plan += [(name(T.ATTN_NORM, i), (shape.hidden,), True), (name(T.FFN_NORM, i), (shape.hidden,), True)]
        if shape.qk_norm:
            plan += [(name(T.ATTN_Q_NORM, i), (shape.head_dim,), True),
                     (name(T.ATTN_K_NORM, i), (shape.head_dim,), True)]
        plan += [(name(linear[m], i), (d_out, d_in), False) for m, (d_in, d_out) in shape.linear_shapes().items()]
    return plan


def _plan_bytes(plan, dtype: str) -> int:
    import math

    return sum(math.prod(s) * (4 if norm or dtype == "f32" else 2) for _, s, norm in plan)


def write_synth_base(path: Path, shape, dtype: str, tokenizer_gguf: Path) -> dict:
    """A llama.cpp GGUF of `shape` (qwen3 with q/k norms, else llama) with zero matrices, unit norms and the
    tokenizer of `tokenizer_gguf`; the facts of what was written."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(tokenizer_gguf))
    tokenizer = {k: f for k, f in reader.fields.items() if k.startswith("tokenizer.")}
    vocab = len(tokenizer["tokenizer.ggml.tokens"].data)
    arch = "qwen3" if shape.qk_norm else "llama"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"rc1 synthesised {shape.name} (zero weights)")
    w.add_context_length(4096)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.intermediate)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    if arch == "llama":
        w.add_rope_dimension_count(shape.head_dim)
    w.add_vocab_size(vocab)
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "bf16": gguf.LlamaFileType.MOSTLY_BF16}[dtype])
    for key, field in tokenizer.items():
        vtype = field.types[0]
        w.add_key_value(key, field.contents(), vtype, field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None)
    zeros: dict[tuple, np.ndarray] = {}   # one array per shape, shared by every layer's tensor (values never differ)
    for name, shp, norm in synth_plan(shape, dtype, vocab):
        if norm:
            w.add_tensor(name, np.ones(shp, dtype=np.float32))
        elif dtype == "bf16":  # bf16 zero is two zero bytes; the writer takes raw bytes for a raw type
            arr = zeros.setdefault(shp, np.zeros((shp[0], 2 * shp[1]), dtype=np.uint8))
            w.add_tensor(name, arr, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, zeros.setdefault(shp, np.zeros(shp, dtype=np.float32 if dtype == "f32" else np.float16)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"arch": arch, "vocab": vocab, "tokenizer_from": tokenizer_gguf.name}


def _check_disk(where: Path, need: int) -> None:
    free = shutil.disk_usage(where).free
    if free < need:
        raise ConfigError(f"rc1 bench adapter: {free / GB:.1f} GB free in {where}, needs {need / GB:.1f} GB (the "
                          f"synthesised base and adapters, and {FREE_MARGIN / GB:.1f} GB left free); free disk "
                          f"or set TMPDIR to a larger disk")


# ----------------------------------------------------------------------------- the bench
def run(ws=None, quick: bool = False, *, shape: str = "qwen3-4b", r: int = 16, repeats: int = 5,
        base_dtype: str = "f16", threads: int | None = None) -> dict:
    from rc1.config.schema import LORA_MODULES
    from rc1.generation.serve import GGUF_TYPES   # what rc1 serves a base in
    from rc1.models.shapes import SHAPES

    if shape not in SHAPES:
        raise ConfigError(f"--shape {shape!r}: unknown; known: {', '.join(SHAPES)}")
    if r < 1:
        raise ConfigError(f"--r {r}: the LoRA rank must be at least 1")
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: must be at least 1")
    if base_dtype not in GGUF_TYPES:
        raise ConfigError(f"--base-dtype {base_dtype!r}: expected one of {', '.join(GGUF_TYPES)}")
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"rc1 bench adapter needs llama-cpp-python (pip install llama-cpp-python): {exc}")
    if quick:
        repeats = min(repeats, 2)
    full = SHAPES[shape]
    targets = list(LORA_MODULES)
    alpha = 2.0 * r
    n_head, n_kv = full.heads, full.kv_heads
    rss_start = _rss_gb()
    with tempfile.TemporaryDirectory(prefix="rc1-bench-adapter-") as tmp:
        tmp = Path(tmp)
        base = _base(tmp, full, shape, base_dtype, r, targets)
        print(f"adapter bench: {shape}, LoRA r={r} on {','.join(targets)} ({full.layers} layers); base "
              f"{base['source']} {base['dtype']} ({base['gguf_bytes'] / GB:.2f} GB)")

        # 1. the adapter GGUF written from PEFT-named tensors, as each step's sync writes it
        from rc1.models.export import lora_gguf_tensors, write_lora_tensors

        peft = peft_lora_tensors(full, r, targets)
        params = sum(t.numel() for t in peft.values())
        paths = [tmp / "adapter_0.gguf", tmp / "adapter_1.gguf"]  # alternating, as AdapterSyncSampler does
        write_s = []
        for i in range(repeats):
            t0 = time.perf_counter()
            tensors, rank = lora_gguf_tensors(peft.items(), arch=base["arch"], n_head=n_head, n_kv=n_kv)
            write_lora_tensors(tensors, alpha, base["arch"], paths[i % 2])
            write_s.append(time.perf_counter() - t0)
            del tensors
        adapter_bytes = paths[0].stat().st_size
        del peft

        # 2. the base loaded once (mmap), a context made, then the swaps
        from rc1.generation.llamacpp import LlamaCppSampler
        from rc1.runtime.device import peak_memory_mb

        t0 = time.perf_counter()
        sampler = LlamaCppSampler(base["path"], None, [], threads=threads, max_rows=1)
        load_s = time.perf_counter() - t0
        rss_loaded = _rss_gb()
        try:
            t0 = time.perf_counter()
            sampler._ensure(2, 1)   # the sampler's own context, as its first decode_batch makes it
            context_s = time.perf_counter() - t0

            def decode() -> float:
                """One one-token decode in the sampler's context (what decode_batch runs per step), seconds."""
                sampler._ensure(2, 1)  # clears the KV cache
                t = time.perf_counter()
                sampler._decode([(1, 0, 0, True)])
                return time.perf_counter() - t

            base_first = decode()   # pages the mmap'd weights in and plans the graph
            base_steady = [decode() for _ in range(repeats)]
            rss_decoded = _rss_gb()
            swaps, after_swap, steady = [], [], []
            for i in range(repeats):
                swaps.append(sampler.set_lora(paths[i % 2]))
                after_swap.append(decode())
                steady.append(decode())
            off = sampler.set_lora(None)   # the last adapter freed
            peak_rss = peak_memory_mb("cpu") * 2**20 / GB
        finally:
            sampler.close()

    swap_total = [s.load_s + s.set_s + s.clear_s + s.free_s for s in swaps]
    swap = {"load_ms": _ms([s.load_s for s in swaps]), "set_ms": _ms([s.set_s for s in swaps]),
            "clear_kv_ms": _ms([s.clear_s for s in swaps]),
            "free_previous_ms": _ms([s.free_s for s in swaps[1:]] + [off.free_s]),
            "total_ms": _ms(swap_total), "load_ms_all": [round(1000 * s.load_s, 3) for s in swaps],
            "set_ms_all": [round(1000 * s.set_s, 4) for s in swaps]}
    decode_ms = {"threads": sampler.threads, "context_tokens": CONTEXT_TOKENS, "base_first": 1000 * base_first,
                 "base": _ms(base_steady), "first_after_swap": _ms(after_swap), "second_after_swap": _ms(steady),
                 "replan_after_swap_est": _ms(after_swap) - _ms(steady)}
    adapter = {"params": params, "bytes": adapter_bytes, "rank": rank, "alpha": alpha,
               "tensors": 2 * full.layers * len(targets), "dtype": "f32", "write_s": statistics.median(write_s), "write_s_all": [round(s, 4) for s in write_s]}
    sync_s = adapter["write_s"] + swap["total_ms"] / 1000
    memory = {"rss_start_gb": rss_start, "rss_after_base_load_gb": rss_loaded, "rss_after_decodes_gb": rss_decoded,
              "peak_rss_gb": peak_rss,
              "note": "process RSS (psutil) and its peak (ru_maxrss); the mmap'd base's file pages count in it once "
                      "mapped in (llama.cpp prefetches them at load); the peak includes the PEFT-layout tensors "
                      "and, the first time, building a served GGUF"}
    from rc1.bench.distributed import machine

    out = {"area": "adapter", "shape": full.to_dict(), "r": r, "targets": targets, "repeats": repeats,
           "adapter": adapter, "base": {k: v for k, v in base.items() if k != "path"} | {"load_s": load_s,
                                                                                      "context_s": context_s},
           "swap": swap, "decode_ms": decode_ms, "sync_s": sync_s, "memory": memory,
           "measured": f"medians of {repeats}: the adapter GGUF written from PEFT-named fp32 tensors "
                       f"(rc1.models.export.lora_gguf_tensors + write_lora_tensors); llama_adapter_lora_init (load) "
                       f"and llama_set_adapters_lora (set) through LlamaCppSampler.set_lora on the base loaded once "
                       f"with mmap, a {CONTEXT_TOKENS}-token context; one-token decodes before and after each swap",
           "synthesised": base["synthesised"], "machine": machine() | {"load_avg_1m": os.getloadavg()[0]},
           "note": "wall times; on a shared machine they include the neighbours' load"}
    _print(out)
    return out


def _base(tmp: Path, full, shape: str, dtype: str, r: int, targets) -> dict:
    """The base GGUF the swaps go onto: the real served weights where they exist, else synthesised in `tmp`."""
    if shape in REAL_BASES:
        from rc1.config.schema import TrainConfig
        from rc1.generation.serve import base_ref, served_gguf

        ref = base_ref(TrainConfig(model={"base": REAL_BASES[shape]}))
        path = served_gguf(ref, dtype)
        return {"path": path, "source": f"real weights ({REAL_BASES[shape]}, rc1's served GGUF)", "dtype": dtype,
                "arch": ref.architecture, "vocab": full.vocab, "gguf_bytes": path.stat().st_size, "synthesised": None}
    from rc1.models.embedded import gguf_path

    tokenizer_gguf = gguf_path()
    # sized with the shape's own vocabulary: at least the copied tokenizer's for the shapes synthesised here
    need = _plan_bytes(synth_plan(full, dtype, full.vocab), dtype) + 2 * 4 * full.lora_params(r, targets) + FREE_MARGIN
    _check_disk(tmp, need)
    path = tmp / f"synth-{shape}-{dtype}.gguf"
    t0 = time.perf_counter()
    facts = write_synth_base(path, full, dtype, tokenizer_gguf)
    write_s = time.perf_counter() - t0
    vocab_note = ("" if facts["vocab"] == full.vocab else
                  f"; vocabulary {facts['vocab']} (the SmolLM2 tokenizer's) instead of {full.vocab}: the embedding "
                  f"is not adapted, so the adapter is the same")
    return {"path": path, "source": "synthesised", "dtype": dtype, "arch": facts["arch"], "vocab": facts["vocab"],
            "gguf_bytes": path.stat().st_size, "write_s": write_s,
            "synthesised": f"the base GGUF: {full.name}'s tensor shapes ({facts['arch']}), zero {dtype} matrices and "
                           f"unit f32 norms, tokenizer metadata copied from {facts['tokenizer_from']}{vocab_note}; "
                           f"written to a temporary directory and deleted. The LoRA values are random"}


def _print(out: dict) -> None:
    a, b, s, d, m = out["adapter"], out["base"], out["swap"], out["decode_ms"], out["memory"]
    print(f"adapter  {a['params'] / 1e6:.2f}M params, {a['bytes'] / 1e6:.1f} MB (f32, {a['tensors']} tensors); "
          f"write {a['write_s']:.3f} s")
    print(f"swap     load {s['load_ms']:.1f} ms, set {s['set_ms']:.3f} ms, clear KV {s['clear_kv_ms']:.3f} ms, "
          f"free previous {s['free_previous_ms']:.2f} ms; total {s['total_ms']:.1f} ms")
    print(f"decode   1 token, {d['threads']} threads: base {d['base']:.1f} ms (first {d['base_first']:.1f}); "
          f"first after a swap {d['first_after_swap']:.1f} ms, second {d['second_after_swap']:.1f} ms "
          f"(deferred re-plan ~ {d['replan_after_swap_est']:.1f} ms)")
    print(f"sync     {out['sync_s']:.3f} s per step (write + swap)")
    print(f"base     {b['source']} {b['dtype']}, {b['gguf_bytes'] / GB:.2f} GB, vocab {b['vocab']}; load (mmap) "
          f"{b['load_s']:.2f} s (the file in the page cache), context {b['context_s']:.2f} s"
          + (f"; synthesised in {b['write_s']:.1f} s" if "write_s" in b else ""))
    print(f"memory   RSS after base load {m['rss_after_base_load_gb']:.2f} GB, after decodes "
          f"{m['rss_after_decodes_gb']:.2f} GB, peak {m['peak_rss_gb']:.2f} GB")
    print(f"measured: {out['measured']}")
    if out["synthesised"]:
        print(f"synthesised: {out['synthesised']}")
