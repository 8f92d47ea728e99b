"""Round 2: the base policy, rolled out as training will roll it out, gives a learning signal.

Reads reports/learning_signal.json (made by `rc1 learning-signal --config P`, rc1.training.learning_signal),
refuses it unless its sha256 sidecar verifies and its identity is the current config's (model,
generation settings, group size, sampler, training data and weights), then checks, thresholds from
the gates config `learning_signal:`

  prompts measured                     >= min_prompts
  pass rate                            >  pass_rate_min   (a pass rate of 0 is refused)
  pass@k (k = num_generations)         >= pass_at_k_min
  truncation rate                      <= truncation_max
  groups without a correctness signal  <= no_signal_max   (all answers right, or all wrong)
  expected informative groups          >= informative_groups_min: steps x prompts per step x the Wilson
                                          95 % lower bound of the informative share (a run with about
                                          two informative groups in its life cannot learn)

A refusal names the fix that its measurements point to: raise model.max_new_tokens when answers are
cut off, otherwise easier items or a different model.
"""

from __future__ import annotations

from rc1.gates.base import Check, GateContext, GateResult, read_identified_report
from rc1.runtime.layout import LEARNING_SIGNAL_REPORT as REPORT



def fixes(rep: dict, cfg, g) -> str:
    hints = []
    if rep["truncation_rate"] > g.truncation_max:
        hints.append(f"raise model.max_new_tokens (now {cfg.model.max_new_tokens}): "
                     f"{rep['truncation_rate']:.0%} of the answers were cut off")
    if rep["pass_rate"] <= g.pass_rate_min or rep["pass_at_k"] < g.pass_at_k_min:
        hints.append("pick easier items (priority_sampling.by_difficulty toward easy, or an easier task mix)")
        hints.append(f"or use a stronger base model than {cfg.model.base}")
    return "; ".join(hints)


def evaluate(ctx: GateContext) -> GateResult:
    res = GateResult("learning_signal")
    g = ctx.gates.learning_signal
    cfg = ctx.config
    cmd = f"rc1 learning-signal --config {ctx.config_path or 'P'}"
    if cfg is None:
        res.checks.append(Check("run config", None, "given", False, "the learning signal is measured for a run config"))
        return res
    from rc1.training.learning_signal import signal_identity

    got = read_identified_report(ctx, res, REPORT, "learning-signal", cmd, signal_identity,
                                 " (base-policy rollouts on the training pool)")
    if got is None:
        return res
    rep, ident, settings = got
    res.checks.append(Check("learning-signal report is for this config", ident[:12], f"== {ident[:12]}", True,
                            f"model {settings['model']}, max_new_tokens {settings['max_new_tokens']}, "
                            f"temperature {settings['temperature']}, {settings['num_generations']} per prompt"))
    fix = fixes(rep, cfg, g)
    detail = f"{rep['episodes']} episodes of {rep['prompts']} prompts" + (f"; fix: {fix}" if fix else "")
    res.checks.append(Check.at_least("prompts measured", rep["prompts"], g.min_prompts))
    res.checks.append(Check.greater("base pass rate", round(rep["pass_rate"], 4), g.pass_rate_min, detail))
    res.checks.append(Check.at_least(f"pass@{rep['group_size']}", round(rep["pass_at_k"], 4), g.pass_at_k_min, detail))
    res.checks.append(Check.at_most("truncation rate", round(rep["truncation_rate"], 4), g.truncation_max, detail))
    res.checks.append(Check.at_most("groups without a correctness signal", round(rep["no_success_signal_group_frac"], 4),
                                    g.no_signal_max, "all answers of a prompt right, or all wrong: GRPO learns nothing "
                                                     "about correctness from them"))
    res.checks.append(informative_groups(rep, cfg, g))
    return res


def informative_groups(rep: dict, cfg, g) -> Check:
    """Expected groups with a correctness signal over the run, on the Wilson lower bound of the measured share."""
    from rc1.training.learning_signal import informative_bounds

    groups = int(rep["prompts"])
    informative, lo, hi, planned = informative_bounds(groups, rep["no_success_signal_group_frac"], cfg)
    expected = planned * lo
    rounds = rep.get("rounds", 1)
    return Check.at_least("expected informative groups over the run", round(expected, 1), g.informative_groups_min,
                          f"{informative}/{groups} measured groups informative (95% CI [{lo:.2f}, {hi:.2f}]"
                          + (f"; measured in {rounds} rounds: the first straddled the threshold" if rounds > 1 else "")
                          + f") x {planned} planned groups ({cfg.run.max_steps} steps x {cfg.strategy.prompts_per_step} "
                          f"prompts x {cfg.run.gradient_accumulation} accumulation) = {expected:.1f} at the lower bound")
