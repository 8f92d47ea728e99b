"""Load and validate configs; every error is reported at once as a `dotted.path: message` line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rc1.config.gates import GatesConfig
from rc1.config.schema import TrainConfig
from rc1.config.weights import WeightsFile
from rc1.runtime.atomic import atomic_write_text
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_json
from rc1.runtime.workspace import Workspace

M = TypeVar("M", bound=BaseModel)
_DOTTED_MESSAGE = re.compile(r"^[a-z_]+(\.[a-z_]+)*: ")
EFFECTIVE_CONFIG = "reports/config_effective.yaml"


def format_validation_error(err: ValidationError, prefix: str = "") -> list[str]:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if p != "__root__")
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        path = ".".join(p for p in (prefix, loc) if p)
        if not path and _DOTTED_MESSAGE.match(msg):  # a cross-field check that names its own dotted path
            lines.append(msg)
            continue
        lines.append(f"{path or '<root>'}: {msg}")
    return lines


def read_mapping(path: Path, display: str | os.PathLike | None = None) -> dict:
    """Read a YAML or JSON file that must hold a mapping; one clear ConfigError otherwise."""
    path = Path(path)
    shown = display if display is not None else path
    try:
        return _read_mapping(path)
    except ConfigError as exc:
        raise ConfigError(exc.message.replace(str(path), str(shown), 1), lines=exc.lines) from None


def _read_mapping(path: Path) -> dict:
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else (
            f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "")
        reason = getattr(exc, "problem", None) or getattr(exc, "msg", None) or str(exc)
        raise ConfigError(f"{path}: unreadable {'JSON' if path.suffix == '.json' else 'YAML'}{where}: {reason}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def validate(model: type[M], data: dict, source: str, context: dict | None = None) -> M:
    try:
        return model.model_validate(data, context=context)
    except ValidationError as err:
        lines = format_validation_error(err)
        raise ConfigError(f"{source}: {len(lines)} error(s)", lines=lines) from None


def _resolve(ws: Workspace | None, path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_absolute() or ws is None:
        return p
    return ws.path(p)


def load_train_config(path: str | os.PathLike, ws: Workspace | None = None) -> TrainConfig:
    p = _resolve(ws, path)
    cfg = validate(TrainConfig, read_mapping(p, path), str(path))
    _apply_env_overrides(cfg)
    return cfg


def _apply_env_overrides(cfg: TrainConfig) -> None:
    """Environment overrides the seeds use. RUN_MODE=prod forbids any simulate path."""
    base = os.environ.get("BASE_MODEL")
    if base:
        cfg.model.base = base
        if cfg.base_model is not None:
            cfg.base_model = base
    provider = os.environ.get("SCORER_PROVIDER")
    if provider:
        if provider not in cfg.scorer.providers:
            raise ConfigError(f"SCORER_PROVIDER={provider!r}: unknown provider; known: {sorted(cfg.scorer.providers)}")
        cfg.scorer.provider = provider  # type: ignore[assignment]
    if os.environ.get("RUN_MODE", "").lower() in ("prod", "production") and cfg.simulate:
        raise ConfigError("simulate: true is forbidden when RUN_MODE=prod")


def missing_keys(model: type[BaseModel], data: dict, prefix: str = "") -> list[str]:
    """Dotted paths of `model`'s fields that `data` leaves out (nested models recursively)."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        if name not in data:
            out.append(path)
            continue
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and isinstance(data[name], dict):
            out += missing_keys(sub, data[name], path + ".")
    return out


def load_gates_config(path: str | os.PathLike, ws: Workspace | None = None, *,
                      tasks: Iterable[str] = ()) -> GatesConfig:
    """A gates config states every threshold: a key left out is an error (exit 2), never a silent default.

    `tasks`: the custom task names its mixes may use (the run config's `datasets.tasks`); any other
    name is an unknown task (exit 2)."""
    p = _resolve(ws, path)
    data = read_mapping(p, path)
    cfg = validate(GatesConfig, data, str(path), context={"tasks": tuple(tasks)})
    missing = missing_keys(GatesConfig, data)
    if missing:
        raise ConfigError(f"{path}: {len(missing)} threshold(s) missing; a gates config states every one",
                          lines=[f"{m}: missing" for m in missing])
    return cfg


FITTED = "fitted to custom task(s)"  # how a fitted gates config's note begins its account of the fit
# A run that draws every pool item more than this many times on average (steps x prompts per optimizer step /
# pool size) trains on few distinct prompts; a user task's pool must hold at least steps x batch / this.
MAX_DRAWS_PER_ITEM = 4


def load_run_gates(cfg: TrainConfig, ws: Workspace | None = None) -> GatesConfig:
    """The gates config a run is judged by: `cfg.gates`, validated with the run's custom tasks, and fitted to
    a user task when it is a shipped profile written for the built-in tasks (see `fit_to_user_tasks`).
    Every stage and gate of a run reads its thresholds through this function."""
    return fit_to_user_tasks(load_gates_config(cfg.gates, ws, tasks=cfg.datasets.tasks), cfg)


def fit_to_user_tasks(gates: GatesConfig, cfg: TrainConfig) -> GatesConfig:
    """Thresholds that make sense for a run whose mix names custom tasks its gates file does not.

    Such a gates file (configs/gates_local.yaml, configs/gates.yaml) was written for rc1's generated pool:
    its task mixes become the run's `datasets.mix`, and the pool size it asks for (30,000 generated items)
    becomes what this run draws: steps x prompts per step x gradient accumulation / MAX_DRAWS_PER_ITEM, at
    least `learning_signal.min_prompts`, at most the file's own `pool.min_items` (a pool of custom tasks only;
    generated items fill a mixed one). Checks that measure the generator's design on a user task (distinct-2,
    minimum length, difficulty shares) report themselves not applicable (rc1.data.applicability); duplicates,
    leaks, verifier coverage and learnability keep the file's thresholds. A gates file whose mixes name the
    task is the user's own: taken as written."""
    custom = [t for t, w in cfg.datasets.mix.items() if w > 0 and t in cfg.datasets.tasks]
    named = set(gates.pool.mix) | set(gates.run_config.mix)
    if not custom or named & set(cfg.datasets.tasks):
        return gates
    mix = dict(cfg.datasets.mix)
    note = f"{FITTED} {custom}: pool.mix and run_config.mix = datasets.mix"
    min_items = gates.pool.min_items
    if all(t in cfg.datasets.tasks for t, w in mix.items() if w > 0):  # generated items would fill a mixed pool
        drawn = cfg.total_steps * cfg.strategy.prompts_per_step * cfg.run.gradient_accumulation
        min_items = min(min_items, max(gates.learning_signal.min_prompts, -(-drawn // MAX_DRAWS_PER_ITEM)))
        note += (f", pool.min_items {min_items} (was {gates.pool.min_items}) = max(learning_signal.min_prompts, "
                 f"{drawn} prompts drawn / {MAX_DRAWS_PER_ITEM})")
    # model_copy(update=...): the mixes were validated against the run's tasks above; assignment would
    # re-validate them without that context
    return gates.model_copy(update={
        "pool": gates.pool.model_copy(update={"mix": mix, "min_items": min_items}),
        "run_config": gates.run_config.model_copy(update={"mix": mix}),
        "note": "; ".join(filter(None, [gates.note, note]))})


def load_weights(path: str | os.PathLike, ws: Workspace | None = None, *, max_weight: float = 0.5,
                 check_constraints: bool = True) -> WeightsFile:
    p = _resolve(ws, path)
    wf = validate(WeightsFile, read_mapping(p, path), str(path))
    if check_constraints:
        errs = wf.constraint_errors(max_weight=max_weight)
        if errs:
            raise ConfigError(f"{path}: {len(errs)} constraint(s) broken", lines=errs)
    return wf


def detect_kind(data: dict, path: Path) -> str:
    if path.suffix == ".json" or "weights" in data and not ({"run", "model"} & set(data)):
        return "weights"
    if path.name.startswith("gates") or ({"pool", "difficulty", "scorer"} & set(data) and "run" not in data
                                          and "model" not in data):
        return "gates"
    return "train"


def verify_config_file(path: str | os.PathLike, ws: Workspace | None = None) -> tuple[str, BaseModel]:
    """Validate any rc1 config by its kind (train / gates / weights). Raises ConfigError with every error."""
    p = _resolve(ws, path)
    data = read_mapping(p, path)
    kind = detect_kind(data, p)
    if kind == "weights":
        return kind, load_weights(path, ws)
    if kind == "gates":
        return kind, load_gates_config(path, ws)
    cfg = validate(TrainConfig, data, str(path))
    _apply_env_overrides(cfg)
    # A train config names a gates config and weights: they must load too.
    errs: list[str] = []
    gates = lambda ref, ws: load_run_gates(cfg, ws)  # noqa: E731
    for label, ref, loader in (("gates", cfg.gates, gates), ("reward.weights", cfg.reward.weights, load_weights)):
        try:
            loader(ref, ws)
        except ConfigError as exc:
            errs.append(f"{label}: {exc.message}")
            errs.extend(f"{label}: {line}" for line in exc.lines)
    if errs:
        raise ConfigError(f"{path}: {len(errs)} error(s) in referenced files", lines=errs)
    return kind, cfg


def config_hash(cfg: BaseModel) -> str:
    return sha256_json(cfg.model_dump(mode="json"))


def write_effective_config(ws: Workspace, cfg: TrainConfig, source: str | os.PathLike | None = None) -> Path:
    body = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    header = f"# effective config (rc1); source: {source}; sha256(config): {config_hash(cfg)}\n" if source else ""
    return atomic_write_text(ws.path(EFFECTIVE_CONFIG), header + body)
