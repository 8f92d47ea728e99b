"""What the recipe watches while it trains: reward vs verified success, and the KL against target_kl.

Reward/success divergence (reward hacking). Over the last `window` steps (config `monitor`), the
reward's trend is Kendall's tau of the step rewards against the step index (scipy.stats.kendalltau,
one-sided p-value). When the reward rises (tau > 0, p < alpha) while verified success does not
(its mean over the window's second half is not above its first half's), the monitor raises ONE
alert for that episode of divergence (it re-arms once success catches up or the reward stops
rising). An alert names the window, both trends, and what moved instead: the shaping dimensions
that rose most, the truncation rate, the KL and the entropy. TRL and verl users have asked for this
(trl#6350, verl#7004).

KL control. `target_kl` means the same for every strategy: the per-token KL(pi || ref), k3
estimator, mean over action tokens, in nats (what every strategy logs as `kl`). With
`kl_control: adaptive` (the default), the KL coefficient of the strategy's loss (GRPO/RLOO beta, PPO's
reward penalty) follows the measured KL at each optimizer step (KL = the mean over its micro-steps, so N
processes adapt exactly as one process with accumulation N) with an update of its logarithm whose error is
capped from above (rc1.strategies.rl_math.MeanKLController):
    log coef <- log coef + kl_adapt_rate * min(KL / target_kl - 1, kl_error_cap)
which holds the MEAN KL at target_kl (a winsorized mean: one heavy-tailed step moves the coefficient by at
most exp(kl_adapt_rate x kl_error_cap), 1.35 x at the defaults): the statistic the training_done gate's drift bound
(kl_tolerance x target_kl, on the trained policy) judges, so the controller's set point sits at 1 /
kl_tolerance of the bound (0.67 x at 1.5) instead of on it. `adaptive_sign` is the earlier controller,
    coef <- max(kl_coef_min, coef * (1 + clip(KL / target_kl - 1, -0.2, 0.2) * kl_adapt_rate))
whose clipped error makes it hold the per-step MEDIAN at target: with heavy-tailed per-step KL its mean
ran 1.4-1.5 x target, at the old gate's own tolerance. `kl_coef_min` (none unless set) floors either.
With `kl_control: early_stop`, the run stops (reason `target_kl`) once the mean KL of the last
`window` optimizer steps exceeds kl_stop_factor * target_kl (PPO's per-update early stop, SB3); `none`
keeps the strategy's coefficient fixed (beta 0 included). Whatever the mode, the KL stays a logged metric,
and the monitor raises an alert (kind `kl_above_bound`; it does not block) when the window's mean KL
exceeds kl_stop_factor * target_kl; the training_done gate judges the trained policy's drift itself,
measured after training (rc1.eval.drift).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rc1.engines.contract import KLAdjustable
from rc1.eval.runs import DIVERGENCE_ALERT
from rc1.strategies.rl_math import AdaptiveKLController, MeanKLController


def _mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


@dataclass
class Alert:
    step: int
    kind: str
    message: str
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"step": self.step, "kind": self.kind, "message": self.message, **self.detail}


class DivergenceMonitor:
    KIND = DIVERGENCE_ALERT

    def __init__(self, window: int, alpha: float):
        if window < 4:
            raise ValueError("monitor.window must be >= 4 steps")
        self.window = window
        self.alpha = alpha
        self.history: list[dict] = []
        self.armed = True

    def observe(self, record: dict) -> Alert | None:
        """Add one step's metrics; an Alert when the reward/success divergence starts at this step."""
        if record.get("reward") is None or record.get("success") is None:
            return None
        keep = {k: v for k, v in record.items() if k in ("step", "reward", "success", "kl", "entropy", "truncated")
                or k.startswith("reward/")}
        self.history.append(keep)
        self.history = self.history[-self.window:]
        if len(self.history) < self.window:
            return None
        from scipy.stats import kendalltau

        rewards = [h["reward"] for h in self.history]
        success = [h["success"] for h in self.history]
        half = self.window // 2
        tau, p = kendalltau(range(self.window), rewards, alternative="greater")
        rising = tau is not None and not math.isnan(tau) and tau > 0 and p < self.alpha
        s_first, s_second = _mean(success[:half]), _mean(success[half:])
        success_flat = s_second <= s_first
        diverging = rising and success_flat
        if not diverging:
            self.armed = True
            return None
        if not self.armed:
            return None
        self.armed = False
        first, second = self.history[:half], self.history[half:]
        moved = {}
        for k in first[0]:
            if k.startswith("reward/") and k != "reward/correctness":
                a, b = _mean([h.get(k) for h in first]), _mean([h.get(k) for h in second])
                if a is not None and b is not None:
                    moved[k[len("reward/"):]] = round(b - a, 4)
        top = sorted(moved.items(), key=lambda kv: -kv[1])[:3]
        step0, step1 = self.history[0]["step"], self.history[-1]["step"]
        r_first, r_second = _mean(rewards[:half]), _mean(rewards[half:])
        detail = {"window": [step0, step1], "reward": [r_first, r_second], "kendall_tau": float(tau),
                  "p_value": float(p), "success": [s_first, s_second], "shaping_gains": dict(top),
                  "truncated": [_mean([h.get("truncated") for h in first]), _mean([h.get("truncated") for h in second])],
                  "kl": [_mean([h.get("kl") for h in first]), _mean([h.get("kl") for h in second])],
                  "entropy": [_mean([h.get("entropy") for h in first]), _mean([h.get("entropy") for h in second])]}
        gains = ", ".join(f"{k} {v:+.3f}" for k, v in top) or "none"
        msg = (f"reward rose {r_first:.3f} -> {r_second:.3f} over steps {step0}-{step1} (Kendall tau {tau:.2f}, "
               f"p={p:.3f}) while verified success did not ({s_first:.1%} -> {s_second:.1%}); what rose instead: "
               f"{gains}")
        return Alert(step1, self.KIND, msg, detail)

    def state_dict(self) -> dict:
        return {"history": list(self.history), "armed": self.armed}

    def load_state_dict(self, state: dict) -> None:
        self.history = list(state.get("history", []))
        self.armed = bool(state.get("armed", True))


class KLControl:
    """Holds the measured per-token KL near target_kl (see the module docstring)."""

    ALERT = "kl_above_bound"

    def __init__(self, target: float | None, mode: str, adapt_rate: float, stop_factor: float, window: int,
                 coef_min: float | None = None, error_cap: float | None = None):
        self.target, self.mode, self.coef_min, self.error_cap = target, mode, coef_min, error_cap
        self.adapt_rate, self.stop_factor, self.window = adapt_rate, stop_factor, window
        self.kls: list[float] = []
        self.coefs: list[float] = []
        self.alert_armed = True

    def observe(self, kl: float | None, strategy) -> str | None:
        """Record one step's KL; adapt the strategy's coefficient, or return a stop reason."""
        if kl is None or self.target is None:
            return None
        self.kls.append(float(kl))
        if self.mode in ("adaptive", "adaptive_sign") and isinstance(strategy, KLAdjustable):
            if self.mode == "adaptive":
                ctl = MeanKLController(strategy.kl_coef, self.target, gain=self.adapt_rate, floor=self.coef_min,
                                       error_cap=self.error_cap)
            else:
                ctl = AdaptiveKLController(strategy.kl_coef, self.target, horizon=1.0 / self.adapt_rate,
                                           floor=self.coef_min)
            ctl.update(float(kl), 1)
            strategy.set_kl_coef(ctl.value)
        if isinstance(strategy, KLAdjustable):
            self.coefs.append(float(strategy.kl_coef))
        recent = self.kls[-self.window:]
        if self.mode == "early_stop" and len(recent) >= self.window and _mean(recent) > self.stop_factor * self.target:
            return (f"target_kl: mean KL {_mean(recent):.4f} nats/token over the last {self.window} steps exceeds "
                    f"{self.stop_factor:g} x target_kl {self.target:g}")
        return None

    def alert(self, step: int) -> Alert | None:
        """An alert (not a stop) when the window's mean KL first exceeds kl_stop_factor x target_kl; re-armed
        once it is back under."""
        recent = self.kls[-self.window:]
        if self.target is None or len(recent) < self.window:
            return None
        mean, limit = _mean(recent), self.stop_factor * self.target
        if mean <= limit:
            self.alert_armed = True
            return None
        if not self.alert_armed:
            return None
        self.alert_armed = False
        coef = f"; KL coefficient now {self.coefs[-1]:.4g}" if self.coefs else ""
        return Alert(step, self.ALERT, f"mean KL {mean:.4f} nats/token over the last {len(recent)} steps exceeds "
                                       f"{self.stop_factor:g} x target_kl {self.target:g}{coef} (logged, not a stop: "
                                       "the training_done gate measures the trained policy's drift)",
                     {"window_mean": mean, "limit": limit})

    def summary(self) -> dict:
        recent = self.kls[-self.window:]
        return {"units": "per-token KL(pi || ref), k3 estimator, mean over action tokens, nats",
                "target": self.target, "control": self.mode, "steps_measured": len(self.kls),
                "mean": _mean(self.kls), "max": max(self.kls) if self.kls else None,
                "median": sorted(self.kls)[len(self.kls) // 2] if self.kls else None,
                "last_window_mean": _mean(recent), "last_window": len(recent),
                "coef_min": min(self.coefs) if self.coefs else None, "coef_max": max(self.coefs) if self.coefs else None,
                "coef_last": self.coefs[-1] if self.coefs else None}

    def state_dict(self) -> dict:
        return {"kls": list(self.kls), "coefs": list(self.coefs), "alert_armed": self.alert_armed}

    def load_state_dict(self, state: dict) -> None:
        self.kls = [float(x) for x in state.get("kls", [])]
        self.coefs = [float(x) for x in state.get("coefs", [])]
        self.alert_armed = bool(state.get("alert_armed", True))
