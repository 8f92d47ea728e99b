"""rc1's GRPO and DPO losses against TRL 1.16's own code, on identical tensors.

TRL's losses live inside trainer methods (`GRPOTrainer._compute_loss`, `DPOTrainer._compute_loss`), so
each test builds a real TRL trainer around `random:qwen3-tiny`, takes the per-token log-probs from
TRL's own forward (`_get_per_token_logps_and_entropies`, or the fused LM head it installs), hands the
same log-probs, advantages, old and reference log-probs to rc1's pure loss function, and calls TRL's
method on the same batch. The model is in eval mode, so TRL does not divide by gradient accumulation.

What the comparison shows (the relations are asserted below, to 1e-6):
- rc1's GRPO loss is one mean over every action token of the batch: TRL's loss_type "bnpo", and
  "dapo" (TRL's default) when its `num_items_in_batch` is this batch's token count, i.e. one
  micro-batch per generation batch on one process. TRL's "grpo" averages each sequence over its own
  tokens first, then the sequences; "dr_grpo" divides the token sum by B * max_completion_length.
- TRL 1.16 multiplies the k3 KL by the importance ratio (`use_bias_correction_kl`, default True);
  rc1 does not, so the two agree only with that switched off (same value on-policy, where the ratio
  is 1, but not the same KL gradient).
- DPO: rc1's loss is TRL's sigmoid loss (reverse KL, no label smoothing, no length weighting).
"""

from __future__ import annotations

import pytest
import torch

from rc1.strategies.rl_math import dpo_loss, grpo_advantages, grpo_token_loss, rloo_advantages

TOL = 1e-6
CLIP, BETA = 0.2, 0.1
B, P, C = 4, 3, 6                      # sequences, prompt tokens, max completion tokens
LENGTHS = [6, 4, 2, 5]                 # completion tokens per sequence: unequal on purpose


@pytest.fixture(scope="module")
def tiny_path(tiny_dir):
    return str(tiny_dir)


def load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(path)


def unused_reward(completions, **kwargs):  # GRPOTrainer requires a reward function; no test generates
    raise AssertionError("not called: the tests never generate")


def grpo_trainer(tmp_path, path, loss_type: str, *, bias_correction: bool = False):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok = load(path)
    args = GRPOConfig(output_dir=str(tmp_path / loss_type), use_cpu=True, report_to="none", disable_tqdm=True,
                      per_device_train_batch_size=B, num_generations=2, max_completion_length=C, beta=BETA,
                      epsilon=CLIP, loss_type=loss_type, use_bias_correction_kl=bias_correction)
    trainer = GRPOTrainer(model=model, reward_funcs=[unused_reward], args=args, processing_class=tok,
                          train_dataset=Dataset.from_list([{"prompt": "What is 2+3?"}] * B))
    return trainer, model


def grpo_batch(trainer, model, *, lengths=LENGTHS):
    """TRL's input dict and rc1's tensors for the same batch; logp carries the graph (TRL's own forward)."""
    g = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(10, 1000, (B, P), generator=g)
    completion_ids = torch.randint(10, 1000, (B, C), generator=g)
    completion_mask = (torch.arange(C) < torch.tensor(lengths).unsqueeze(1)).long()
    ids = torch.cat([prompt_ids, completion_ids], 1)
    attn = torch.cat([torch.ones(B, P, dtype=torch.long), completion_mask], 1)
    logp, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attn, C)
    old = logp.detach() + 0.3 * torch.randn(B, C, generator=g)       # an older policy: ratios on both sides of the clip
    ref = logp.detach() + 0.5 * torch.randn(B, C, generator=g)
    advantages = grpo_advantages(torch.tensor([1.0, 0.0, 0.5, 2.0]), group_size=2)
    trl_inputs = dict(prompt_ids=prompt_ids, prompt_mask=torch.ones(B, P, dtype=torch.long),
                      completion_ids=completion_ids, completion_mask=completion_mask, advantages=advantages,
                      old_per_token_logps=old, ref_per_token_logps=ref, num_items_in_batch=completion_mask.sum())
    return trl_inputs, dict(logp=logp, old_logp=old, advantages=advantages, mask=completion_mask.float(), ref_logp=ref)


def rc1_grpo(t):
    return grpo_token_loss(t["logp"], t["old_logp"], t["advantages"], t["mask"], CLIP, BETA, t["ref_logp"])


def grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_close(a, b, tol=TOL):
    assert abs(float(a) - float(b)) <= tol, f"{float(a)!r} != {float(b)!r}"


# ----------------------------------------------------------------------------- GRPO
@pytest.mark.parametrize("loss_type", ["bnpo", "dapo"])
def test_grpo_loss_and_gradient_equal_trl(tmp_path, tiny_path, loss_type):
    trainer, model = grpo_trainer(tmp_path, tiny_path, loss_type)
    trl_inputs, t = grpo_batch(trainer, model)
    ours = rc1_grpo(t)
    # the batch exercises both branches of the clip
    active = t["mask"].bool()
    clipped = ((ours.ratio < 1 - CLIP) | (ours.ratio > 1 + CLIP))[active]
    assert clipped.any() and not clipped.all()

    ours.loss.backward()
    g_ours = grads(model)
    model.zero_grad()
    theirs = trainer._compute_loss(model, trl_inputs)
    theirs.backward()
    g_trl = grads(model)

    assert_close(ours.loss, theirs)
    assert g_ours.keys() == g_trl.keys() and g_ours
    for name in g_ours:
        assert torch.allclose(g_ours[name], g_trl[name], atol=TOL, rtol=1e-5), name


def test_trl_grpo_and_dr_grpo_differ_from_rc1_only_in_normalisation(tmp_path, tiny_path):
    per_type = {}
    for loss_type in ("grpo", "dr_grpo"):
        trainer, model = grpo_trainer(tmp_path, tiny_path, loss_type)
        trl_inputs, t = grpo_batch(trainer, model)
        per_type[loss_type] = trainer._compute_loss(model, trl_inputs).detach()
    with torch.no_grad():
        ours = rc1_grpo(t)
    per_token = (ours.pg + BETA * ours.kl) * t["mask"]
    n_tokens = t["mask"].sum()
    # "grpo": mean over sequences of each sequence's token mean
    assert_close(per_type["grpo"], (per_token.sum(1) / t["mask"].sum(1)).mean())
    # "dr_grpo": token sum / (B * max_completion_length) = rc1's loss * tokens / (B * C)
    assert_close(per_type["dr_grpo"], ours.loss * n_tokens / (B * C))
    # with unequal lengths the three normalisations give different numbers
    for loss_type, value in per_type.items():
        assert abs(float(value) - float(ours.loss)) > 1e-3, loss_type


def test_trl_grpo_equals_rc1_when_every_completion_has_the_same_length(tmp_path, tiny_path):
    trainer, model = grpo_trainer(tmp_path, tiny_path, "grpo")
    trl_inputs, t = grpo_batch(trainer, model, lengths=[C] * B)
    assert_close(rc1_grpo(t).loss, trainer._compute_loss(model, trl_inputs))


def test_trl_default_weights_the_kl_by_the_importance_ratio(tmp_path, tiny_path):
    trainer, model = grpo_trainer(tmp_path, tiny_path, "bnpo", bias_correction=True)
    trl_inputs, t = grpo_batch(trainer, model)
    with torch.no_grad():
        theirs = trainer._compute_loss(model, trl_inputs)
        ours = rc1_grpo(t)
    per_token = (ours.pg + BETA * ours.ratio * ours.kl) * t["mask"]
    assert_close(theirs, per_token.sum() / t["mask"].sum())
    assert abs(float(theirs) - float(ours.loss)) > 1e-4


def test_group_advantages_equal_trl_formulas():
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([0.0, 0.0, 3.0, 5.0, 5.0, 5.0, 1.0, 2.0, 7.5, 0.2, 0.4, 0.1])
    k = 3
    # trl/trainer/grpo_trainer.py lines 2765-2787 (scale_rewards="group")
    mean = torch.nanmean(rewards.view(-1, k), dim=1).repeat_interleave(k, dim=0)
    std = nanstd(rewards.view(-1, k), dim=1).repeat_interleave(k, dim=0)
    trl_grpo = (rewards - mean) / (std + 1e-4)
    assert torch.allclose(grpo_advantages(rewards, k), trl_grpo, atol=TOL, rtol=0)
    # trl/trainer/rloo_trainer.py lines 1685-1690 (beta folded into the rewards there; 0 here)
    grouped = rewards.view(-1, k)
    baselines = ((torch.nansum(grouped, dim=1, keepdim=True) - grouped) / (k - 1)).view(-1)
    assert torch.allclose(rloo_advantages(rewards, k), rewards - baselines, atol=TOL, rtol=0)


# ----------------------------------------------------------------------------- DPO
def test_dpo_loss_and_gradient_equal_trl_sigmoid(tmp_path, tiny_path):
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    model, tok = load(tiny_path)
    args = DPOConfig(output_dir=str(tmp_path / "dpo"), use_cpu=True, report_to="none", disable_tqdm=True,
                     per_device_train_batch_size=2, beta=BETA, loss_type="sigmoid", precompute_ref_log_probs=True)
    trainer = DPOTrainer(model=model, args=args, processing_class=tok,
                         train_dataset=Dataset.from_list([{"prompt": "Q?", "chosen": "yes", "rejected": "no"}]))
    assert trainer.f_divergence_type == "reverse_kl" and not trainer.use_weighting and trainer.ld_alpha is None
    g = torch.Generator().manual_seed(1)
    n, T = 2, 8                                   # 2 pairs: rows 0-1 chosen, rows 2-3 rejected
    ids = torch.randint(10, 1000, (2 * n, T), generator=g)
    attn = torch.ones(2 * n, T, dtype=torch.long)
    attn[3, -1] = 0
    completion = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0],
                               [0, 0, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 0, 0]])
    mask = completion[:, 1:].float()              # log-probs score tokens 1..T-1
    labels = ids.masked_fill(completion == 0, -100)
    logp = model(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True, use_cache=False).log_probs
    logp = logp[:, -(T - 1):]                     # TRL's own log-probs (the fused head it installed)
    # the reference below the policy on pair 0's chosen / above on its rejected, the other way round on pair 1
    shift = torch.tensor([[0.5], [-0.5], [-0.5], [0.5]])
    ref = logp.detach() - shift + 0.1 * torch.randn(2 * n, T - 1, generator=g)   # junk outside the mask too
    ours = dpo_loss(logp, ref, mask, n, BETA)
    assert (ours.margin > 0).any() and (ours.margin < 0).any()
    ours.loss.backward()
    g_ours = grads(model)
    model.zero_grad()
    ref_seq = (ref * mask).sum(1)
    theirs = trainer._compute_loss(model, dict(input_ids=ids, attention_mask=attn, completion_mask=completion,
                                               ref_chosen_logps=ref_seq[:n], ref_rejected_logps=ref_seq[n:]), False)
    theirs.backward()
    g_trl = grads(model)
    assert_close(ours.loss, theirs)
    assert g_ours.keys() == g_trl.keys() and g_ours
    for name in g_ours:
        assert torch.allclose(g_ours[name], g_trl[name], atol=TOL, rtol=1e-5), name
