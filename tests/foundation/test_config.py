import subprocess

import pytest
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.load import load_train_config, verify_config_file
from rc1.runtime.errors import ConfigError
from tests.helpers.cli import REPO, rc1_cmd

runner = CliRunner()
CONFIGS = sorted(p for p in (REPO / "configs").iterdir() if p.suffix in (".yaml", ".yml", ".json"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_validates(path, ws):
    kind, model = verify_config_file(f"configs/{path.name}", ws)
    assert kind in ("train", "gates", "weights")


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.suffix == ".yaml"], ids=lambda p: p.name)
def test_every_yaml_config_starts_with_the_command_that_runs_it(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("#") and ("rc1 " in first or "make " in first), first


def _write(ws, text: str) -> str:
    p = ws.root / "configs" / "bad.yaml"
    p.write_text(text)
    return "configs/bad.yaml"


def test_nested_typo_is_reported_with_dotted_path_and_exit_2_without_traceback(ws):
    rel = _write(ws, "model:\n  lora:\n    rr: 8\n")
    proc = subprocess.run([*rc1_cmd(), "--workdir", str(ws.root), "config", "verify", "--config", rel],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "model.lora.rr: unknown key" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_all_errors_reported_at_once(ws):
    rel = _write(ws, "run:\n  max_stepz: 3\n  seed: abc\nmodel:\n  lora:\n    r: 0\n")
    with pytest.raises(ConfigError) as ei:
        load_train_config(rel, ws)
    lines = ei.value.lines
    assert any(l.startswith("run.max_stepz: unknown key") for l in lines)
    assert any(l.startswith("run.seed:") for l in lines)
    assert any(l.startswith("model.lora.r:") for l in lines)


@pytest.mark.parametrize("text,needle", [
    ("run: [\n", "unreadable YAML"),
    ("- a\n- b\n", "top level must be a mapping"),
    ("engine:\n  name: trl\nstrategy:\n  name: ppo\n", "TRL 1.x has no PPOTrainer"),
    ("engine:\n  name: trl_ppo\nstrategy:\n  name: ppo\n", "use engine.name: pure_pt"),
    ("datasets:\n  mix: {gsm8k: 0.5, hotpotqa: 0.2}\n", "mix must sum to 1"),
    ("target_kl: -1\n", "target_kl"),
    ("model:\n  max_new_tokens: 4096\ndata:\n  max_length: 4096\n", "must exceed model.max_new_tokens"),
    ("engine:\n  name: trl\nstrategy:\n  multi_turn: split_turns\n", "single-turn"),
    ("engine:\n  name: trl\ntarget_kl: 0.03\n", "use kl_control: none or early_stop"),
    ("engine:\n  name: trl\nmodel:\n  top_p: 0.9\n", "without the top-p nucleus"),
    ("strategy:\n  multi_turn: sometimes\n", "strategy.multi_turn"),
    ("strategy:\n  importance_sampling_cap: 0.5\n", "strategy.importance_sampling_cap"),
    ("run: {name: x}\nreward:\n  source: hybird\n", "reward.source"),
    ("run: {name: x}\nreward:\n  dimension_source: {clarty: judge}\n", "reward.dimension_source: unknown reward dimension"),
    ("run: {name: x}\nscorer:\n  max_cost: 5\n  prices: {}\n", "max_cost needs a price for provider 'local'"),
    ("run: {name: x}\nscorer:\n  max_billable_tokens: 0\n", "scorer.max_billable_tokens"),
    ("engine:\n  name: trl\nreward:\n  source: hybrid\n", "reward.source: hybrid (the judge in the reward loop) runs on engine pure_pt"),
    ("engine:\n  clip_coef_high: 0.28\n", "engine.clip_coef_high: 0.28 has no effect: grpo makes one update per"),
])
def test_bad_configs_exit_2_with_one_clear_reason(ws, text, needle):
    rel = _write(ws, text)
    res = runner.invoke(app, ["--workdir", str(ws.root), "config", "verify", "--config", rel])
    assert res.exit_code == 2
    assert needle in res.output


def test_trl_at_beta_0_with_a_target_kl_verifies(ws):
    """TRL logs no KL at beta 0; the drift bound measures the trained policy after training whatever the engine
    logged, so the run is no longer refused for it (TRL's own default since v0.19)."""
    rel = _write(ws, "engine:\n  name: trl\ntarget_kl: 0.03\nmonitor:\n  kl_control: none\nstrategy:\n  kl_coef: 0\n")
    res = runner.invoke(app, ["--workdir", str(ws.root), "config", "verify", "--config", rel])
    assert res.exit_code == 0, res.output


def test_missing_config_file_is_exit_2(ws):
    proc = subprocess.run([*rc1_cmd(), "--workdir", str(ws.root), "config", "verify", "--config", "configs/nope.yaml"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "configs/nope.yaml: config file not found" in proc.stderr


def test_weights_constraint_violation_names_the_key(ws):
    (ws.root / "configs" / "w.json").write_text(
        '{"weights": {"correctness": 0.7, "reasoning": 0.4, "format": -0.1}}')
    res = runner.invoke(app, ["--workdir", str(ws.root), "config", "verify", "--config", "configs/w.json"])
    assert res.exit_code == 2
    assert "weights.correctness" in res.output and "weights.format" in res.output


def test_env_overrides_and_prod_mode(ws, monkeypatch):
    monkeypatch.setenv("BASE_MODEL", "random:qwen3-tiny")
    cfg = load_train_config("configs/local.yaml", ws)
    assert cfg.model.base == "random:qwen3-tiny"
    rel = _write(ws, "simulate: true\n")
    monkeypatch.setenv("RUN_MODE", "prod")
    with pytest.raises(ConfigError, match="RUN_MODE=prod"):
        load_train_config(rel, ws)


def test_effective_config_is_written(ws):
    res = runner.invoke(app, ["--workdir", str(ws.root), "config", "verify", "--config", "configs/local.yaml",
                              "--write-effective"])
    assert res.exit_code == 0, res.output
    text = (ws.root / "reports" / "config_effective.yaml").read_text()
    assert "embedded:smollm2-135m-instruct" in text and "sha256(config)" in text


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("rc1 ")


def test_gates_config_missing_a_threshold_is_refused_with_its_dotted_path(tmp_path):
    import yaml

    from rc1.runtime.workspace import Workspace

    data = yaml.safe_load((REPO / "configs/gates.yaml").read_text())
    del data["shadow_run"]["min_outcomes"]
    del data["not_measurable"]
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs/gates.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        verify_config_file("configs/gates.yaml", Workspace(tmp_path))
    assert err.value.exit_code == 2
    assert sorted(err.value.lines) == ["not_measurable: missing", "shadow_run.min_outcomes: missing"]


def test_not_measurable_never_passes_and_blocks_by_policy():
    from rc1.gates.base import NOT_APPLICABLE, NOT_MEASURABLE, Check, GateResult

    nm = Check.not_measurable("turns not higher", "<= 0", "both models always answer in 1 turn")
    na = Check.not_applicable("clue overlap", "the custom task has no supporting text")
    ok = Check.at_least("x", 1.0, 0.5)
    assert nm.status == NOT_MEASURABLE and not nm.passed and na.status == NOT_APPLICABLE
    assert not GateResult("g", [ok, nm, na]).passed                                  # production: blocks
    warn = GateResult("g", [ok, nm, na], not_measurable_blocks=False)
    assert warn.passed and warn.warnings == [nm] and warn.failing == []              # laptop: warns
    assert GateResult.from_dict(warn.to_dict()).warnings[0].status == NOT_MEASURABLE


def test_every_column_of_the_engine_table_is_enforced_by_the_schema(monkeypatch):
    """An engine that cannot combine epochs with accumulation (none ships today) is refused at config time."""
    import dataclasses

    from rc1.config import registry
    from rc1.config.schema import TrainConfig

    data = {"strategy": {"name": "ppo", "ppo_epochs": 2}, "run": {"gradient_accumulation": 4}}
    TrainConfig.model_validate(data)
    spec = dataclasses.replace(registry.ENGINES["pure_pt"], accumulates_multi_epoch=False)
    monkeypatch.setitem(registry.ENGINES, "pure_pt", spec)
    with pytest.raises(ValueError, match="cannot combine strategy.ppo_epochs 2 with run.gradient_accumulation 4"):
        TrainConfig.model_validate(data)
