"""The reward weights file's schema (configs/weights.json, written by calibration)."""

from __future__ import annotations

from pydantic import field_validator

from rc1.config.names import known_dimensions
from rc1.config.strict import Strict


class PreviousWeights(Strict):
    """The weights file a calibration replaced: kept beside it as <stem>.<sha12>.json."""

    path: str                          # relative to the directory of the weights file
    sha256: str


class WeightsFile(Strict):
    """configs/weights.json: non-negative weights over the reward dimensions, summing to 1."""

    version: str = "v1"
    weights: dict[str, float]
    note: str = ""
    previous: PreviousWeights | None = None

    @field_validator("weights")
    @classmethod
    def _known(cls, v):
        return known_dimensions(v)

    def constraint_errors(self, max_weight: float = 0.5, tol: float = 1e-6) -> list[str]:
        """Each broken constraint as 'weights.<key>: ...'. Kept separate from parsing so a gate can report them."""
        errs = [f"weights.{k}: {w} is negative" for k, w in self.weights.items() if w < 0]
        errs += [f"weights.{k}: {w} exceeds the maximum {max_weight}" for k, w in self.weights.items() if w > max_weight + tol]
        total = sum(self.weights.values())
        if abs(total - 1.0) > tol:
            errs.append(f"weights: sum is {total:.9g}, must be 1 (±{tol:g})")
        return errs
