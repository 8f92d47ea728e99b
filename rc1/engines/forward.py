"""The forward maths of the pure PyTorch engine: per-token log-probs (and entropy, hidden states) of a causal LM.

`token_logprobs` is what `PurePTEngine.forward` computes once it has picked the model (policy or reference)
and the precision context:

- Only the positions that are scored run through the vocabulary projection (the generated tokens: prompts
  are long and completions short, so most of the lm_head work and its [tokens x vocab] memory is skipped).
- Under the sampling distribution: softmax(logits / temperature) over the top-p nucleus, computed by
  rc1.envs.sampling as the sampler does (a scored token outside this model's nucleus stays in the support).
- The head runs in fp32 on the selected rows (TRL's cast_lm_head_to_fp32), in checkpointed chunks above
  rc1.models.memory.logits_chunk_tokens (`project`).
- Rows that share their prompt (a GRPO group) compute it once (`shared_prefix_plan`): packed into one sequence
  per group, the prompt then each completion, under a block attention mask (`packed_prefix_hidden`), or, where
  packing does not apply, through a KV cache (`shared_prefix_hidden`). Same values and gradients as the plain
  forward.

The model objects here are transformers / peft modules: the few attribute probes below are on them.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager

from rc1.engines.contract import ForwardOutput
from rc1.envs.sampling import sampling_logits
from rc1.models.loader import causal_lm
from rc1.runtime.hf_compat import cache_of, with_cache


def activation_checkpointing(lm) -> bool:
    """True when `lm` recomputes activations in backward now (training mode with checkpointing on): its
    layers then refuse a KV cache."""
    # transformers >= 5 names it is_activation_checkpointing, earlier versions is_gradient_checkpointing
    flag = getattr(type(lm), "is_activation_checkpointing", None)
    on = lm.is_activation_checkpointing if flag is not None else getattr(lm, "is_gradient_checkpointing", False)
    return bool(lm.training and on)


def token_logprobs(model, input_ids, attention_mask, *, positions=None, hidden: bool = False,
                   entropy: bool | str = False, temperature: float = 1.0, top_p: float = 1.0,
                   precision: ContextManager[Any] | None = None) -> ForwardOutput:
    """Per-token log-probs of input_ids[:, 1:] (shape [B, T-1]) and optionally entropy / hidden states.

    `positions` ([B, T-1], the shifted action mask): the vocabulary projection runs only where it is
    non-zero and log-probs / entropy are 0 elsewhere. `entropy`: True (no gradient) or "grad" (an entropy
    bonus). `precision`: the context the model runs under (the engine's autocast).
    """
    import torch

    lm = causal_lm(model)
    with precision or contextlib.nullcontext():
        sel = (positions > 0) if positions is not None else torch.ones(
            (input_ids.shape[0], input_ids.shape[1] - 1), dtype=torch.bool, device=input_ids.device)
        # the shared-prompt path needs a KV cache, which activation checkpointing drops in training mode
        plan = None if hidden or activation_checkpointing(lm) else shared_prefix_plan(input_ids, attention_mask, sel)
        if plan is not None:
            packed = packs(lm, plan, attention_mask)
            h_sel = (packed_prefix_hidden if packed else shared_prefix_hidden)(lm, input_ids, attention_mask, sel,
                                                                              plan)
            h = None
        else:
            out = lm.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            h = out.last_hidden_state[:, :-1]
            h_sel = h[sel]
        targets = input_ids[:, 1:][sel]
        tok_logp, tok_ent = project(lm, h_sel, targets, entropy, temperature, top_p)
    logp = torch.zeros(sel.shape, dtype=torch.float32, device=input_ids.device).masked_scatter(sel, tok_logp)
    ent = torch.zeros_like(logp).masked_scatter(sel, tok_ent) if entropy else None
    return ForwardOutput(logp, ent, h.float() if hidden else None)


def project(lm, h_sel, targets, entropy: bool | str, temperature: float, top_p: float):
    """Log-prob (and entropy) of each selected token from its hidden state [N, H].

    The fp32 [N x vocab] logits and their softmax copies are the largest tensors of a step with
    long completions (4096 generated tokens x 16 rows x Qwen3's 151,936 entries is 40 GB per copy).
    Above `logits_chunk_tokens(vocab)` tokens the projection runs in chunks, each under activation
    checkpointing: a chunk's logits live only while that chunk is computed (forward) or recomputed
    (backward), and only its [chunk] log-probs are kept. Same values per token as one projection.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    from rc1.models.memory import logits_chunk_tokens

    head = lm.get_output_embeddings()

    def project_chunk(h, t):
        # the head in fp32 on the selected rows (TRL's cast_lm_head_to_fp32): log-probs, KL and IS weights
        # from bf16 logits would carry bf16 rounding (the master weights are fp32 already; h is cast)
        with torch.autocast(device_type=h.device.type, enabled=False):
            logits = torch.nn.functional.linear(h.float(), head.weight.float(),
                                                None if head.bias is None else head.bias.float())
        logits = sampling_logits(logits, temperature, top_p, keep=t)
        logz = torch.logsumexp(logits, dim=-1)
        lp = logits.gather(-1, t.unsqueeze(-1)).squeeze(-1) - logz
        if not entropy:
            return lp, torch.zeros_like(lp)
        with torch.no_grad() if entropy != "grad" else contextlib.nullcontext():  # "grad": an entropy bonus
            probs = torch.softmax(logits, dim=-1)
            finite = logits.clamp(min=torch.finfo(logits.dtype).min)  # -inf outside the nucleus: p = 0 there
            return lp, logz - (probs * finite).sum(-1)

    chunk = logits_chunk_tokens(head.weight.shape[0])
    if h_sel.shape[0] <= chunk:
        return project_chunk(h_sel, targets)
    parts = [checkpoint(project_chunk, h_sel[i:i + chunk], targets[i:i + chunk], use_reentrant=False)
             if torch.is_grad_enabled() else project_chunk(h_sel[i:i + chunk], targets[i:i + chunk])
             for i in range(0, h_sel.shape[0], chunk)]
    return torch.cat([lp for lp, _ in parts]), torch.cat([e for _, e in parts])


def shared_prefix_plan(input_ids, attention_mask, sel):
    """(first, groups, row_group) when consecutive rows share their prompt, else None.

    first[i]: the first position whose hidden state row i needs (its first selected log-prob);
    the tokens before it are its prompt. groups: (first row, prompt length) per run of consecutive
    rows with identical prompts; row_group[i]: row i's group. None when no prompt is shared (or a
    row selects nothing / position 0), so the plain forward runs.
    """
    if sel.shape[0] < 2 or not bool(sel.any(1).all()):
        return None
    first = sel.float().argmax(1)
    groups: list[tuple[int, int]] = []
    row_group: list[int] = []
    for i in range(sel.shape[0]):
        f = int(first[i])
        if f == 0:
            return None
        if groups and groups[-1][1] == f and bool((input_ids[i, :f] == input_ids[groups[-1][0], :f]).all()):
            row_group.append(len(groups) - 1)
        else:
            groups.append((i, f))
            row_group.append(len(groups) - 1)
    if len(groups) == sel.shape[0]:
        return None
    return first, groups, row_group


def shared_prefix_hidden(lm, input_ids, attention_mask, sel, plan):
    """Hidden states at the selected positions, computing each shared prompt once (see shared_prefix_plan).

    The prompts run as one right-padded batch with a KV cache; the cache rows are gathered per
    sequence (a differentiable index, so gradients from every completion flow into the shared
    prompt once) and the continuations run on it with their true position ids. Same math as the
    plain forward; a GRPO group of G completions pays for its prompt once instead of G times.
    """
    import torch

    first, groups, row_group = plan
    dev = input_ids.device
    lengths = attention_mask.sum(1)
    lp = max(f for _, f in groups)
    pad = 0  # any token id: padded slots are masked out
    pre_ids = torch.full((len(groups), lp), pad, dtype=input_ids.dtype, device=dev)
    pre_mask = torch.zeros((len(groups), lp), dtype=attention_mask.dtype, device=dev)
    for g, (row, f) in enumerate(groups):
        pre_ids[g, :f] = input_ids[row, :f]
        pre_mask[g, :f] = 1
    dec = lm.get_decoder()
    cache = cache_of(dec(input_ids=pre_ids, attention_mask=pre_mask, use_cache=True))
    idx = torch.tensor(row_group, device=dev)
    cache.batch_select_indices(idx)
    suf_len = [int(lengths[i]) - int(first[i]) for i in range(len(row_group))]
    S = max(suf_len)
    B = input_ids.shape[0]
    suf_ids = torch.full((B, S), pad, dtype=input_ids.dtype, device=dev)
    suf_mask = torch.zeros((B, S), dtype=attention_mask.dtype, device=dev)
    pos = torch.zeros((B, S), dtype=torch.long, device=dev)
    for i in range(B):
        f, n = int(first[i]), suf_len[i]
        suf_ids[i, :n] = input_ids[i, f:f + n]
        suf_mask[i, :n] = 1
        pos[i] = f + torch.arange(S, device=dev)
    out = dec(input_ids=suf_ids, attention_mask=torch.cat([pre_mask[idx], suf_mask], 1), position_ids=pos,
              use_cache=True, **with_cache(cache))
    rows, cols = sel.nonzero(as_tuple=True)
    return out.last_hidden_state[rows, cols - first[rows]]


# Packing's attention mask is [groups, 1, L, L] booleans; above this many the KV-cache path runs instead
# (a 4B model's group of 16 completions of 4,096 tokens would need 4.5 GB of mask).
PACK_MASK_ELEMENTS = 2 ** 26
# Architectures whose attention is plain causal attention over position ids (no sliding window, no
# bidirectional image tokens), so a custom mask with explicit positions reproduces the plain forward.
PACKABLE_MODEL_TYPES = ("llama", "qwen2", "qwen3")


def packs(lm, plan, attention_mask) -> bool:
    """Whether `packed_prefix_hidden` applies: an architecture above under SDPA attention (the only attention
    that takes a custom boolean mask as it is), no sliding-window layer, and a mask of at most PACK_MASK_ELEMENTS."""
    config = lm.config
    if config.model_type not in PACKABLE_MODEL_TYPES or config._attn_implementation != "sdpa":
        return False
    # Qwen2/3 configs may switch a sliding window on for some layers, which a custom mask would not apply
    if getattr(config, "use_sliding_window", False) or "sliding_attention" in (getattr(config, "layer_types", None)
                                                                               or ()):
        return False
    first, groups, row_group = plan
    lengths = attention_mask.sum(1).tolist()
    packed = [f for _, f in groups]
    for i, g in enumerate(row_group):
        packed[g] += int(lengths[i]) - int(first[i])
    return len(groups) * max(packed) ** 2 <= PACK_MASK_ELEMENTS


def packed_prefix_hidden(lm, input_ids, attention_mask, sel, plan):
    """Hidden states at the selected positions, each shared prompt computed once in ONE forward call.

    A group's prompt and then each of its rows' continuations are laid end to end in one sequence (a batch row
    per group) with their true position ids; the attention mask lets the prompt attend causally to itself and
    each continuation to the prompt and causally to itself, never to another continuation. The same maths as the
    plain forward; unlike the KV-cache path (`shared_prefix_hidden`) every weight is used once per call, so
    backward computes each weight gradient once instead of once per call and adds none, which is most of what a
    small micro-batch costs beyond its tokens.
    """
    import torch

    first, groups, row_group = plan
    dev = input_ids.device
    lengths = attention_mask.sum(1).tolist()
    first_l = [int(x) for x in first.tolist()]
    members: list[list[int]] = [[] for _ in groups]
    for i, g in enumerate(row_group):
        members[g].append(i)
    sizes = [f + sum(lengths[i] - f for i in members[g]) for g, (_, f) in enumerate(groups)]
    L = max(sizes)
    ids = torch.zeros((len(groups), L), dtype=input_ids.dtype, device=dev)  # padding: any token id, masked out
    pos = torch.zeros((len(groups), L), dtype=torch.long, device=dev)
    mask = torch.zeros((len(groups), 1, L, L), dtype=torch.bool, device=dev)
    offset = [0] * len(row_group)
    for g, (row, f) in enumerate(groups):
        ids[g, :f] = input_ids[row, :f]
        pos[g, :f] = torch.arange(f, device=dev)
        mask[g, 0, :f, :f] = torch.ones((f, f), dtype=torch.bool, device=dev).tril()
        at = f
        for i in members[g]:
            n = lengths[i] - f
            ids[g, at:at + n] = input_ids[i, f:f + n]
            pos[g, at:at + n] = torch.arange(f, f + n, device=dev)
            mask[g, 0, at:at + n, :f] = True
            mask[g, 0, at:at + n, at:at + n] = torch.ones((n, n), dtype=torch.bool, device=dev).tril()
            offset[i] = at
            at += n
        mask[g, 0, at:, 0] = True  # padding queries attend somewhere (an all-False row gives NaN); never read
    out = lm.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
    rows, cols = sel.nonzero(as_tuple=True)
    where = torch.tensor(offset, device=dev)[rows] + cols - torch.tensor(first_l, device=dev)[rows]
    return out.last_hidden_state[torch.tensor(row_group, device=dev)[rows], where]
