"""The checkpoint state of a sharded policy (FSDP2, DeepSpeed ZeRO) in the one-process format.

An rc1 checkpoint does not depend on how its run was sharded: the weights are full tensors by parameter
name, the extra modules (PPO's value head) full state dicts, and the optimizer state is torch's AdamW
state_dict with the parameters numbered in `engine.trainable_parameters()` order. A sharded run gathers into
that format (a collective: every rank calls, rank 0 receives the tensors) and scatters out of it on resume,
so a checkpoint written by FSDP2 resumes on DDP, on one process, or on FSDP2 with another world size.

- FSDP2: torch.distributed.checkpoint.state_dict (full state dicts, offloaded to the CPU of rank 0).
- DeepSpeed ZeRO: deepspeed.utils' safe_get_full_* / safe_set_full_* (fp32 master weights and Adam moments).

Both need CUDA; this machine-independent format is what the CPU tests check through DDP.
"""

from __future__ import annotations

from typing import Any

DEEPSPEED = ("deepspeed_zero2", "deepspeed_zero3")


def trainable_fqns(engine) -> list[str]:
    """Names of engine.trainable_parameters(), in order, under the PolicyModules root ("model.", "extras.")."""
    names = [f"model.{n}" for n, p in engine.model.named_parameters() if p.requires_grad]
    for key in sorted(engine.extra_modules):
        names += [f"extras.{key}.{n}" for n, p in engine.extra_modules[key].named_parameters() if p.requires_grad]
    return names


def _inner(optimizer):
    return getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper holds the torch optimizer


def gather(engine) -> tuple[dict, dict, dict]:
    """(trainable weights by model parameter name, extra modules' state dicts, optimizer state in torch's
    numbered format); full tensors on rank 0, empty elsewhere."""
    fqns = trainable_fqns(engine)
    if engine.dist.sharding in DEEPSPEED:
        return _gather_deepspeed(engine, fqns)
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd = get_model_state_dict(engine.wrapped, options=opts)
    optim_sd = get_optimizer_state_dict(engine.wrapped, _inner(engine.optimizer), options=opts)
    if not engine.dist.is_main:
        return {}, {}, {}
    weights = {f[len("model."):]: model_sd[f] for f in fqns if f.startswith("model.")}
    extras = {k: {n[len(f"extras.{k}."):]: t for n, t in model_sd.items() if n.startswith(f"extras.{k}.")}
              for k in engine.extra_modules}
    index = {f: i for i, f in enumerate(fqns)}
    numbered = {"state": {index[f]: v for f, v in optim_sd["state"].items() if f in index},
                "param_groups": [{**g, "params": [index[f] for f in g["params"] if f in index]}
                                 for g in optim_sd["param_groups"]]}
    return weights, extras, numbered


def scatter(engine, weights: dict, extras: dict, optimizer_state: dict) -> None:
    """Load one-process-format state into the sharded policy (every rank calls with the same state)."""
    fqns = trainable_fqns(engine)
    if engine.dist.sharding in DEEPSPEED:
        return _scatter_deepspeed(engine, fqns, weights, extras, optimizer_state)
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                         set_optimizer_state_dict)

    model_sd = {f"model.{n}": t for n, t in weights.items()}
    for k, sd in extras.items():
        model_sd.update({f"extras.{k}.{n}": t for n, t in sd.items()})
    opts = StateDictOptions(full_state_dict=True, strict=False)
    set_model_state_dict(engine.wrapped, model_sd, options=opts)
    named = {"state": {fqns[int(i)]: v for i, v in optimizer_state["state"].items()},
             "param_groups": [{**g, "params": [fqns[int(i)] for i in g["params"]]}
                              for g in optimizer_state["param_groups"]]}
    set_optimizer_state_dict(engine.wrapped, _inner(engine.optimizer), optim_state_dict=named, options=opts)


def _gather_deepspeed(engine, fqns: list[str]) -> tuple[dict, dict, dict]:
    import torch
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state

    params = engine.trainable_parameters()
    full = [safe_get_full_fp32_param(p) for p in params]  # collective under ZeRO-3
    moments = [{k: safe_get_full_optimizer_state(p, k) for k in ("exp_avg", "exp_avg_sq")} for p in params]
    if not engine.dist.is_main:
        return {}, {}, {}
    by_fqn = {f: t.detach().cpu().clone() for f, t in zip(fqns, full)}
    weights = {f[len("model."):]: t for f, t in by_fqn.items() if f.startswith("model.")}
    extras = {k: {f[len(f"extras.{k}."):]: t for f, t in by_fqn.items() if f.startswith(f"extras.{k}.")}
              for k in engine.extra_modules}
    step = torch.tensor(float(engine.updates))
    state: dict[int, Any] = {i: {"step": step, **{k: v.detach().cpu().clone() for k, v in m.items() if v is not None}}
                             for i, m in enumerate(moments)}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in _inner(engine.optimizer).param_groups]
    groups[0]["params"] = list(range(len(params)))
    return weights, extras, {"state": state, "param_groups": groups[:1]}


def _scatter_deepspeed(engine, fqns: list[str], weights: dict, extras: dict, optimizer_state: dict) -> None:
    from deepspeed.utils import safe_set_full_fp32_param, safe_set_full_optimizer_state

    named = {f"model.{n}": t for n, t in weights.items()}
    for k, sd in extras.items():
        named.update({f"extras.{k}.{n}": t for n, t in sd.items()})
    for i, (f, p) in enumerate(zip(fqns, engine.trainable_parameters())):
        if f in named:
            safe_set_full_fp32_param(p, named[f].to(p.device))
        for k in ("exp_avg", "exp_avg_sq"):
            value = optimizer_state["state"].get(i, {}).get(k)
            if value is not None:
                safe_set_full_optimizer_state(p, value.to(p.device), k)
    for g, saved in zip(_inner(engine.optimizer).param_groups, optimizer_state["param_groups"]):
        g.update({k: v for k, v in saved.items() if k != "params"})
