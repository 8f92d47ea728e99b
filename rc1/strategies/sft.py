"""SFT on gold answers: a warm start that teaches the action protocol's answer line.

Each sampled item becomes its first prompt (rc1.envs: protocol system prompt + messages, through
the tokenizer's chat template) followed by `ANSWER: <gold>` and the end-of-turn token; the loss
is the mean negative log-likelihood of those answer tokens. No rollouts, no reward.
"""

from __future__ import annotations

from dataclasses import replace

from rc1.engines.contract import Batch, LossOutput, PlanTensors, Policy, StepPlan
from rc1.envs.episode import TurnSample
from rc1.strategies.common import collate
from rc1.strategies.rl_math import masked_mean, token_weights


class SFTStrategy:
    name = "sft"

    def __init__(self, cfg, reward_model):
        self.cfg = cfg
        self.reward_model = reward_model
        self.policy: Policy | None = None
        self._fmt = None

    def attach(self, policy: Policy) -> None:
        self.policy = policy

    def _format(self):
        if self._fmt is None:
            from rc1.envs.env import ChatFormat

            self._fmt = ChatFormat(self.policy.tokenizer)
        return self._fmt

    def example(self, item: dict):
        from rc1.envs.env import episode_messages

        fmt = self._format()
        prompt = fmt.prompt_ids(episode_messages(item))
        eos = self.policy.tokenizer.eos_token_id
        answer = fmt.encode(f"ANSWER: {item['answer']}") + [min(fmt.eos_ids) if eos is None else eos]
        return TurnSample(input_ids=prompt + answer, action_mask=[0] * len(prompt) + [1] * len(answer))

    def rollout(self, batch: Batch) -> None:
        return None  # SFT learns from gold answers: no rollouts

    def plan(self, batch: Batch, rollout: None = None) -> StepPlan:
        examples = [self.example(it) for it in batch.items]
        n = len(examples)
        t = collate(self.policy, examples)
        tensors = replace(t, token_weight=token_weights(t.action_mask))  # the whole plan's token mean
        return StepPlan(tensors=tensors, loss_fn=self.loss,
                        metrics={"completion_len": sum(sum(e.action_mask) for e in examples) / n, "reward": None})

    def loss(self, policy: Policy, t: PlanTensors) -> LossOutput:
        import torch

        out = policy.forward(t.input_ids, t.attention_mask, positions=t.action_mask, entropy=True)
        mask = t.action_mask
        w = t.token_weight  # this micro-batch's share of the plan's token mean (absent: a whole plan)
        loss = masked_mean(-out.logp, mask) if w is None else (-out.logp * w).sum()
        with torch.no_grad():
            metrics = {"kl": None, "ratio": None, "clip_frac": 0.0, "entropy": float(masked_mean(out.entropy, mask)),
                       "sft/token_acc_proxy": float(masked_mean(out.logp.exp(), mask))}
        return LossOutput(loss, metrics)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
