"""Micro-batches: a plan's rows cut into slices that go through forward and backward one at a time.

A step's rollout batch (prompts_per_step x num_generations episodes, more rows when episodes are split
into turns) is one plan; `run.micro_batch_size` rows at a time run forward + loss + backward, and the
gradients accumulate inside the same optimizer step (TRL's per_device_train_batch_size under one
generation batch, verl's ppo_micro_batch_size_per_gpu, OpenRLHF's micro_train_batch_size).

The sum of the micro-batches' losses is the plan's loss, whatever the loss type, because the strategies
normalise with the WHOLE plan's counts, computed before the split: a per-token weight (`token_weight`:
1 / the plan's action tokens for a token mean, 1 / (episode tokens x episodes) for a per-sequence mean,
1 / (episodes x max_new_tokens) for Dr. GRPO) and DPO's pair count. Advantages (group statistics, GAE,
whitening) are computed over the whole plan before the split too, so a group's rows may land in different
micro-batches.

Rows are cut only between units: a plan's `unit` tensor ([rows], consecutive ids) names rows that must stay
together (DPO: the rows of a chosen episode and its rejected partner). Without it every row is its own unit.
`episode` (row -> episode index) is re-based to start at 0 in each micro-batch (PlanTensors.take).
"""

from __future__ import annotations

from typing import Iterator

from rc1.engines.contract import PlanTensors


def plan_rows(tensors: PlanTensors | None) -> int:
    """Rows of a collated plan (0 for an empty one: DPO without a pair)."""
    return 0 if tensors is None else tensors.rows


def row_slices(tensors: PlanTensors | None, micro_batch_size: int | None) -> list[slice]:
    """Consecutive row ranges of at most `micro_batch_size` rows, cut only between units; one slice holding
    every row when `micro_batch_size` is None or covers them. A unit larger than the micro-batch is a
    micro-batch of its own (it cannot be cut)."""
    rows = plan_rows(tensors)
    if tensors is None or rows == 0 or micro_batch_size is None or micro_batch_size >= rows:
        return [slice(0, rows)]
    unit = tensors.unit
    ids = list(range(rows)) if unit is None else [int(u) for u in unit.tolist()]
    starts = [i for i in range(rows) if i == 0 or ids[i] != ids[i - 1]] + [rows]
    out, lo = [], 0
    for a, b in zip(starts, starts[1:]):
        if b - lo > micro_batch_size and a > lo:  # this unit would overflow the open slice: close it first
            out.append(slice(lo, a))
            lo = a
    out.append(slice(lo, rows))
    return out


def micro_batches(tensors: PlanTensors | None, micro_batch_size: int | None) -> Iterator[PlanTensors | None]:
    """The plan's tensors in micro-batches (the plan's own when one micro-batch holds every row)."""
    slices = row_slices(tensors, micro_batch_size)
    if tensors is None or len(slices) == 1:
        yield tensors
        return
    for s in slices:
        yield tensors.take(s)


def combine_metrics(parts: list[tuple[dict, float]]) -> dict:
    """One metrics dict from the micro-batches' (metrics, weight): each metric the weighted mean of the values
    the micro-batches gave (None when none gave one). The weight is a micro-batch's share of what the metric
    averages over (its action tokens; DPO: its pairs)."""
    if len(parts) == 1:
        return dict(parts[0][0])
    keys: list[str] = []
    for m, _ in parts:
        keys += [k for k in m if k not in keys]
    out: dict = {}
    for k in keys:
        vals = [(m[k], w) for m, w in parts if m.get(k) is not None]
        total = sum(w for _, w in vals)
        if not vals:
            out[k] = None
        elif isinstance(vals[0][0], (int, float)) and not isinstance(vals[0][0], bool) and total > 0:
            out[k] = sum(float(v) * w for v, w in vals) / total
        else:
            out[k] = vals[-1][0]
    return out
