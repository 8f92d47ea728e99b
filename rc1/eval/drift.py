"""How far the trained policy drifted from its reference: exact KL on fixed prompts, with a bootstrap CI.

`rc1 drift --config P [--seed-index I]` (a pipeline stage between training and the training_done gate)
measures each seed run's `latest` checkpoint:

  1. prompts: N fixed prompts (gates.training_done.drift_prompts), a seeded draw from the dev split and the
     held-out set (the fitted held-out set with a difficulty fit, else the shadow set); labels unused;
  2. K answers per prompt (drift_samples) sampled from the TRAINED policy at the training temperature and
     top-p, first model turn only, on the configured backend (rc1.generation: llama.cpp serving the
     checkpoint's weights once it agreed with torch on them, else torch; the eval reuses that GGUF);
  3. at every generated position, the exact KL(pi || ref) over the whole vocabulary between the two models'
     sampling distributions (softmax(logits / temperature); full support, so the KL is finite even where a
     top-p nucleus would cut one side), in fp32;
  4. per-token KL (token-weighted: sum of KL over sum of tokens, what the trainer's `kl` estimates) and
     per-sequence KL (the sum over an answer's tokens, mean over answers), each with a prompt-level
     bootstrap CI (scipy.stats.bootstrap, BCa; the K answers of a prompt resampled together).

The reference is the base model (for a LoRA/QLoRA checkpoint: the same model with its adapter disabled).
Unlike the training stream's k3 over the last few steps, this measures the policy that training produced,
the same way for every engine and strategy (a TRL run with beta = 0 logs kl 0.0 and is measured all the same).

Writes reports/drift/seed_<i>.json (+ sha256 sidecar, artifact manifest) naming the checkpoint's manifest
sha256, so the gate can tell a report of another checkpoint.
"""

from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

log = logging.getLogger("rc1.eval")

REPORT_VERSION = 1
DRIFT_DIR = "reports/drift"
CONFIDENCE = 0.95
RESAMPLES = 2000
BOOTSTRAP_SEED = 20251127


def drift_report_path(seed_index: int) -> str:
    return f"{DRIFT_DIR}/seed_{seed_index}.json"


def drift_prompts(ws: Workspace, cfg: "TrainConfig", n: int) -> list[dict]:
    """`n` fixed prompts: a seeded draw from the dev split and the held-out set, one per distinct prompt text.
    Refuses (ConfigError) when the files hold fewer than `n`."""
    from rc1.eval.splits import dev_set, fitted_set, heldout_set

    sets = [dev_set(ws, cfg)]
    sets.append(fitted_set(ws, cfg) if cfg.difficulty_fit.enable else heldout_set(ws, cfg, None))
    seen: dict[str, dict] = {}
    for s in sets:
        for it in (s.items if s is not None else []):
            key = "\n".join(str(m.get("content", "")) for m in it["messages"])
            seen.setdefault(key, it)
    pool = sorted(seen.values(), key=lambda it: str(it["id"]))
    if len(pool) < n:
        where = ", ".join(s.path for s in sets if s is not None)
        raise ConfigError(f"gates.training_done.drift_prompts {n}: the dev and held-out files ({where}) hold only "
                          f"{len(pool)} distinct prompts")
    random.Random(f"drift:{cfg.seed_list[0]}").shuffle(pool)  # the same prompts for every seed run of the config
    return pool[:n]


def _ratio(kl, tokens, axis=-1):
    return kl.sum(axis=axis) / tokens.sum(axis=axis)


def _mean(x, axis=-1):
    return x.mean(axis=axis)


def bootstrap_ci(per_prompt_kl, per_prompt_tokens, per_prompt_seq, confidence: float = CONFIDENCE) -> dict:
    """Point estimates and prompt-level bootstrap CIs of the per-token and per-sequence KL.

    per_prompt_kl[i]: KL summed over prompt i's answers' tokens; per_prompt_tokens[i]: those tokens;
    per_prompt_seq[i]: the mean sequence KL of prompt i's answers."""
    import numpy as np
    from scipy.stats import bootstrap

    kl = np.asarray(per_prompt_kl, dtype=float)
    tok = np.asarray(per_prompt_tokens, dtype=float)
    seq = np.asarray(per_prompt_seq, dtype=float)
    out = {}
    for name, data, stat in (("per_token", (kl, tok), _ratio), ("per_sequence", (seq,), _mean)):
        point = float(stat(*data))
        ci = None
        if len(kl) >= 2 and np.ptp(data[0]) > 0:
            for method in ("BCa", "percentile"):
                r = bootstrap(data, stat, paired=True, vectorized=True, n_resamples=RESAMPLES,
                              confidence_level=confidence, method=method, rng=np.random.default_rng(BOOTSTRAP_SEED))
                lo, hi = float(r.confidence_interval.low), float(r.confidence_interval.high)
                if np.isfinite(lo) and np.isfinite(hi):
                    ci = [lo, hi]
                    break
        elif len(kl) >= 2:
            ci = [point, point]  # every prompt measured the same: no sampling spread
        out[name] = {"mean": point, "ci": ci, "confidence": confidence,
                     "ci_method": "prompt-level bootstrap (scipy.stats.bootstrap), BCa"}
    return out


PART_OVERHEAD = 16  # positions: what one more forward of a batch's answers costs beyond its rows (a cache copy, a call)


def length_parts(lengths: list[int], overhead: int = PART_OVERHEAD) -> list[tuple[int, int]]:
    """Consecutive parts [(a, b), ...] of rows with ascending `lengths` that minimise the positions a forward
    computes when each part is right-padded to its own longest row: sum of rows x longest, plus `overhead` a part
    (dynamic programming over the cut points; a batch of 32 rows is 528 cases)."""
    n = len(lengths)
    best, cut = [0.0] + [math.inf] * n, [0] * (n + 1)
    for b in range(1, n + 1):
        for a in range(b):
            cost = best[a] + (b - a) * lengths[b - 1] + overhead
            if cost < best[b]:
                best[b], cut[b] = cost, a
    parts, b = [], n
    while b:
        parts.append((cut[b], b))
        b = cut[b]
    return parts[::-1]


def _cache_rows(cache, rows):
    """A KV cache of `rows` of `cache`, which is left as it is (the next part reads it too)."""
    import copy

    part = copy.copy(cache)
    part.layers = [copy.copy(layer) for layer in cache.layers]
    part.batch_select_indices(rows)
    return part


def exact_kl(policy, ref, samples: list, *, temperature: float, device, batch_size: int = 32,
             ref_ctx: Callable | None = None, part_overhead: int = PART_OVERHEAD) -> list[list[float]]:
    """Per generated token, KL(pi || ref) over the vocabulary between softmax(logits / temperature) of the two
    models, for each sample (input_ids, action_mask). `ref_ctx`: a context manager factory under which `ref`
    is the reference (a peft model with its adapter disabled); `ref` may then be `policy` itself.

    A sample's prompt is its ids before the first generated token (the last prompt token's hidden state
    predicts that token, so it is read with the answer). Whole prompts' answers go together, up to
    `batch_size` answers a batch (prompts ordered by their longest answer: less padding): each model reads the
    batch's distinct prompts in one prefill (rc1.envs.rollout.prefill: a prompt read once for its K answers,
    the prefix all prompts share read once), then the batch's answers from that cache, shortest first, in the
    parts `length_parts` cuts them into (each right-padded to its own longest: a prompt's answers stopped after
    a few tokens are not padded to another's 48). The vocabulary projection runs only at the generated
    positions, in fp32."""
    import contextlib

    import torch

    from rc1.envs.rollout import prefill
    from rc1.envs.sampling import sampling_logits
    from rc1.models.loader import causal_lm
    from rc1.runtime.hf_compat import with_cache

    policy.eval()
    ref.eval()
    groups: dict[tuple, list[int]] = {}
    for i, (ids, mask) in enumerate(samples):
        first = next((t for t, m in enumerate(mask) if m), len(ids))
        if first < 2:
            raise ValueError(f"sample {i}: no prompt token before the one that predicts its first generated token")
        groups.setdefault(tuple(ids[:first - 1]), []).append(i)
    order = sorted(groups, key=lambda pr: max(len(samples[r][0]) for r in groups[pr]) - len(pr))
    batches: list[list[tuple[tuple, int]]] = [[]]
    for pr in order:
        if batches[-1] and len(batches[-1]) + len(groups[pr]) > batch_size:
            batches.append([])
        batches[-1] += [(pr, r) for r in groups[pr]]

    def logprobs(model, ctx, prompts, cont, att, sel, parts):
        lm = causal_lm(model)
        with ctx, torch.no_grad():
            cache, p_att, p_pos, _ = prefill(lm, prompts, pad_id=0)
            hidden = []
            for a, b in parts:  # rows a..b-1, shortest answers first: each part padded to its own longest
                w = int(att[b - 1].sum())
                part = cache if (a, b) == (0, len(prompts)) else _cache_rows(cache, torch.arange(a, b, device=device))
                pos = p_pos[a:b, -1:] + 1 + torch.arange(w, device=device)
                h = lm.get_decoder()(input_ids=cont[a:b, :w], attention_mask=torch.cat([p_att[a:b], att[a:b, :w]], 1),
                                     position_ids=pos, use_cache=True, **with_cache(part)).last_hidden_state
                hidden.append(h[sel[a:b, :w]])
            h = torch.cat(hidden)
            head = lm.get_output_embeddings()
            logits = torch.nn.functional.linear(h.float(), head.weight.float(),
                                                None if head.bias is None else head.bias.float())
        return torch.log_softmax(sampling_logits(logits, temperature), dim=-1)

    out: dict[int, list[float]] = {}
    for batch in batches:
        batch.sort(key=lambda row: len(samples[row[1]][0]) - len(row[0]))
        parts = length_parts([len(samples[r][0]) - len(pr) for pr, r in batch], part_overhead)
        prompts = [pr for pr, _ in batch]
        width = max(len(samples[r][0]) - len(pr) for pr, r in batch)
        cont = torch.zeros((len(batch), width), dtype=torch.long)
        att = torch.zeros((len(batch), width), dtype=torch.long)
        sel = torch.zeros((len(batch), width), dtype=torch.bool)
        for k, (pr, r) in enumerate(batch):
            ids, mask = samples[r]
            p = len(pr)
            cont[k, :len(ids) - p] = torch.tensor(ids[p:])
            att[k, :len(ids) - p] = 1
            # the hidden state at position t predicts token t + 1
            nxt = torch.tensor(mask[p + 1:len(ids)], dtype=torch.bool)
            sel[k, :len(nxt)] = nxt
        cont, att, sel = cont.to(device), att.to(device), sel.to(device)
        lp = logprobs(policy, contextlib.nullcontext(), prompts, cont, att, sel, parts)
        lq = logprobs(ref, ref_ctx() if ref_ctx is not None else contextlib.nullcontext(), prompts, cont, att, sel,
                      parts)
        per_tok = (lp.exp() * (lp - lq)).sum(-1).clamp(min=0.0).cpu().tolist()
        i = 0
        for (_, r), c in zip(batch, sel.sum(-1).cpu().tolist()):
            out[r] = per_tok[i:i + c]
            i += c
    return [out[i] for i in range(len(samples))]


def measure_drift(ws: Workspace, cfg: "TrainConfig", seed_index: int, *, n_prompts: int, samples: int,
                  bound: float | None, confidence: float = CONFIDENCE, progress: Callable[[str], None] | None = None) -> tuple[Path, dict]:
    """Measure seed run `seed_index`'s latest checkpoint (see the module docstring); (report path, report)."""
    import torch

    from rc1.eval.harness import checkpoint_ref
    from rc1.eval.loading import load_base, load_checkpoint_model, resolve_checkpoint, torch_setup
    from rc1.generation import sample_episodes
    from rc1.models.loader import is_peft
    from rc1.runtime.checkpoint import MANIFEST_FILE, META_STEP, read_meta

    run = cfg.seed_run(seed_index)
    ckpt = resolve_checkpoint(ws, cfg, "latest", run_dir=run.checkpoint_dir)
    prompts = drift_prompts(ws, cfg, n_prompts)
    device, _ = torch_setup(cfg)
    dtype = torch.float32  # exact KL in fp32 whatever the training precision
    t0 = time.perf_counter()
    policy, _ = load_checkpoint_model(cfg, ckpt, device, dtype)
    ref_ctx = None
    if is_peft(policy):
        ref, ref_ctx = policy, policy.disable_adapter  # a LoRA/QLoRA run: the base is the model without its adapter
    else:
        ref, _ = load_base(cfg, device, dtype)
    load_s = time.perf_counter() - t0
    temperature, top_p = cfg.model.temperature, cfg.model.top_p
    if temperature <= 0:
        raise ConfigError("model.temperature 0: the drift bound samples at the training temperature, which must be > 0")
    # the answers come from the configured backend (llama.cpp serves the checkpoint's weights after its check
    # against torch, else torch); the KL below is computed by torch on those tokens
    gen = sample_episodes(cfg, checkpoint_ref(cfg, ckpt)[0], prompts, greedy=False, n_per_item=samples,
                          seed=run.seed, max_turns=1, batch_size=32, device=device, dtype=dtype)
    episodes, sample_s = gen.episodes, gen.seconds
    if progress:
        progress(f"sampled {len(episodes)} answers with {gen.backend} ({sample_s:.0f} s)")
    pairs = []
    for ep in episodes:
        first = ep.training_samples()[0]
        pairs.append((list(first.input_ids), list(first.action_mask)))
    t2 = time.perf_counter()
    per_token = exact_kl(policy, ref, pairs, temperature=temperature, device=device, ref_ctx=ref_ctx)
    kl_s = time.perf_counter() - t2
    kl_sum, tokens, seq_mean = [], [], []
    for p in range(len(prompts)):
        rows = per_token[p * samples:(p + 1) * samples]
        kl_sum.append(sum(sum(r) for r in rows))
        tokens.append(sum(len(r) for r in rows))
        seq_mean.append(sum(sum(r) for r in rows) / len(rows))
    if sum(tokens) == 0:
        raise ConfigError(f"{ws.rel(ckpt)}: the policy generated no tokens for the drift prompts")
    keep = [i for i, t in enumerate(tokens) if t > 0]
    stats = bootstrap_ci([kl_sum[i] for i in keep], [tokens[i] for i in keep], [seq_mean[i] for i in keep],
                         confidence)
    flat = sorted(x for r in per_token for x in r)
    report = {
        "kind": "drift", "version": REPORT_VERSION, "seed_index": seed_index, "seed": run.seed,
        "checkpoint": {"path": ws.rel(ckpt), "step": int(read_meta(ckpt)[META_STEP]),
                       "manifest_sha256": sha256_file(ckpt / MANIFEST_FILE)},
        "reference": "the base model with the adapter disabled" if ref_ctx is not None else f"base {cfg.model.base}",
        "units": "nats; KL(pi || ref) of softmax(logits / temperature), exact over the vocabulary",
        "prompts": {"n": len(prompts), "with_tokens": len(keep),
                    "ids_sha256": sha256_json(sorted(str(p["id"]) for p in prompts))},
        "samples_per_prompt": samples, "temperature": temperature, "top_p": top_p,
        "max_new_tokens": cfg.model.max_new_tokens, "tokens": int(sum(tokens)),
        **stats,
        "per_token_quantiles": {q: flat[min(len(flat) - 1, int(q_ * len(flat)))]
                                for q, q_ in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        "bound": bound, "seconds": {"load": round(load_s, 2), "sample": round(sample_s, 2), "kl": round(kl_s, 2)},
        "backend": gen.backend, "generation": gen.describe(),
    }
    path = ws.path(drift_report_path(seed_index))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, report)
    register_artifact(ws, path, "drift", seed_index=seed_index)
    return path, report
