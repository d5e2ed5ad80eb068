"""What a reward model's raw output becomes before a trainer sees it.

- ``raw`` (the default): the model's output as it is. For GRPO-style training this is usually
  right: the advantage of a completion is its reward minus the mean of its group, divided by the
  group's standard deviation (TRL's ``GRPOConfig.scale_rewards="group"``, its default), so any
  ``a * r + b`` with ``a > 0`` gives the same advantages - a reward model's arbitrary offset and
  scale (a Bradley-Terry model is defined only up to an offset) cancel, and a squashing
  transform would only compress the differences the normalisation is there to read. Two cases
  where the scale does matter: without the division (``scale_rewards="none"``, Dr. GRPO) it sets
  the advantages' size; and when the model is one of several rewards summed before the
  normalisation (TRL's ``reward_weights``, a `Combine`), it weighs against the others - there,
  ``normalized`` (or a weight) puts it on a known scale.
- ``sigmoid``: ``1 / (1 + exp(-r))``, the Bradley-Terry probability of beating a response
  scored 0; in [0, 1], for combining with rule rewards on that scale or for PPO-style trainers
  that do not normalise by group.
- ``normalized``: ``(r - mean) / std`` with the mean and standard deviation measured once on
  the model's scores of representative data, read from a calibration file
  ``{"mean": ..., "std": ...}``: a stable scale across prompts and runs.

``clip: [lo, hi]`` then bounds the value (applied after the transform).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Shaping = Literal["raw", "sigmoid", "normalized"]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The mean and standard deviation of a reward model's raw scores on reference data."""

    mean: float
    std: float

    @classmethod
    def read(cls, path: str | Path) -> Calibration:
        """The calibration in a JSON file ``{"mean": ..., "std": ...}``; a `ValueError` saying
        what is wrong with it otherwise."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise ValueError(f'{path} should hold {{"mean": ..., "std": ...}}')
        values = {}
        for key in ("mean", "std"):
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{path}: {key!r} should be a finite number, got {value!r}")
            values[key] = float(value)
        if values["std"] <= 0:
            raise ValueError(f"{path}: 'std' should be greater than 0, got {values['std']}")
        return cls(values["mean"], values["std"])


@dataclass(frozen=True, slots=True)
class OutputShaping:
    """The function from a raw output to the value (see the module docstring)."""

    shaping: Shaping = "raw"
    calibration: Calibration | None = None
    clip: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.shaping == "normalized" and self.calibration is None:
            raise ValueError("shaping: normalized needs a calibration")

    def __call__(self, raw: float) -> float:
        if self.shaping == "sigmoid":
            value = _sigmoid(raw)
        elif self.shaping == "normalized" and self.calibration is not None:
            value = (raw - self.calibration.mean) / self.calibration.std
        else:
            value = raw
        if self.clip is not None:
            value = min(max(value, self.clip[0]), self.clip[1])
        return value


def _sigmoid(x: float) -> float:
    # Written for both signs so that exp never overflows.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
