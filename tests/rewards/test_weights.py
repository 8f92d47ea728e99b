import json

import pytest

from rc1.config.gates import GatesConfig
from rc1.config.schema import RewardSection
from rc1.gates.base import GateContext
from rc1.gates import reward_weights
from rc1.rewards.reward import RewardModel
from rc1.rewards.weights import check_weights, write_weights
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace

GOOD = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
        "format": 0.08, "clarification": 0.10}


def test_repo_weights_file_satisfies_constraints():
    from rc1.rewards.weights import read_weights
    from pathlib import Path
    w = read_weights(None, Path(__file__).resolve().parents[2] / "configs" / "weights.json")
    assert abs(sum(w.values()) - 1) < 1e-6 and max(w.values()) <= 0.5 and min(w.values()) >= 0


@pytest.mark.parametrize("bad,key", [
    ({**GOOD, "correctness": 0.55, "clarity": -0.03}, "weights.clarity"),
    ({**GOOD, "correctness": 0.6, "reasoning": 0.0, "clarity": 0.04}, "weights.correctness"),
    ({**GOOD, "correctness": 0.40}, "sum"),
    ({**GOOD, "fluency": 0.0}, "fluency"),
])
def test_broken_weights_name_the_key(bad, key):
    with pytest.raises(ConfigError) as ei:
        RewardModel(bad, RewardSection(), True)
    assert ei.value.exit_code == 2
    assert key in " ".join([ei.value.message, *ei.value.lines])


def test_gate_passes_good_and_fails_bad(tmp_path):
    ws = Workspace(tmp_path)
    ctx = GateContext(ws=ws, gates=GatesConfig(), round="round1")
    assert not reward_weights.evaluate(ctx).passed  # missing file
    write_weights(ws.path("configs/weights.json"), GOOD, version="t", note="")
    res = reward_weights.evaluate(ctx)
    assert res.passed and res.evidence[0].path == "configs/weights.json"
    ws.path("configs/weights.json").write_text(json.dumps({"weights": {**GOOD, "correctness": 0.6, "reasoning": 0.02,
                                                                        "grounding": 0.05}}))
    res = reward_weights.evaluate(ctx)
    assert not res.passed and any(c.name == "max weight" and not c.passed for c in res.checks)


def test_write_weights_keeps_the_old_file(tmp_path):
    p = tmp_path / "weights.json"
    write_weights(p, GOOD, version="a", note="")
    archived = write_weights(p, {**GOOD, "correctness": 0.44, "clarity": 0.08}, version="b", note="")
    assert archived is not None and archived.exists() and json.loads(archived.read_text())["version"] == "a"
    assert json.loads(p.read_text())["version"] == "b"
    with pytest.raises(ConfigError, match="weights.correctness"):
        check_weights({**GOOD, "correctness": 0.51, "clarity": 0.01})
