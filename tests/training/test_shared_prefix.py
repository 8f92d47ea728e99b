"""The shared-prompt forward of pure_pt gives the plain forward's log-probs and gradients."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.engines.forward import shared_prefix_plan
from rc1.models.loader import causal_lm
from rc1.engines.pure_pt import PurePTEngine
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


def _batch(engine, prompts, completions):
    """Right-padded rows: each prompt repeated for its completions (a GRPO group), action mask on completions."""
    rows = [(p, c) for p, cs in zip(prompts, completions) for c in cs]
    T = max(len(p) + len(c) for p, c in rows)
    ids = torch.zeros((len(rows), T), dtype=torch.long)
    attn = torch.zeros_like(ids)
    act = torch.zeros((len(rows), T), dtype=torch.float32)
    for i, (p, c) in enumerate(rows):
        ids[i, :len(p) + len(c)] = torch.tensor(p + c)
        attn[i, :len(p) + len(c)] = 1
        act[i, len(p):len(p) + len(c)] = 1
        if len(c) > 3:  # a tool result inside the completion: not an action token
            act[i, len(p) + 2] = 0
    return ids, attn, act[:, 1:]


@pytest.mark.parametrize("path", ["packed", "kv_cache"])
@pytest.mark.parametrize("method", ["full", "lora"])
def test_shared_prefix_forward_matches_the_plain_forward(tmp_path, tiny_model_dir, monkeypatch, method, path):
    """Both shared-prompt paths: one packed sequence per group under a block mask, and the KV-cache path that
    runs where packing does not apply (here forced by a zero mask budget)."""
    from rc1.engines import forward

    ws = Workspace(tmp_path)
    cfg = load_train_config(make_workspace(tmp_path, tiny_model_dir, method=method), ws)
    engine = PurePTEngine(ws)
    engine.setup(cfg)
    g = torch.Generator().manual_seed(0)
    rand = lambda n: torch.randint(5, 300, (n,), generator=g).tolist()  # noqa: E731
    prompts = [rand(11), rand(6)]
    completions = [[rand(4), rand(7), rand(2)], [rand(5), rand(1), rand(6)]]
    ids, attn, act = _batch(engine, prompts, completions)
    plan = shared_prefix_plan(ids, attn, act > 0)
    assert plan is not None and [f for _, f in plan[1]] == [10, 5] and plan[2] == [0, 0, 0, 1, 1, 1]
    if path == "kv_cache":
        monkeypatch.setattr(forward, "PACK_MASK_ELEMENTS", 0)
    assert forward.packs(causal_lm(engine.model), plan, attn) == (path == "packed")
    called = []
    for name in ("packed_prefix_hidden", "shared_prefix_hidden"):
        fn = getattr(forward, name)
        monkeypatch.setattr(forward, name, lambda *a, _fn=fn, _name=name: called.append(_name) or _fn(*a))

    results = []
    for hidden in (False, True):  # hidden=True takes the plain path
        engine.model.zero_grad()
        out = engine.forward(ids, attn, positions=act, hidden=hidden, entropy=True)
        (out.logp * act).sum().backward()
        grads = {n: p.grad.clone() for n, p in engine.model.named_parameters() if p.grad is not None}
        results.append((out.logp.detach(), out.entropy.detach(), grads))
    (lp_s, ent_s, g_s), (lp_p, ent_p, g_p) = results
    assert called == [{"packed": "packed_prefix_hidden", "kv_cache": "shared_prefix_hidden"}[path]]
    assert torch.count_nonzero(lp_s) == int(act.sum())
    torch.testing.assert_close(lp_s, lp_p, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ent_s, ent_p, atol=1e-5, rtol=1e-4)
    assert g_s.keys() == g_p.keys() and g_s
    for name in g_s:
        torch.testing.assert_close(g_s[name], g_p[name], atol=1e-5, rtol=1e-4, msg=name)


def test_packing_needs_sdpa_attention_and_a_small_mask(tiny_model_dir, monkeypatch):
    """A custom boolean mask is taken as it is only by SDPA attention, it knows no sliding window, and its
    [groups, L, L] size is bounded."""
    from transformers import AutoModelForCausalLM

    from rc1.engines import forward

    ids, attn, act = _batch(None, [[5, 6, 7]], [[[8, 9], [10, 11, 12]]])
    plan = shared_prefix_plan(ids, attn, act > 0)
    lm = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), attn_implementation="sdpa")
    assert forward.packs(lm, plan, attn)  # one group: 2 prompt tokens + 3 + 4 = 9 packed, 81 mask entries
    assert not forward.packs(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir),
                                                                  attn_implementation="eager"), plan, attn)
    sliding = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), attn_implementation="sdpa")
    sliding.config.use_sliding_window = True
    assert not forward.packs(sliding, plan, attn)  # a window the custom mask would not apply
    monkeypatch.setattr(forward, "PACK_MASK_ELEMENTS", 80)
    assert not forward.packs(lm, plan, attn)


def test_no_plan_without_a_shared_prompt():
    ids = torch.tensor([[1, 2, 3, 4], [1, 9, 3, 4]])
    attn = torch.ones_like(ids)
    act = torch.tensor([[0, 0, 1.0], [0, 0, 1.0]])
    assert shared_prefix_plan(ids, attn, act > 0) is None  # the prompts (tokens 0-1) differ
    assert shared_prefix_plan(ids[:1], attn[:1], act[:1] > 0) is None  # one row
    act0 = torch.tensor([[1.0, 1, 1], [1.0, 1, 1]])
    assert shared_prefix_plan(ids, attn, act0 > 0) is None  # nothing before the first action


@pytest.mark.parametrize("entropy", [True, "grad"])
def test_chunked_vocabulary_projection_matches_one_projection(tmp_path, tiny_model_dir, monkeypatch, entropy):
    """Long completions project onto the vocabulary in checkpointed chunks: same log-probs, entropies and
    gradients as one projection of every token."""
    from rc1.models import memory

    ws = Workspace(tmp_path)
    cfg = load_train_config(make_workspace(tmp_path, tiny_model_dir), ws)
    engine = PurePTEngine(ws)
    engine.setup(cfg)
    g = torch.Generator().manual_seed(1)
    rand = lambda n: torch.randint(5, 300, (n,), generator=g).tolist()  # noqa: E731
    ids, attn, act = _batch(engine, [rand(5), rand(8)], [[rand(9), rand(6)], [rand(7), rand(4)]])
    results = []
    for chunk_elements in (10 ** 12, 8 * engine.model.get_output_embeddings().weight.shape[0]):
        monkeypatch.setattr(memory, "LOGITS_CHUNK_ELEMENTS", chunk_elements)  # one chunk, then chunks of 8
        engine.model.zero_grad()
        out = engine.forward(ids, attn, positions=act, hidden=True, entropy=entropy)
        loss = (out.logp * act).sum() + (out.entropy * act).sum() * (entropy == "grad")
        loss.backward()
        results.append((out.logp.detach(), out.entropy.detach(),
                        {n: p.grad.clone() for n, p in engine.model.named_parameters() if p.grad is not None}))
    (lp1, ent1, g1), (lp2, ent2, g2) = results
    assert int(act.sum()) > memory.logits_chunk_tokens(engine.model.get_output_embeddings().weight.shape[0])
    torch.testing.assert_close(lp1, lp2, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ent1, ent2, atol=1e-5, rtol=1e-4)
    assert g1.keys() == g2.keys() and g1
    for name in g1:
        torch.testing.assert_close(g1[name], g2[name], atol=1e-5, rtol=1e-4, msg=name)
