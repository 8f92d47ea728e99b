"""The sharded (FSDP2 / DeepSpeed) path of PurePTEngine.forward re-enters itself inside the wrapper that gathers
the shards: it must pass every argument on, top_p included (issue 28: it dropped top_p, so sharded runs with
top_p < 1 scored log-probs against the full distribution instead of the sampler's nucleus)."""

from __future__ import annotations

import torch

from rc1.config.load import load_train_config
from rc1.engines.pure_pt import PurePTEngine
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe
from tests.helpers.workspace import make_workspace


def test_sharded_reentry_scores_under_the_nucleus(tmp_path, tiny_model_dir, monkeypatch):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, extra={"model.top_p": 0.5})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    engine = recipe.engine
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 100, (2, 12), generator=g)
    attn = torch.ones_like(ids)
    positions = torch.zeros((2, 11))
    positions[:, 6:] = 1
    with torch.no_grad():
        plain = engine.forward(ids, attn, positions=positions, top_p=0.5, temperature=0.7).logp
        full = engine.forward(ids, attn, positions=positions, top_p=1.0, temperature=0.7).logp
        entered = []
        engine.wrapped = lambda fn: entered.append(1) or fn()  # a wrapper that gathers nothing: only the re-entry
        monkeypatch.setattr(PurePTEngine, "sharded", property(lambda self: True))
        sharded = engine.forward(ids, attn, positions=positions, top_p=0.5, temperature=0.7).logp
    assert entered == [1]
    assert not torch.equal(plain, full)  # the nucleus changes the scores of this model's tokens
    assert torch.equal(sharded, plain)
