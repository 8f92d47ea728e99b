"""The sampler's numerics (issue 25 item 7): the bf16 sampling copy casts weights only (the rotary inv_freq
buffer stays fp32), the trainer's lm_head runs in fp32 on the selected rows under bf16 autocast, and the dev
eval during training runs in the final eval's precision."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.models.loader import causal_lm
from rc1.engines.pure_pt import PurePTEngine
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


@pytest.fixture
def bf16_engine(tmp_path):
    """An engine that samples from a bf16 copy and trains under bf16 autocast (forced, so the test does not
    depend on the CPU having bf16 instructions: the code paths are the same)."""
    ws = Workspace(tmp_path)
    eng = PurePTEngine(ws)
    eng.setup(load_train_config(make_workspace(tmp_path, "random:qwen3-tiny"), ws))
    eng.use_amp, eng.amp_dtype = True, torch.bfloat16
    return eng


def test_the_bf16_sampling_copy_keeps_buffers_in_fp32(bf16_engine):
    model, autocast = bf16_engine.generation_model()
    assert model is not bf16_engine.model and autocast is False
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    buffers = dict(model.named_buffers())
    inv_freq = [b for name, b in buffers.items() if name.endswith("inv_freq")]
    assert inv_freq and all(b.dtype == torch.float32 for b in inv_freq)
    # refreshed from the master weights before every rollout
    with torch.no_grad():
        next(bf16_engine.model.parameters()).add_(1.0)
    again, _ = bf16_engine.generation_model()
    assert torch.equal(next(again.parameters()), next(bf16_engine.model.parameters()).to(torch.bfloat16))


def test_the_trainers_lm_head_runs_in_fp32_under_bf16_autocast(bf16_engine):
    eng = bf16_engine
    ids = torch.tensor([[1, 5, 9, 14, 3, 8, 2, 7]])
    attn = torch.ones_like(ids)
    with torch.no_grad():
        out = eng.forward(ids, attn, hidden=True)
        lm = causal_lm(eng.model)
        with eng.autocast():
            h = lm.get_decoder()(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state[:, :-1]
            bf16_logits = lm.get_output_embeddings()(h).float()
        fp32_logits = h.float() @ lm.get_output_embeddings().weight.float().T
    target = ids[:, 1:, None]
    want = torch.log_softmax(fp32_logits, -1).gather(-1, target).squeeze(-1)
    bf16 = torch.log_softmax(bf16_logits, -1).gather(-1, target).squeeze(-1)
    torch.testing.assert_close(out.logp, want, atol=1e-5, rtol=1e-5)
    assert (bf16 - want).abs().max() > 1e-4   # the bf16 head would have given other log-probs


def test_the_dev_eval_uses_the_final_evals_precision(bf16_engine):
    """eval.dtype auto is fp32 on a CPU (rc1.eval.loading.eval_dtype): the dev eval then rolls out the fp32
    master weights without autocast, not the bf16 sampling copy."""
    model, autocast = bf16_engine.eval_model()
    assert model is bf16_engine.model and autocast is False
    assert bf16_engine.generation_model()[0] is not bf16_engine.model
