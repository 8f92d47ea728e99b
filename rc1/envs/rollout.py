"""Batched multi-turn rollouts: `generate_episodes(model, tokenizer, items, ...) -> list[Episode]`.

Each round, the still-active episodes are sorted by length (less padding), cut into batches of
`batch_size`, left-padded, and decoded token by token with a KV cache (our own loop over the
HF model's forward: it samples from a `torch.Generator`, which `generate()` cannot, so a run is
reproducible from the generator's state — exact resume depends on that). A sequence stops at an
end-of-turn token, at `max_new_tokens`, or (with `stop_at_action`) at the newline ending its
first action line, like a ReAct stop sequence — so it cannot hallucinate the tool's result.
Finished rows leave the batch (their KV cache rows are dropped). Identical prompts in a batch
(the `num_generations` copies of an item) are prefilled once and their cache rows repeated, and the
prefix all of a batch's prompts share (the protocol's system prompt: ~80 of a bench grpo prompt's 100
tokens) is prefilled once for the batch, its cache rows repeated, each prompt's rest padded after it
(the pads masked out).

Each generated token's log-probability under the distribution it was drawn from (rc1.envs.sampling:
softmax(logits / temperature) over the top-p nucleus; plain softmax when greedy) is kept in
`Episode.logprobs`, aligned with the positions where `action_mask` is 1.

Randomness: `generator` (used and advanced as is) or a fresh one seeded with `seed`; with
neither, torch's global RNG. Same items + same generator state + same model = same episodes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

from rc1.envs.env import ChatFormat, EpisodeState
from rc1.envs.episode import Episode
from rc1.envs.actions import has_complete_action
from rc1.envs.sampling import sampling_logprobs
from rc1.runtime.hf_compat import with_cache

log = logging.getLogger("rc1.envs")

# (prompts, max_new_tokens per row, stop_at_action per row) -> (generated ids, their log-probs, hit_limit) per row
BatchDecoder = Callable[[list[list[int]], list[int], list[bool]], tuple[list[list[int]], list[list[float]], list[bool]]]


def eos_ids(model, tokenizer) -> list[int]:
    """The end-of-turn token ids: the model's generation config's and the tokenizer's."""
    ids = []
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for v in (gen_eos, tokenizer.eos_token_id):
        if isinstance(v, int):
            ids.append(v)
        elif isinstance(v, (list, tuple)):
            ids += [int(x) for x in v]
    return ids


def sample_tokens(logits, *, greedy: bool, temperature: float, top_p: float, generator):
    """(next token per row, its log-probability under the sampling distribution: rc1.envs.sampling's
    temperature + top-p nucleus; plain softmax(logits) when greedy).

    Sampling inverts each row's CDF at one uniform draw (float64 cumulative sums): one random number
    per row. torch.multinomial draws one exponential per vocabulary entry instead, which on a CPU
    cost more than the rest of the sampling (49k draws per row per token).
    """
    import torch

    from rc1.runtime.device import to_device

    if greedy:
        nxt = logits.argmax(-1)
        return nxt, torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1)
    logp = sampling_logprobs(logits, temperature, top_p)
    cdf = logp.exp().double().cumsum(-1)
    u = torch.rand(cdf.shape[0], 1, dtype=torch.float64, generator=generator,
                   device=generator.device if generator is not None else cdf.device)
    u = to_device(u, cdf.device) * cdf[:, -1:]
    # the first token whose cumulative mass exceeds u: a token of probability 0 (outside the nucleus) is never picked
    nxt = torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)
    return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)


MIN_SHARED_PREFIX = 16   # tokens: a shorter common prefix is not worth a separate prefill


def common_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens all `prompts` share at the start, leaving each at least its last token (its logits are needed)."""
    n = min(len(p) for p in prompts) - 1
    first = prompts[0]
    for i in range(max(n, 0)):
        if any(p[i] != first[i] for p in prompts[1:]):
            return i
    return max(n, 0)


def prefix_to_share(prompts: Sequence[Sequence[int]]) -> int:
    """The prefix length worth prefilling once for all distinct `prompts` (both decoders): their common prefix,
    or 0 for a single prompt or one shorter than MIN_SHARED_PREFIX."""
    shared = common_prefix(prompts) if len(prompts) > 1 else 0
    return shared if shared >= MIN_SHARED_PREFIX else 0


@dataclass(frozen=True)
class Segment:
    """One prefill of a prefix tree (prefix_tree): the sequence of prompt `row` gets positions [0, start)
    copied from row `source`'s sequence (nothing when source == row), then tokens [start, end) of its prompt."""

    wave: int
    row: int
    source: int
    start: int
    end: int


def prefix_tree(prompts: Sequence[Sequence[int]], min_shared: int = MIN_SHARED_PREFIX) -> list[Segment]:
    """How to prefill distinct `prompts` with every shared prefix computed once (a radix tree, as SGLang's
    RadixAttention): prompts that share one system prompt among several in a batch share its tokens, not only
    the prefix common to all of them. Segments of one wave depend only on earlier waves; a shared span shorter
    than `min_shared` is not worth its own prefill and is left to the prompts below it. Each prompt's last
    token is in its own segment (its logits are needed), and its segments cover it exactly once."""
    plan: list[Segment] = []

    def emit(row: int, source: int, start: int, end: int, wave: int) -> None:
        plan.append(Segment(wave, row, source if start else row, start, end))

    def visit(rows: list[int], source: int, start: int, wave: int) -> None:
        if len(rows) == 1:
            emit(rows[0], source, start, len(prompts[rows[0]]), wave)
            return
        shared = common_prefix([prompts[r] for r in rows])
        if shared - start >= min_shared:
            emit(rows[0], source, start, shared, wave)
            source, start, wave = rows[0], shared, wave + 1
        groups: dict[int, list[int]] = {}
        for r in rows:
            groups.setdefault(prompts[r][shared], []).append(r)
        if len(groups) == 1:  # the shortest prompt is a prefix of another: no split below it
            for r in rows:
                emit(r, source, start, len(prompts[r]), wave)
            return
        for group in groups.values():
            visit(group, source, start, wave)

    if prompts:
        visit(list(range(len(prompts))), 0, 0, 0)
    return sorted(plan, key=lambda s: (s.wave, s.row))


def _select_rows(cache, keep) -> None:
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(keep)
    else:  # pragma: no cover - older cache classes
        for layer in cache.layers:
            layer.batch_select_indices(keep)


class StopRule:
    """Where a model turn ends (every decoder applies it after each token): at an end-of-turn token, or, with
    stop_at_action, at the newline that completes the first action line (a ReAct stop sequence)."""

    def __init__(self, fmt: ChatFormat):
        self.fmt = fmt
        self._newline: dict[int, bool] = {}

    def ends_turn(self, generated: list[int], stop_at_action: bool) -> bool:
        tok = generated[-1]
        if tok in self.fmt.eos_ids:
            return True
        if not stop_at_action:
            return False
        nl = self._newline.get(tok)
        if nl is None:
            nl = self._newline[tok] = "\n" in self.fmt.tok.decode([tok])
        return nl and has_complete_action(self.fmt.decode(generated), starts_in_think=self.fmt.starts_in_think)


def stops_here(rule: StopRule, generated: list[int], stop_at_action: bool, limit: int) -> tuple[bool, bool]:
    """(the turn ends after its last token, it ended by reaching `limit` tokens)."""
    if rule.ends_turn(generated, stop_at_action):
        return True, False
    return (True, True) if len(generated) >= limit else (False, False)


def cut_turn(rule: StopRule, tokens: Sequence[int], stop_at_action: bool, limit: int) -> tuple[list[int], bool]:
    """A turn a backend generated whole (vLLM, continuous batching), cut where rc1's decoder would have stopped
    it: (the kept tokens, whether it ended by reaching `limit`)."""
    kept: list[int] = []
    limit_hit = False
    for t in tokens:
        kept.append(int(t))
        ended, limit_hit = stops_here(rule, kept, stop_at_action, limit)
        if ended:
            break
    return kept, limit_hit


def prefill(model, prompts: Sequence[Sequence[int]], pad_id: int):
    """Read `prompts` into a fresh KV cache; (cache, attention mask, position ids, last position's logits), one
    row per prompt, left-padded. Identical prompts (a GRPO group's copies) are prefilled once and their cache
    rows repeated; the prefix every distinct prompt shares is prefilled once (one row), its rows repeated for
    each, and each prompt's rest is left-padded after it (the pads masked out, positions counting real tokens)."""
    import torch
    from transformers import DynamicCache

    from rc1.runtime.device import to_device

    device = next(model.parameters()).device
    unique: dict[tuple[int, ...], int] = {}
    source = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
    cache = DynamicCache(config=model.config)
    shared = prefix_to_share(list(unique))
    if shared:
        prefix = to_device(torch.tensor([next(iter(unique))[:shared]], dtype=torch.long), device)
        model(input_ids=prefix, use_cache=True, logits_to_keep=to_device(torch.tensor([shared - 1]), device),
              **with_cache(cache))
        _select_rows(cache, to_device(torch.zeros(len(unique), dtype=torch.long), device))
    width = max(len(p) for p in unique) - shared
    ids = torch.full((len(unique), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(unique), shared + width), dtype=torch.long)
    attn[:, :shared] = 1
    for i, p in enumerate(unique):
        ids[i, width - (len(p) - shared):] = torch.tensor(p[shared:], dtype=torch.long)
        attn[i, shared + width - (len(p) - shared):] = 1
    ids, attn = to_device(ids, device), to_device(attn, device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    # logits_to_keep as an index: the last position gathered into a contiguous tensor. With the int 1 the
    # model slices a strided view, and linear() then multiplies it by a weight expanded per row (a copy of
    # the [vocab x hidden] output matrix for every prompt: half the time of a GRPO rollout on a CPU).
    last = to_device(torch.tensor([width - 1]), device)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos[:, shared:], use_cache=True,
                logits_to_keep=last, **with_cache(cache))
    logits = out.logits[:, -1, :]
    if len(unique) < len(prompts):
        idx = to_device(torch.tensor(source, dtype=torch.long), device)
        _select_rows(cache, idx)
        logits, attn, pos = logits[idx], attn[idx], pos[idx]
    return cache, attn, pos, logits


def decode_batch(model, fmt: ChatFormat, prompts: Sequence[Sequence[int]], *, max_new_tokens: Sequence[int],
                 greedy: bool, temperature: float, top_p: float, generator, stop_at_action: bool | Sequence[bool],
                 ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
    """Generate for left-padded `prompts`; returns (ids, their log-probabilities, hit_limit) per row.
    `stop_at_action`: for all rows, or one flag per row."""
    import torch

    from rc1.runtime.device import to_device

    device = next(model.parameters()).device
    n = len(prompts)
    stops = [stop_at_action] * n if isinstance(stop_at_action, bool) else [bool(x) for x in stop_at_action]
    cache, attn, pos, logits = prefill(model, prompts, fmt.pad_id)
    generated: list[list[int]] = [[] for _ in range(n)]
    logprobs: list[list[float]] = [[] for _ in range(n)]
    hit_limit = [False] * n
    rows = list(range(n))  # original index of each live batch row
    stop_rule = StopRule(fmt)
    step = 0
    while rows:
        nxt, nxt_logp = sample_tokens(logits.float(), greedy=greedy, temperature=temperature, top_p=top_p,
                      generator=generator)
        step += 1
        keep = []
        for j, (r, tok, lp) in enumerate(zip(rows, nxt.tolist(), nxt_logp.tolist())):
            generated[r].append(tok)
            logprobs[r].append(lp)
            ended, hit_limit[r] = stops_here(stop_rule, generated[r], stops[r], max_new_tokens[r])
            if not ended:
                keep.append(j)
        if not keep:
            break
        if len(keep) < len(rows):
            idx = to_device(torch.tensor(keep, dtype=torch.long), device)
            _select_rows(cache, idx)
            nxt, attn, pos = nxt[idx], attn[idx], pos[idx]
            rows = [rows[j] for j in keep]
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
        logits = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=pos, use_cache=True,
                       **with_cache(cache)).logits[:, -1, :]
    return generated, logprobs, hit_limit


def generate_episodes(model, tokenizer, items: list[dict], *, num_generations: int = 1, max_turns: int | None = None,
                      max_new_tokens: int = 64, temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                      seed: int | None = None, batch_size: int = 8, generator=None, max_length: int | None = None,
                      stop_at_action: bool = True, multi_turn: str = "concat") -> list[Episode]:
    """Roll out every item `num_generations` times (copies consecutive) and return the episodes in that order.

    max_turns: per-episode model-turn limit (default: the item's `max_turns`, else 6).
    max_new_tokens: per model turn. max_length: cap on a whole episode's tokens (prompt included; with
    split turns, on each turn's prompt + completion). multi_turn: concat | split_turns | auto (rc1.envs.env).
    """
    import torch

    check_sampling(num_generations=num_generations, batch_size=batch_size, max_new_tokens=max_new_tokens,
                   greedy=greedy, temperature=temperature)
    fmt = ChatFormat(tokenizer, eos_ids(model, tokenizer))
    if generator is None and seed is not None and not greedy:
        device = next(model.parameters()).device
        generator = torch.Generator(device=device)
        generator.manual_seed(int(seed))

    def decode(prompts, limits, stops):
        return decode_batch(model, fmt, prompts, max_new_tokens=limits, greedy=greedy, temperature=temperature,
                            top_p=top_p, generator=generator, stop_at_action=stops)

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            return run_episodes(fmt, items, decode, num_generations=num_generations, max_turns=max_turns,
                                max_new_tokens=max_new_tokens, batch_size=batch_size, max_length=max_length,
                                stop_at_action=stop_at_action, multi_turn=multi_turn)
    finally:
        model.train(was_training)


def check_sampling(*, num_generations: int, batch_size: int, max_new_tokens: int, greedy: bool,
                   temperature: float) -> None:
    """ValueError for settings no decoder can sample with."""
    if num_generations < 1 or batch_size < 1 or max_new_tokens < 1:
        raise ValueError("num_generations, batch_size and max_new_tokens must be >= 1")
    if not greedy and temperature <= 0:
        raise ValueError("temperature must be > 0 when sampling (use greedy=True for argmax)")


def run_episodes(fmt: ChatFormat, items: list[dict], decode: BatchDecoder, *, num_generations: int = 1,
                 max_turns: int | None = None, max_new_tokens: int = 64, batch_size: int = 8,
                 max_length: int | None = None, stop_at_action: bool = True,
                 multi_turn: str = "concat") -> list[Episode]:
    """The episode loop shared by every decoder (rc1.generation's backends): each round, the still-active
    episodes are sorted by length, cut into batches of `batch_size`, and `decode(prompts, max_new_tokens per
    row, stop_at_action per row)` generates one model turn for each; the environment (EpisodeState) applies it.
    So the episode records are the same in form whichever decoder produced the tokens."""
    states = [EpisodeState.start(item, fmt, max_turns=max_turns, max_length=max_length, multi_turn=multi_turn)
              for item in items for _ in range(num_generations)]
    while True:
        active = [s for s in states if not s.done]
        for s in active:
            if s.room_for(max_new_tokens) == 0:
                s.truncated, s.done = True, True
        active = sorted((s for s in active if not s.done), key=lambda s: len(s.ids))
        if not active:
            break
        for start in range(0, len(active), batch_size):
            chunk = active[start:start + batch_size]
            gen, logp, hit = decode([s.ids for s in chunk], [s.room_for(max_new_tokens) for s in chunk],
                                    [stop_at_action and not s.single_turn for s in chunk])
            for s, g, lp, h in zip(chunk, gen, logp, hit):
                s.add_model_turn(g, h, logprobs=lp)
    return [s.to_episode() for s in states]
