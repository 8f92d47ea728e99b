"""rc1.models.packed: a bf16 sampling copy's linear layers on oneDNN's packed weights sample the same tokens as
plain bf16 linear layers, and follow the weights only through refresh()."""

from __future__ import annotations

import pytest
import torch

from rc1.models import packed

pytestmark = pytest.mark.skipif(packed.available() is not None,
                                reason=f"packed bf16 linear layers do not run here: {packed.available()}")


def _tiny_bf16():
    from rc1.config.schema import TrainConfig
    from rc1.generation import base_ref

    model, tok = base_ref(TrainConfig(model={"base": "random:qwen3-tiny"})).load(torch.device("cpu"), torch.float32)
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
        p.requires_grad_(False)
    return model.eval(), tok


def _decode(model, tok):
    from rc1.envs.env import ChatFormat
    from rc1.envs.rollout import decode_batch, eos_ids

    fmt = ChatFormat(tok, eos_ids(model, tok))
    prompts = [[5, 9, 11, 40, 41], [5, 9, 11, 40, 41], [7, 8, 30], [7, 8, 30]]
    with torch.inference_mode():
        out, logp, _ = decode_batch(model, fmt, prompts, max_new_tokens=[12] * 4, greedy=False, temperature=1.0,
                                    top_p=1.0, generator=torch.Generator().manual_seed(3), stop_at_action=False)
    return out, logp


def test_packed_linear_layers_sample_what_plain_ones_do_and_follow_refresh():
    model, tok = _tiny_bf16()
    plain_tokens, plain_logp = _decode(model, tok)
    pl = packed.PackedLinears(model, rows=4)
    assert pl.modules and all(hasattr(m, "rc1_packed") for m in pl.modules)
    tokens, logp = _decode(model, tok)
    assert tokens == plain_tokens
    assert [lp == pytest.approx(pp, abs=1e-3) for lp, pp in zip(logp, plain_logp)] == [True] * 4

    lin = pl.modules[0]
    x = torch.randn(2, lin.in_features, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.mul_(-1.0)  # the trained weights moved
    want = torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert not torch.allclose(lin(x), want)  # the packed copy is stale until refreshed
    pl.refresh()
    assert torch.allclose(lin(x).float(), want.float(), rtol=1e-2, atol=1e-2)
