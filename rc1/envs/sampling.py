"""The sampling distribution: softmax(logits / temperature) restricted to the top-p nucleus.

ONE definition, used by the sampler (rc1.envs.rollout draws each token from it and records the
token's log-probability under it) and by the trainer (rc1.engines.pure_pt scores the sampled tokens
under it), so the log-probs of training are the log-probs of the distribution the tokens came from.

Nucleus (top-p): the most likely tokens whose probabilities, in descending order, are needed to reach
`top_p` (a token is kept when the mass BEFORE it is < top_p, so the top token always stays). It is
applied as a threshold on the logits: every token whose logit reaches the last needed token's logit is
kept, ties included, so the kept set is a function of the logits alone (no sort-order ambiguity) and
the sampler and the trainer compute the same set from the same logits.

`keep` (the trainer's sampled tokens): a token that was sampled lies in the sampler's nucleus, but after
a policy update (PPO's second epoch) or under another model (the reference) it may fall outside this
model's nucleus; it is kept in the support so its log-prob stays finite (a -inf would make the ratio 0
and the gradient NaN). With the sampler's own logits this changes nothing: the token is inside already.
"""

from __future__ import annotations

# Rows of [rows, vocab] sorted at a time: bounds the sort's memory (values + int64 indices) to ~0.4 GB.
_SORT_ELEMENTS = 2**25


def nucleus_mask(logits, top_p: float):
    """Boolean [N, V]: True on the tokens of each row's top-p nucleus (see the module docstring)."""
    import torch

    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (got {top_p})")
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.ones_like(flat, dtype=torch.bool)
    if top_p >= 1.0:
        return out.reshape(logits.shape)
    rows = max(1, _SORT_ELEMENTS // flat.shape[-1])
    with torch.no_grad():
        for start in range(0, flat.shape[0], rows):
            chunk = flat[start:start + rows].float()
            sorted_logits = torch.sort(chunk, descending=True, dim=-1).values
            probs = torch.softmax(sorted_logits, dim=-1)
            needed = ((probs.cumsum(-1) - probs) < top_p).sum(-1, keepdim=True)  # >= 1: the top token
            threshold = sorted_logits.gather(-1, needed - 1)
            out[start:start + rows] = chunk >= threshold
    return out.reshape(logits.shape)


def sampling_logits(logits, temperature: float = 1.0, top_p: float = 1.0, keep=None):
    """logits / temperature, with -inf outside the top-p nucleus (and never on the `keep` token ids [N])."""

    if temperature != 1.0:
        logits = logits / temperature
    if top_p >= 1.0:
        return logits
    inside = nucleus_mask(logits.detach(), top_p)
    if keep is not None:
        inside.scatter_(-1, keep.unsqueeze(-1), True)
    return logits.masked_fill(~inside, float("-inf"))


def sampling_logprobs(logits, temperature: float = 1.0, top_p: float = 1.0):
    """log-probabilities of the sampling distribution ([..., V]; -inf outside the nucleus)."""
    import torch

    return torch.log_softmax(sampling_logits(logits, temperature, top_p), dim=-1)
