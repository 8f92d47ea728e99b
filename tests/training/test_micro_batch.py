"""run.micro_batch_size: a plan's rows go through forward/backward in micro-batches whose gradients add up
to the whole batch's, for every strategy and loss type (the strategies normalise with the plan's counts,
rc1.engines.microbatch); bad micro-batch sizes exit 2 naming the key and a value that works."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.engines.contract import Batch
from rc1.engines.microbatch import row_slices
from rc1.envs.rollout import generate_episodes
from rc1.runtime.workspace import Workspace
from rc1.strategies.common import score_rollout
from rc1.training.base import make_recipe
from tests.helpers.items import make_item
from tests.helpers.qwen3 import qwen3_tiny_dir
from tests.helpers.scripted import ScriptedLM

TOOL_THEN_ANSWER = ["Look it up.\n</think>\n\nTOOL: wiki river Paris\n", "Found it.\n</think>\n\nANSWER: Seine"]
WRONG = ["No idea.\n</think>\n\nANSWER: Thames"]
SHORT_RIGHT = ["Easy.\n</think>\n\nANSWER: Seine"]


def _recipe(tmp_path, strategy, extra=None):
    from tests.helpers.workspace import make_workspace

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, qwen3_tiny_dir(), strategy=strategy, method="full",
                          extra={"strategy.num_generations": 4, "strategy.prompts_per_step": 2,
                                 "strategy.kl_coef": 0.1, "data.max_length": 1024, **(extra or {})})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    return recipe


def _episodes(tok, item, scripts):
    return [generate_episodes(ScriptedLM(tok, s, tail="<think>\n"), tok, [item], greedy=True, max_new_tokens=32,
                              multi_turn="auto")[0] for s in scripts]


def _plan(recipe, strategy):
    """A plan of two prompts x four episodes, split multi-turn episodes (2 rows) among single-turn ones."""
    a, b = make_item(), make_item(id="t-2")
    if strategy == "sft":
        return recipe.strategy.plan(Batch(0, (a, b, a), 1), None)
    tok = recipe.engine.tokenizer
    episodes = (_episodes(tok, a, [TOOL_THEN_ANSWER, WRONG, SHORT_RIGHT, WRONG])
                + _episodes(tok, b, [WRONG, TOOL_THEN_ANSWER, WRONG, WRONG]))
    ro = score_rollout([a] * 4 + [b] * 4, episodes, recipe.reward_model, group_size=4)
    return recipe.strategy.plan(Batch(0, (a, b), 1), ro)


def _grads(engine):
    out = [p.grad.detach().clone() for p in engine.trainable_parameters()]
    engine.optimizer.zero_grad(set_to_none=True)
    return out


CASES = [("grpo", {"strategy.loss_type": "token"}), ("grpo", {"strategy.loss_type": "sequence"}),
         ("grpo", {"strategy.loss_type": "dr_grpo"}), ("rloo", {}), ("ppo", {"strategy.entropy_coef": 0.01}),
         ("dpo", {}), ("sft", {})]


@pytest.mark.parametrize(("strategy", "extra"), CASES, ids=[f"{s}-{'-'.join(map(str, e.values()))}" for s, e in CASES])
def test_micro_batches_give_the_whole_batch_gradient(tmp_path, strategy, extra):
    recipe = _recipe(tmp_path, strategy, extra)
    engine = recipe.engine
    plan = _plan(recipe, strategy)
    rows = plan.tensors.input_ids.shape[0]
    micro = 2 if strategy == "dpo" else 1  # the smallest micro-batch the strategy takes (DPO: one pair)
    slices = row_slices(plan.tensors, micro)
    assert len(slices) > 1 and sum(s.stop - s.start for s in slices) == rows
    engine.micro_batch_size = None
    whole = engine.backward(plan, scale=0.5)
    g_whole = _grads(engine)
    engine.micro_batch_size = micro
    parts = engine.backward(plan, scale=0.5)
    g_parts = _grads(engine)
    assert any(g.abs().sum() > 0 for g in g_whole)
    for a, b in zip(g_whole, g_parts, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    assert parts["loss"] == pytest.approx(whole["loss"], rel=1e-5, abs=1e-7)
    for key in ("kl", "entropy", "ratio"):  # token means over the plan, whatever the cut (DPO: by pairs)
        if whole.get(key) is not None and strategy != "dpo":
            assert parts[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-6)
    # the plan's own no-gradient forwards (reference, old log-probs, values) run in the same micro-batches
    recipe.cfg.run.micro_batch_size = micro
    cut = _plan(recipe, strategy)
    for key in ("ref_logp", "old_logp", "old_values", "advantages", "token_weight"):
        if getattr(plan.tensors, key) is not None:
            torch.testing.assert_close(getattr(cut.tensors, key), getattr(plan.tensors, key), rtol=1e-4, atol=1e-5)


def test_dpo_micro_batches_never_cut_a_pair(tmp_path):
    recipe = _recipe(tmp_path, "dpo")
    plan = _plan(recipe, "dpo")
    t = plan.tensors
    for s in row_slices(t, 2):
        eps = t.episode[s]
        assert eps.numel() and int(eps[0]) % 2 == 0 and int(eps[-1]) % 2 == 1  # chosen ... its rejected partner


@pytest.mark.parametrize(("over", "message"), [
    ({"run.micro_batch_size": 9}, "run.micro_batch_size: 9 exceeds the rollout batch of a step (8 rows"),
    ({"run.micro_batch_size": 1, "strategy.name": "dpo"}, "run.micro_batch_size: 1 cannot hold a DPO pair"),
    ({"run.micro_batch_size": 3, "strategy.name": "sft"}, "run.micro_batch_size: 3 exceeds the rollout batch of a "
                                                           "step (2 rows"),
    ({"run.micro_batch_size": 3, "engine.name": "trl", "run.gradient_accumulation": 1, "monitor.kl_control": "early_stop"},
     "run.micro_batch_size: 3 does not divide the 8 rows TRL trains on per process and optimizer step"),
    ({"strategy.ppo_epochs": 2}, "strategy.ppo_epochs: 2 applies to strategy ppo on engine pure_pt"),
])
def test_bad_micro_batch_exits_2_naming_the_key_and_a_value(tmp_path, over, message):
    from tests.helpers.cli import run_cli
    from tests.helpers.workspace import make_workspace

    conf = make_workspace(tmp_path, qwen3_tiny_dir(), extra={"strategy.num_generations": 4,
                                                             "strategy.prompts_per_step": 2, **over})
    res = run_cli(Workspace(tmp_path), "config", "verify", "--config", str(conf))
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())  # the console wraps long lines
    assert message in out
    works = {"exceeds the rollout batch of a step (8": "use 8", "DPO pair": "use 2", "(2 rows": "use 2",
             "TRL trains": "use 2", "ppo_epochs": "use 1"}
    assert any(k in message and v in out for k, v in works.items()), out


def test_trl_gets_the_micro_batch_as_its_per_device_batch(tmp_path):
    from rc1.engines.trl_engine import TRLEngine

    ws = Workspace(tmp_path)
    from tests.helpers.workspace import make_workspace

    conf = make_workspace(tmp_path, qwen3_tiny_dir(), engine="trl", grad_accum=2,
                          extra={"strategy.num_generations": 4, "strategy.prompts_per_step": 2,
                                 "run.micro_batch_size": 4})
    cfg = load_train_config(conf, ws)
    engine = TRLEngine(ws)
    engine.cfg = cfg
    args = engine.batch_args()
    # 2 prompts x 4 completions x 2 accumulation = 16 rows per optimizer step, 4 per forward/backward
    assert args == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4}


def test_token_loss_is_a_token_mean_over_the_accumulation_window(tmp_path):
    """DAPO, not BNPO: two micro-steps of N1 and N2 action tokens weigh N1 / (N1 + N2) and N2 / (N1 + N2) in the
    window's gradient (BNPO, each plan's token mean averaged, would weigh 1/2 and 1/2)."""
    recipe = _recipe(tmp_path, "grpo", {"run.gradient_accumulation": 2})
    engine = recipe.engine
    tok = recipe.engine.tokenizer
    a, b = make_item(), make_item(id="t-2")
    plans = []
    for item, scripts in ((a, [TOOL_THEN_ANSWER, WRONG, TOOL_THEN_ANSWER, WRONG]), (b, [SHORT_RIGHT, WRONG] * 2)):
        eps = _episodes(tok, item, scripts)
        ro = score_rollout([item] * 4, eps, recipe.reward_model, group_size=4)
        plans.append(recipe.strategy.plan(Batch(0, (item,), 1), ro))
    n1, n2 = (float(p.tensors.action_mask.sum()) for p in plans)
    assert n1 != n2
    singles = []
    for p in plans:  # each plan's own token-mean gradient
        engine.backward(p, scale=1.0)
        singles.append(_grads(engine))
    scales = [recipe.backward_scale(p, 2) for p in plans]
    for p, s in zip(plans, scales):
        engine.backward(p, scale=s)
    factor = recipe.window_grad_scale(2)
    assert recipe.window_tokens == 0.0  # the count restarts with the next window
    # hand-computed: R = max_new_tokens 8 x 8 rows = 64; scale_k = 1/2 * N_k / 64; factor = 2 * 64 / (N1 + N2)
    assert scales[0] == pytest.approx(0.5 * n1 / 64) and factor == pytest.approx(128 / (n1 + n2))
    assert scales[0] * factor == pytest.approx(n1 / (n1 + n2)) and scales[1] * factor == pytest.approx(n2 / (n1 + n2))
    window = [g * factor for g in _grads(engine)]
    dapo = [(n1 * g1 + n2 * g2) / (n1 + n2) for g1, g2 in zip(*singles)]
    bnpo = [(g1 + g2) / 2 for g1, g2 in zip(*singles)]
    for w, d in zip(window, dapo, strict=True):
        torch.testing.assert_close(w, d, rtol=1e-4, atol=1e-7)
    assert any(not torch.allclose(w, x, rtol=1e-3, atol=1e-6) for w, x in zip(window, bnpo))


def test_window_renormalisation_only_where_a_window_token_mean_is_asked(tmp_path):
    recipe = _recipe(tmp_path, "grpo", {"strategy.loss_type": "sequence", "run.gradient_accumulation": 2})
    plan = _plan(recipe, "grpo")
    assert recipe.backward_scale(plan, 2) == 0.5 and recipe.window_grad_scale(2) == 1.0


def test_grpo_without_kl_skips_the_rows_without_gradient_and_keeps_the_gradient(tmp_path):
    """With beta 0 and no target_kl, rows whose advantage is 0 skip forward and backward (rc1.strategies.grpo):
    the gradient is the one every row gives; a batch without any runs no forward, and every parameter still gets
    its zero gradient (AdamW's moments carry on as with the full batch). With a KL term every row is read."""
    from dataclasses import replace

    recipe = _recipe(tmp_path, "grpo", {"strategy.kl_coef": 0.0, "target_kl": None})
    engine, grpo = recipe.engine, recipe.strategy
    assert not grpo.measure_kl
    plan = _plan(recipe, "grpo")
    rows = plan.tensors.rows
    for zeros in (slice(2, 6), slice(0, rows)):  # some rows without gradient, then all of them
        adv = plan.tensors.advantages.clone()
        adv[zeros] = 0.0
        cut = replace(plan, tensors=replace(plan.tensors, advantages=adv))
        skipped = engine.backward(cut, scale=1.0)
        g_skipped = _grads(engine)
        read = grpo.rows_with_gradient
        grpo.rows_with_gradient = lambda t: t  # every row through the loss
        try:
            full = engine.backward(cut, scale=1.0)
        finally:
            grpo.rows_with_gradient = read
        g_full = _grads(engine)
        live = int((adv != 0).sum())
        assert skipped["loss_rows_frac"] == pytest.approx(live / rows) and full["loss_rows_frac"] == 1.0
        assert skipped["loss"] == pytest.approx(full["loss"], rel=1e-5, abs=1e-7)
        for a, b in zip(g_full, g_skipped, strict=True):  # _grads reads every parameter's gradient: none is None
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)
        assert (live > 0) == any(g.abs().sum() > 0 for g in g_skipped)
    # with a KL term a row of advantage 0 still has a gradient once the policy left its reference: nothing is skipped
    with_kl = _recipe(tmp_path / "kl", "grpo")
    with torch.no_grad():
        for p in with_kl.engine.trainable_parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    plan = _plan(with_kl, "grpo")
    zero = replace(plan, tensors=replace(plan.tensors, advantages=torch.zeros_like(plan.tensors.advantages)))
    assert with_kl.engine.backward(zero, scale=1.0)["loss_rows_frac"] == 1.0
    assert any(g.abs().sum() > 0 for g in _grads(with_kl.engine))
