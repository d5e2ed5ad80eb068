"""Length control: a wrapped reward with its linear dependence on completion length taken out.

Judges and learned reward models prefer longer answers, and a policy trained on them learns to
pad. Length-controlled AlpacaEval (Dubois et al. 2024, arXiv:2404.04475; the authors' code is
``alpaca_eval/metrics/glm_winrate.py``, ``get_length_controlled_winrate``) removes the bias
by regression: a GLM predicts the judge's preference from a length feature,
``np.tanh(std_delta_len)`` (the difference of the two outputs' lengths in characters, divided by
its standard deviation, squashed by tanh so that a few very long outputs cannot dominate), and
other terms; the length-controlled preference is then predicted with that feature set to zero,
"what would the preference be if both outputs had the same length?".

A reward scores one completion, not a pair, so here the regression is of the reward on a length
feature ``x`` of each completion, by least squares over a set of scored samples, and the feature is
then set to its mean over the set::

    r_adjusted = r - slope * (x - mean(x)),    slope = cov(x, r) / var(x)

That is the reward less the part of it that length predicts linearly; the mean reward over the
set is unchanged, and a reward that is a linear function of ``x`` becomes constant. The feature
(``feature``) is AlpacaEval's ``tanh_std``: ``tanh((length - mean) / std)`` with the set's mean
and (Bessel-corrected, as pandas' ``std()`` in the original) standard deviation, or ``log``:
``log(1 + length)``. Length is in characters by default, as in AlpacaEval; since the z-score does
not change when all lengths are scaled, tokens or words give nearly the same feature.

Which samples the slope is fit over (``fit``):

- ``group`` (default): each sample's group (`Sample.group_key`), i.e. the completions of one
  prompt. GRPO-style advantages compare only completions of one prompt, so the length effect
  within a group is the one a policy learns from; fitting per group also keeps the difference
  between prompts (a hard question has longer and lower-scored answers) out of the slope, which
  is what AlpacaEval's per-instruction difficulty term is for.
- ``batch``: all samples of one call, one slope; for calls whose groups are too small to fit
  (one completion per prompt). Length differences between prompts then enter the slope.
- ``calibration``: a slope fit once on reference data (`fit_length_calibration`), read from a
  file; each sample is adjusted on its own, so its value does not depend on its batch.

Degenerate cases, each exact rather than guessed:

- A set whose completions all have the same length (or a set of one): the feature has no spread,
  ``x - mean(x)`` is 0 for every sample, so the value is the wrapped reward's whatever the slope
  (``slope`` is reported as 0.0, the least-squares minimum-norm solution, with a ``fit_note``).
- A set with length spread but fewer than ``min_fit_samples`` scored samples: a line through two
  points fits them exactly and would remove all of their signal, so those samples get status
  ``not_applicable`` with the reason, never a value.
- A sample the wrapped reward could not score keeps that score (its status and reason) and is
  left out of the fit; a sample whose length cannot be measured (``unit: tokens`` without token
  ids) is ``invalid_input`` and is left out too.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, InstanceOf, model_validator
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import InvalidInput
from rewardlab.json_file import finite_number, read_json_object
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import OptionError, PathOption, RewardSpec, takes_options
from rewardlab.rewards.registry import built
from rewardlab.rewards.shaping import CompletionUnits, LengthUnit, UnitOptions

LengthFeature = Literal["tanh_std", "log"]
FitScope = Literal["group", "batch", "calibration"]


def length_moments(lengths: Sequence[int]) -> tuple[float, float]:
    """The mean of ``lengths`` and their Bessel-corrected standard deviation (0 for fewer than
    two: one length has no spread)."""
    mean = math.fsum(lengths) / len(lengths)
    if len(lengths) < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((length - mean) ** 2 for length in lengths) / (len(lengths) - 1))


def length_feature(length: int, feature: LengthFeature, length_mean: float, length_std: float) -> float:
    """The feature a reward is regressed on: ``tanh((length - mean) / std)`` (0 when the lengths
    have no spread), or ``log(1 + length)``."""
    if feature == "log":
        return math.log1p(length)
    return 0.0 if length_std == 0 else math.tanh((length - length_mean) / length_std)


def least_squares(features: Sequence[float], values: Sequence[float]) -> tuple[float, float, float]:
    """``(slope, intercept, mean feature)`` of the least-squares line ``value = intercept + slope
    * feature``; the slope is 0 when the features have no spread (the minimum-norm solution)."""
    feature_mean = math.fsum(features) / len(features)
    value_mean = math.fsum(values) / len(values)
    spread = math.fsum((x - feature_mean) ** 2 for x in features)
    if spread == 0:
        return 0.0, value_mean, feature_mean
    slope = (
        math.fsum((x - feature_mean) * (v - value_mean) for x, v in zip(features, values, strict=True))
        / spread
    )
    return slope, value_mean - slope * feature_mean, feature_mean


@dataclass(frozen=True, slots=True)
class LengthCalibration:
    """A length slope fit once on reference data, for ``fit: calibration``: the JSON file
    `write` writes and `read` reads.

    Attributes:
        unit: What lengths were measured in.
        feature: The length feature the reward was regressed on.
        slope: The reward's change per unit of the feature.
        intercept: The fitted reward at feature 0 (for reading; the adjustment needs only the
            slope and the mean feature).
        feature_mean: The mean feature over the reference data; a sample is adjusted to it.
        length_mean: The mean length over the reference data (standardises ``tanh_std``).
        length_std: The Bessel-corrected standard deviation of those lengths.
        count: How many scored samples the fit used.
    """

    unit: LengthUnit
    feature: LengthFeature
    slope: float
    intercept: float
    feature_mean: float
    length_mean: float
    length_std: float
    count: int

    @classmethod
    def fit(
        cls,
        samples: Sequence[Sample],
        scores: Sequence[Score],
        *,
        unit: LengthUnit = "chars",
        feature: LengthFeature = "tanh_std",
        tokenizer: Any | None = None,
    ) -> LengthCalibration:
        """The calibration of ``scores`` (a reward's scores of ``samples``): samples without a
        value are left out. A `ValueError` when a length cannot be measured, or when fewer than
        three samples with a value remain or their lengths do not vary."""
        if len(samples) != len(scores):
            raise ValueError(f"{len(samples)} samples but {len(scores)} scores")
        units = CompletionUnits(unit, tokenizer)
        lengths, values = [], []
        for index, (sample, score) in enumerate(zip(samples, scores, strict=True)):
            if score.value is None:
                continue
            try:
                lengths.append(units.count(sample))
            except InvalidInput as error:
                raise ValueError(f"{sample.label(index)}: {error}") from None
            values.append(score.value)
        if len(values) < 3:
            raise ValueError(f"a length calibration needs at least 3 scored samples, got {len(values)}")
        length_mean, length_std = length_moments(lengths)
        if length_std == 0:
            raise ValueError(
                f"all {len(values)} scored completions have length {lengths[0]}: no slope to fit"
            )
        features = [length_feature(length, feature, length_mean, length_std) for length in lengths]
        slope, intercept, feature_mean = least_squares(features, values)
        return cls(unit, feature, slope, intercept, feature_mean, length_mean, length_std, len(values))

    def feature_of(self, length: int) -> float:
        """A completion's feature, standardised by the reference data's lengths."""
        return length_feature(length, self.feature, self.length_mean, self.length_std)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: str | Path) -> None:
        """Write the calibration as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> LengthCalibration:
        """The calibration in a JSON file `write` wrote; a `ValueError` naming the file and the key
        that is wrong otherwise."""
        data = read_json_object(path, "a JSON object, as LengthCalibration.write writes")
        choices = {"unit": get_args(LengthUnit), "feature": get_args(LengthFeature)}
        for key, accepted in choices.items():
            if data.get(key) not in accepted:
                raise ValueError(f"{path}: {key!r} should be one of {list(accepted)}, got {data.get(key)!r}")
        keys = ("slope", "intercept", "feature_mean", "length_mean", "length_std")
        numbers = {key: finite_number(data, key, path) for key in keys}
        if numbers["length_std"] <= 0:
            raise ValueError(f"{path}: 'length_std' should be greater than 0, got {numbers['length_std']}")
        count = data.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 3:
            raise ValueError(f"{path}: 'count' should be an integer of at least 3, got {count!r}")
        return cls(data["unit"], data["feature"], count=count, **numbers)


def fit_length_calibration(
    rows: str | Path | Iterable[Mapping[str, Any]],
    *,
    unit: LengthUnit = "chars",
    feature: LengthFeature = "tanh_std",
    tokenizer: Any | None = None,
) -> LengthCalibration:
    """A `LengthCalibration` from scored rows: a JSONL file (or the mappings) of records with
    the ``completion`` (text or chat messages; ``completion_ids`` too for ``unit: tokens``) and
    the wrapped reward's ``value``, and optionally its ``status`` (rows that are not ``ok``, or
    have no value, are left out). Such a file is your input rows with the value and status of
    the ``rewardlab score`` output added, joined by ``id``.

    Example:
        Rows whose value is half the log of their length (plus one):

        >>> import math
        >>> rows = [{"completion": "x" * n, "value": 0.5 * math.log1p(n)} for n in (10, 20, 40, 80)]
        >>> calibration = fit_length_calibration(rows, feature="log")
        >>> round(calibration.slope, 6), calibration.count
        (0.5, 4)
    """
    if isinstance(rows, str | Path):
        path = Path(rows)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
        records, where = [], []
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path} line {number} is not JSON: {error}") from None
                where.append(f"{path} line {number}")
    else:
        records = list(rows)
        where = [f"row {index}" for index in range(len(records))]
    samples, scores = [], []
    for place, record in zip(where, records, strict=True):
        if not isinstance(record, Mapping) or "completion" not in record:
            raise ValueError(f"{place}: should be a record with a 'completion' and a 'value'")
        value, status = record.get("value"), record.get("status", "ok")
        if status != "ok" or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{place}: 'value' should be a finite number, got {value!r}")
        fields = {"completion_ids": record["completion_ids"]} if "completion_ids" in record else {}
        samples.append(Sample(completion=record["completion"], id=place, fields=fields))
        scores.append(Score(float(value)))
    return LengthCalibration.fit(samples, scores, unit=unit, feature=feature, tokenizer=tokenizer)


class LengthControlledOptions(UnitOptions):
    """Options of `LengthControlledReward`."""

    reward: RewardSpec
    """The reward whose length dependence is removed: a config or, from Python, a `Reward`."""
    fit: FitScope = "group"
    """Which scored samples the slope is fit over: ``group`` (the sample's group, see
    ``group_field``), ``batch`` (all samples of one call) or ``calibration`` (a slope fit on
    reference data, read from ``calibration``)."""
    feature: LengthFeature = "tanh_std"
    """The length feature: ``tanh_std``, ``tanh((length - mean) / std)`` over the fit set (as
    length-controlled AlpacaEval), or ``log``, ``log(1 + length)``."""
    unit: LengthUnit = "chars"
    """What length is measured in: ``chars`` (as AlpacaEval), ``words`` (whitespace-separated),
    or ``tokens`` (from ``fields["completion_ids"]``, which TRL passes, else from ``tokenizer``)."""
    group_field: str = "group_id"
    """With ``fit: group``, the `Sample.fields` key naming a sample's group; samples without it
    are grouped by prompt."""
    min_fit_samples: int = Field(default=3, ge=2)
    """The fewest scored samples, with lengths that differ, a slope is fit from; a smaller set is
    ``not_applicable`` (a line through two points would remove all of their signal)."""
    calibration: PathOption | SkipJsonSchema[InstanceOf[LengthCalibration]] | None = None
    """With ``fit: calibration``: a JSON file written by `LengthCalibration.write` (see
    `fit_length_calibration`), or from Python a `LengthCalibration`. Its unit and feature must be
    this reward's."""

    @model_validator(mode="after")
    def _options_of_the_fit(self) -> LengthControlledOptions:
        if self.fit == "calibration":
            if self.calibration is None:
                raise OptionError("calibration", "fit: calibration needs a calibration file")
            try:
                calibration = _calibration(self.calibration)
            except ValueError as error:
                raise OptionError("calibration", str(error)) from None
            for option in ("unit", "feature"):
                if getattr(calibration, option) != getattr(self, option):
                    raise OptionError(
                        option,
                        f"is {getattr(self, option)!r} but the calibration was fit with "
                        f"{option}: {getattr(calibration, option)}",
                    )
            if "min_fit_samples" in self.model_fields_set:
                raise OptionError("min_fit_samples", "has no meaning with fit: calibration")
        elif self.calibration is not None:
            raise OptionError("calibration", f"is read only with fit: calibration, not fit: {self.fit}")
        if self.fit != "group" and "group_field" in self.model_fields_set:
            raise OptionError("group_field", f"is read only with fit: group, not fit: {self.fit}")
        return self


def _calibration(given: str | Path | LengthCalibration) -> LengthCalibration:
    return given if isinstance(given, LengthCalibration) else LengthCalibration.read(given)


@dataclass(frozen=True, slots=True)
class _Measured:
    """A sample the wrapped reward scored and whose length is known."""

    index: int
    value: float
    length: int


@takes_options(LengthControlledOptions)
class LengthControlledReward(Reward):
    """A wrapped reward less the part of it that completion length predicts, after
    length-controlled AlpacaEval: ``r - slope * (x - mean(x))``, with the slope of a
    least-squares fit of the reward on a length feature ``x`` over the sample's group, its batch,
    or reference data (see the module docstring).

    Options: `LengthControlledOptions` (``reward``, ``fit``, ``feature``, ``unit``,
    ``group_field``, ``min_fit_samples``, ``calibration``).

    The breakdown holds the wrapped reward's value under its name (its own breakdown under
    ``<its name>/``) and ``length_slope``, so the TRL adapter logs how strongly the reward
    follows length as training goes. ``details`` has ``raw_value``, ``length``, ``unit``,
    ``feature`` (the sample's), ``feature_mean``, ``slope`` (the one removed), ``fit`` and
    ``fit_size``, and the wrapped reward's details under ``reward_details``.

    Example:
        A reward that only measures length (1% per word up to 100 words) comes out nearly
        flat; it was linear in words, and the feature is tanh-standardised words:

        >>> from rewardlab import Sample
        >>> from rewardlab.rewards.shaping import LengthReward
        >>> wordy = LengthReward(mode="linear_target", target_length=100, unit="words")
        >>> controlled = LengthControlledReward(wordy, fit="batch", unit="words")
        >>> scores = controlled.score([Sample(completion="a " * n) for n in (5, 10, 20)])
        >>> [round(s.details["raw_value"], 2) for s in scores], [round(s.value, 3) for s in scores]
        ([0.05, 0.1, 0.2], [0.116, 0.117, 0.116])
    """

    name = "length_controlled"

    def __init__(
        self,
        reward: Reward | Mapping[str, Any],
        *,
        fit: FitScope = "group",
        feature: LengthFeature = "tanh_std",
        unit: LengthUnit = "chars",
        tokenizer: Any | None = None,
        group_field: str = "group_id",
        min_fit_samples: int = 3,
        calibration: str | Path | LengthCalibration | None = None,
        name: str | None = None,
    ):
        self.reward = built(reward, "reward")
        self.fit = fit
        self.feature = feature
        self.units = CompletionUnits(unit, tokenizer)
        self.group_field = group_field
        self.min_fit_samples = min_fit_samples
        self.calibration = None if calibration is None else _calibration(calibration)
        if name is not None:
            self.name = name
        self.io_bound = self.reward.io_bound
        self.uses_gpu = self.reward.uses_gpu

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        wrapped = await scores_or_failures(self.reward, samples)
        scores: list[Score | None] = [None] * len(samples)
        sets: dict[Any, list[_Measured]] = defaultdict(list)
        for index, (sample, score) in enumerate(zip(samples, wrapped, strict=True)):
            if score.value is None:
                scores[index] = score
                continue
            try:
                length = self.units.count(sample)
            except InvalidInput as error:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT,
                    f"{sample.label(index)}: {error}",
                    details={"raw_value": score.value},
                )
                continue
            key = sample.group_key(self.group_field) if self.fit == "group" else None
            sets[key].append(_Measured(index, score.value, length))
        for measured in sets.values():
            for index, adjusted in self._adjusted(measured, wrapped).items():
                scores[index] = adjusted
        return scores  # type: ignore[return-value]  # every index is set above

    def _adjusted(self, measured: list[_Measured], wrapped: Sequence[Score]) -> dict[int, Score]:
        """The length-controlled scores of one fit set (or, with a calibration, of any samples)."""
        note = None
        if self.calibration is not None:
            calibration = self.calibration
            features = [calibration.feature_of(m.length) for m in measured]
            slope, feature_mean, size = calibration.slope, calibration.feature_mean, calibration.count
        else:
            length_mean, length_std = length_moments([m.length for m in measured])
            features = [length_feature(m.length, self.feature, length_mean, length_std) for m in measured]
            slope, _, feature_mean = least_squares(features, [m.value for m in measured])
            size = len(measured)
            if all(x == features[0] for x in features):
                note = f"all {size} scored completion(s) of the {self.fit} have one length: nothing to remove"
            elif size < self.min_fit_samples:
                reason = (
                    f"the {self.fit} has {size} scored completions of different lengths; a length slope "
                    f"needs at least {self.min_fit_samples} (min_fit_samples)"
                )
                return {m.index: Score.failure(Status.NOT_APPLICABLE, reason) for m in measured}
        results = {}
        for m, x in zip(measured, features, strict=True):
            score = wrapped[m.index]
            details: dict[str, Any] = {
                "raw_value": m.value,
                "length": m.length,
                "unit": self.units.unit,
                "feature": x,
                "feature_mean": feature_mean,
                "slope": slope,
                "fit": self.fit,
                "fit_size": size,
            }
            if note is not None:
                details["fit_note"] = note
            if score.details:
                details["reward_details"] = score.details
            breakdown = {
                self.reward.name: m.value,
                **{f"{self.reward.name}/{key}": value for key, value in score.breakdown.items()},
                "length_slope": slope,
            }
            results[m.index] = replace(
                score, value=m.value - slope * (x - feature_mean), breakdown=breakdown, details=details
            )
        return results

    def close(self) -> None:
        self.reward.close()
