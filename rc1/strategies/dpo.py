"""Online DPO: preference pairs from scored rollouts of the same prompt.

For each prompt, its `num_generations` rollouts are scored by the RewardModel; the highest-reward
episode is `chosen`, the lowest `rejected` (a group whose rewards are all equal gives no pair).

    loss = -log sigmoid(beta * ((log pi(c) - log ref(c)) - (log pi(r) - log ref(r))))

with sequence log-probs summed over action tokens (over all of an episode's rows when it was split into
turns) and beta = strategy.dpo_beta. Log-probs, the reference's too, are scored under the sampling
distribution (model.temperature, model.top_p), as online DPO does (TRL's OnlineDPOTrainer divides by
the temperature). A batch without any pair contributes no gradient (its micro-step still counts toward
accumulation). The logged `kl` is the per-token k3 KL(pi || ref) over the pairs' action tokens, as for
every strategy; `sampler_mismatch_kl` as for GRPO (DPO's loss has no per-token term to reweight).
"""

from __future__ import annotations

from dataclasses import replace

from rc1.engines.contract import Batch, LossOutput, PlanTensors, Policy, StepPlan
from rc1.strategies.common import (RolloutStrategy, ScoredRollout, collate, forward_rows, sampler_metrics,
                                   sampling_kwargs)
from rc1.strategies.rl_math import dpo_loss, k3_kl, masked_mean

PAIR_MIN_GAP = 1e-6


class DPOStrategy(RolloutStrategy):
    name = "dpo"

    def __init__(self, cfg, reward_model):
        super().__init__(cfg, reward_model)
        self.beta = cfg.strategy.dpo_beta

    def attach(self, policy: Policy) -> None:
        super().attach(policy)
        policy.use_reference()

    def pairs(self, rewards: list[float]) -> list[tuple[int, int]]:
        g = self.group_size
        out = []
        for start in range(0, len(rewards), g):
            grp = rewards[start:start + g]
            hi = max(range(g), key=lambda i: (grp[i], -i))
            lo = min(range(g), key=lambda i: (grp[i], i))
            if grp[hi] - grp[lo] > PAIR_MIN_GAP:
                out.append((start + hi, start + lo))
        return out

    def plan(self, batch: Batch, ro: ScoredRollout) -> StepPlan:
        import torch

        pairs = self.pairs(ro.rewards)
        metrics = {**ro.stats.record(), "dpo/pairs": len(pairs)}
        if not pairs:
            return StepPlan(tensors=None, loss_fn=self.loss, rollout=ro, metrics=metrics)
        order = [e for pair in pairs for e in pair]  # chosen, rejected, chosen, ...: a pair's rows are consecutive
        t = collate(self.policy, [ro.episodes[i] for i in order])
        t = replace(t, unit=t.episode // 2)  # a micro-batch never cuts a pair (rc1.engines.microbatch)
        with torch.no_grad():
            ref_logp = forward_rows(self.policy, t, self.cfg.run.micro_batch_size, reference=True,
                                    **sampling_kwargs(self.cfg)).logp
        t = replace(t, ref_logp=ref_logp, n_pairs=len(pairs))
        return StepPlan(tensors=t, loss_fn=self.loss, rollout=ro, metrics=metrics)

    def loss(self, policy: Policy, t: PlanTensors | None) -> LossOutput:
        import torch

        if t is None:
            return LossOutput(None, {"kl": None, "ratio": None, "clip_frac": 0.0, "entropy": None})
        out = policy.forward(t.input_ids, t.attention_mask, positions=t.action_mask, entropy=True,
                             **sampling_kwargs(self.cfg))
        logp, mask = out.logp, t.action_mask
        n = (int(t.episode.max()) + 1) // 2  # the pairs of this micro-batch; n_pairs: the plan's
        loss, margin, delta = dpo_loss(logp, t.ref_logp, mask, n, self.beta, episode=t.episode,
                                       interleaved=True, total_pairs=t.n_pairs)
        with torch.no_grad():  # episode 2k is pair k's chosen one, 2k + 1 its rejected one
            delta = delta.detach()
            metrics = {"kl": float(masked_mean(k3_kl(logp.detach(), t.ref_logp), mask)),
                       "ratio": float(masked_mean(torch.exp(delta), mask)),
                       "clip_frac": 0.0,  # DPO has no clipping
                       "entropy": float(masked_mean(out.entropy, mask)),
                       "dpo/margin": float(margin.mean()), "dpo/accuracy": float((margin > 0).float().mean())}
            metrics.update(sampler_metrics(t.sample_logp, logp.detach(), mask))
        return LossOutput(loss, metrics, weight=float(n))  # the metrics of micro-batches average by pairs

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
