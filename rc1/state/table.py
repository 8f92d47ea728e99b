"""The gated state machine as data.

    idle --round1--> round1 --round2--> round2_pass --training_start--> training
      ^                                                                    |
      |                                                             training_done
    reset (operator, audited; never skips a gate)                         v
                                        scale_5000 <--scale_5000-- scale_1000 <--rc1_eval-- eval

Every forward move is conditioned on a gate (rc1.gates.registry.GATES). There are no
auto-transitions: `to_<state>()` does not exist.
"""

from __future__ import annotations

STATES: tuple[str, ...] = ("idle", "round1", "round2_pass", "training", "eval", "scale_1000", "scale_5000")

# trigger, source, dest, gate
TRANSITIONS: tuple[dict, ...] = (
    {"trigger": "pass_round1", "source": "idle", "dest": "round1", "gate": "round1"},
    {"trigger": "pass_round2", "source": "round1", "dest": "round2_pass", "gate": "round2"},
    {"trigger": "start_training", "source": "round2_pass", "dest": "training", "gate": "training_start"},
    {"trigger": "finish_training", "source": "training", "dest": "eval", "gate": "training_done"},
    {"trigger": "pass_rc1", "source": "eval", "dest": "scale_1000", "gate": "rc1_eval"},
    {"trigger": "pass_scale_5000", "source": "scale_1000", "dest": "scale_5000", "gate": "scale_5000"},
)

# Gates whose pass is recorded as a ticket reports/preflight/<dest>.json (SPEC: round1.json, round2_pass.json).
TICKETED = {"round1", "round2_pass", "training", "eval", "scale_1000", "scale_5000"}

# Names `rc1 advance --to` accepts besides the state names.
ALIASES = {"round2": "round2_pass", "train": "training"}


def forward_from(state: str) -> dict | None:
    return next((t for t in TRANSITIONS if t["source"] == state), None)


def path_to(current: str, target: str) -> list[dict]:
    """Transitions from `current` to `target` (forward only); [] if already there."""
    if target not in STATES:
        raise KeyError(target)
    if STATES.index(target) < STATES.index(current):
        raise ValueError(f"{target} lies behind the current state {current}; use `rc1 reset` to start over")
    steps, state = [], current
    while state != target:
        t = forward_from(state)
        assert t is not None
        steps.append(t)
        state = t["dest"]
    return steps
