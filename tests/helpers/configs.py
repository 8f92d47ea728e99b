"""Config files for test workspaces: the shipped files with a few keys changed.

A gates config must state every threshold (rc1.config.load.load_gates_config), so tests start from a
shipped one and override what they need instead of writing a partial file."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def gates_yaml(overrides: dict | None = None, base: str = "configs/gates_local.yaml") -> str:
    """YAML text of the shipped gates config `base` with `overrides` merged in (nested dicts merge)."""
    data = yaml.safe_load((REPO / base).read_text())
    return yaml.safe_dump(deep_merge(data, overrides or {}), sort_keys=False)
