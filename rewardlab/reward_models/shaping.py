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
  ``normalized``, ``group`` (or a weight) puts it on a known scale.
- ``sigmoid``: ``1 / (1 + exp(-r))``, the Bradley-Terry probability of beating a response
  scored 0; in [0, 1], for combining with rule rewards on that scale or for PPO-style trainers
  that do not normalise by group.
- ``normalized``: ``(r - mean) / std`` with the mean and standard deviation measured once on
  the model's scores of representative data, read from a calibration file
  ``{"mean": ..., "std": ...}``: a stable scale across prompts and runs. OpenRLHF's
  ``--normalize_reward`` is this: the mean and standard deviation of the model's rewards on the
  evaluation set at the end of reward-model training (openrlhf/trainer/rm_trainer.py,
  ``evaluate``), stored in its config and applied in the forward pass
  (openrlhf/models/model.py, ``_get_reward_model``).
- ``group``: ``(r - mean) / (std + 1e-4)`` over the scores of the sample's group (`Sample.
  group_key`: ``fields[group_field]``, else the prompt) within one call - the normalisation
  TRL's GRPOTrainer applies to the summed reward (trl/trainer/grpo_trainer.py, the
  ``scale_rewards="group"`` branch: Bessel-corrected standard deviation, ``1e-4`` added). It
  puts the model on the per-group scale GRPO reads before it is summed with other rewards (as
  TRL's ``multi_objective_aggregation="normalize_then_sum"`` does inside the trainer); as the
  only reward of a GRPO run it changes nothing the trainer would not do itself. The whole group
  has to be in one call: in one TRL process a reward function gets every generation of a prompt
  at once (its sampler repeats each prompt ``num_generations`` times in a row); with several
  processes TRL may split a prompt's generations between them (it gathers the rewards before
  normalising), and a group is then normalised over the part this call holds. A group with one
  scored sample gets 0 (nothing to compare it with), and its reason says so.
- ``running``: ``(r - mean) / (std + 1e-4)`` with the mean and Bessel-corrected standard
  deviation of every raw score this reward has seen, updated with each call's scores before
  they are shaped - as TRL's ``RunningMoments`` (trl/trainer/utils.py: a batch's moments merged
  into the running ones, after stable-baselines3's ``RunningMeanStd``) normalises scores in its
  former PPOTrainer (``use_score_scaling`` with ``use_score_norm``). The first call is therefore
  normalised by its own mean and spread (a first call of one score gets 0), and the scale
  settles as calls accumulate; it suits PPO-style trainers that take rewards as they come. The
  statistics belong to this reward object in this process: they are not shared between
  processes (TRL's version gathers across ranks; this one does not), and a pickled copy carries
  those seen so far and then updates its own.

``clip: [lo, hi]`` then bounds the value (applied after the transform). A failed score (no
value) passes through unchanged and never enters a group's or the running statistics.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rewardlab.json_file import finite_number, read_json_object
from rewardlab.rewards.contract import Sample, Score

Shaping = Literal["raw", "sigmoid", "normalized", "group", "running"]
#: What ``group`` and ``running`` add to a standard deviation before dividing by it (TRL's GRPO
#: advantages add the same; its PPOTrainer added float32's epsilon).
STD_EPS = 1e-4
#: The shapings whose value depends on other scores than the sample's own.
BATCH_SHAPINGS = frozenset({"group", "running"})


@dataclass(frozen=True, slots=True)
class Calibration:
    """The mean and standard deviation of a reward model's raw scores on reference data."""

    mean: float
    std: float

    @classmethod
    def read(cls, path: str | Path) -> Calibration:
        """The calibration in a JSON file ``{"mean": ..., "std": ...}``; a `ValueError` saying
        what is wrong with it otherwise."""
        data = read_json_object(path, '{"mean": ..., "std": ...}')
        values = {key: finite_number(data, key, path) for key in ("mean", "std")}
        if values["std"] <= 0:
            raise ValueError(f"{path}: 'std' should be greater than 0, got {values['std']}")
        return cls(values["mean"], values["std"])


@dataclass(frozen=True, slots=True)
class Moments:
    """How many scores, their mean and their Bessel-corrected standard deviation (0 for fewer
    than two: a single score has no spread)."""

    count: int
    mean: float
    std: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Moments:
        count, mean, squares = _sums(values)
        return cls(count, mean, _std(count, squares))

    def z(self, value: float) -> float:
        return (value - self.mean) / (self.std + STD_EPS)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean, "std": self.std}


class RunningMoments:
    """The moments of every score seen, merged one call at a time: a call's count, mean and sum
    of squared deviations are combined with the running ones (the pairwise form of Welford's
    update, as TRL's ``RunningMoments.update`` merges a batch). Safe to update from several
    threads; pickles with the statistics so far."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.squares = 0.0  # the sum of squared deviations from the mean (Welford's M2)
        self._lock = threading.Lock()

    def update(self, values: Sequence[float]) -> Moments:
        """Add ``values`` to the statistics; the moments after them."""
        with self._lock:
            if values:
                count, mean, squares = _sums(values)
                total = self.count + count
                delta = mean - self.mean
                self.squares += squares + delta * delta * self.count * count / total
                self.mean += delta * count / total
                self.count = total
            return Moments(self.count, self.mean, _std(self.count, self.squares))

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"count": self.count, "mean": self.mean, "squares": self.squares}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class OutputShaping:
    """The function from raw outputs to values (see the module docstring)."""

    shaping: Shaping = "raw"
    calibration: Calibration | None = None
    clip: tuple[float, float] | None = None
    group_field: str = "group_id"
    running: RunningMoments = field(default_factory=RunningMoments, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.shaping == "normalized" and self.calibration is None:
            raise ValueError("shaping: normalized needs a calibration")

    def __call__(self, raw: float) -> float:
        """The value of one raw output, for the shapings that read it alone."""
        if self.shaping in BATCH_SHAPINGS:
            raise ValueError(f"shaping: {self.shaping} shapes a batch of scores (shape_scores)")
        if self.shaping == "sigmoid":
            value = _sigmoid(raw)
        elif self.shaping == "normalized" and self.calibration is not None:
            value = (raw - self.calibration.mean) / self.calibration.std
        else:
            value = raw
        return self._clipped(value)

    def shape_scores(self, samples: Sequence[Sample], scores: Sequence[Score]) -> list[Score]:
        """``scores``, one per sample, with the value of each ok one - the model's raw output -
        shaped; ``group`` and ``running`` add the statistics they used to its ``details``."""
        if self.shaping not in BATCH_SHAPINGS:
            return [replace(score, value=self(_value(score))) if score.ok else score for score in scores]
        scored = [index for index, score in enumerate(scores) if score.ok]
        shaped = list(scores)
        if self.shaping == "running":
            moments = self.running.update([_value(scores[index]) for index in scored])
            for index in scored:
                alone = "the first score seen: no spread yet, shaped to 0" if moments.count < 2 else None
                shaped[index] = self._shaped(scores[index], moments, "running", alone)
            return shaped
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for index in scored:
            groups[samples[index].group_key(self.group_field)].append(index)
        for members in groups.values():
            moments = Moments.of([_value(scores[index]) for index in members])
            alone = "the only scored sample of its group: shaped to 0" if moments.count < 2 else None
            for index in members:
                shaped[index] = self._shaped(scores[index], moments, "group", alone)
        return shaped

    def _shaped(self, score: Score, moments: Moments, key: str, note: str | None) -> Score:
        reason = "; ".join(part for part in (score.reason, note) if part) or None
        details = {**score.details, key: moments.to_dict()}
        return replace(score, value=self._clipped(moments.z(_value(score))), reason=reason, details=details)

    def _clipped(self, value: float) -> float:
        return value if self.clip is None else min(max(value, self.clip[0]), self.clip[1])


def _value(score: Score) -> float:
    assert score.value is not None  # only ok scores are shaped, and an ok score has a value
    return score.value


def _sums(values: Sequence[float]) -> tuple[int, float, float]:
    """The count, mean and sum of squared deviations from the mean of ``values`` (not empty)."""
    mean = math.fsum(values) / len(values)
    return len(values), mean, math.fsum((value - mean) ** 2 for value in values)


def _std(count: int, squares: float) -> float:
    return math.sqrt(max(squares, 0.0) / (count - 1)) if count > 1 else 0.0


def _sigmoid(x: float) -> float:
    # Written for both signs so that exp never overflows.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
