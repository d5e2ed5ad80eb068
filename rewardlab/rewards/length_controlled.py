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
feature ``x`` of each completion, by least squares over a set of scored samples. AlpacaEval's
correction, ``direction: both``, sets the feature to its mean over the set::

    r_adjusted = r - slope * (x - mean(x)),    slope = cov(x, r) / var(x)

That is two-sided: a sample shorter than the mean is *paid* ``slope * (mean(x) - x)``. For
evaluation, where the lengths are not the scored model's choice, that is what parity with
AlpacaEval needs. For training it is not safe, and the default (``direction: longer_only``)
differs in three ways, because there the policy chooses the lengths (rewardlab red-teams 22 and
22b):

- **The correction only ever subtracts**, and subtracts more the further a completion lies above
  its peers' mean feature ``m``::

      r_adjusted = r - max(0, slope) * max(0, x - m)

  A negative fitted slope is clamped to 0 (it is usually honest: wrong rollouts ramble, and
  subtracting it would pay every extra character, finding 22.1b), and a completion at or below
  its peers' mean is left at its wrapped value. The two-sided form paid shortness: around
  ``math_answer``, where right answers were longer than wrong ones, an empty completion scored
  1.229, above every right answer of its group and above the verifier's range (finding 22b.2).
  This is the ``min(r, r - slope * (x - m))`` the red team proposed.
- **Each sample's slope is fit on its peers**, the *other* samples of its set, whose lengths
  also standardise the feature and give ``m`` (``slope_fit: leave_one_out``). Fit over a group
  of 8 including it, a policy-made length outlier has leverage near 1: the line goes through it
  and pays it about the group's mean whatever its own reward (finding 22.1). This is the
  leave-one-out baseline of RLOO (Kool et al. 2019, "Buy 4 REINFORCE Samples, Get a Baseline for
  Free!"; Ahmadian et al. 2024, arXiv:2402.14740) and the cross-fitting of double machine
  learning (Chernozhukov et al. 2018, arXiv:1608.00060): a sample's own value does not enter
  what it is compared with.
- **The feature does not saturate above the mean**: ``std``, the z-score ``(length - mean) /
  std`` unclipped (default), or ``log``, ``log(1 + length)``. AlpacaEval's ``tanh_std`` (and the
  ``clipped_std`` this reward used after red-team 22) stop rising a few standard deviations out,
  so the charge stops growing while a length-loving grader keeps paying: padding a rollout of
  a real group by 7,100 characters kept 94% of a linear length reward's pay (finding 22b.1).

For sample ``i`` of a set of ``n``, under the defaults::

    x_j = (length_j - mean_i) / std_i    (mean_i, std_i: of the lengths other than i's; Bessel)
    slope_i = max(0, cov(x, r) / var(x))    over the peers j != i
    m_i = mean(x_j for j != i)    (0 for ``std``)
    r_adjusted_i = r_i - slope_i * max(0, x_i - m_i)

What this guarantees, exactly (``slope_i`` and ``m_i`` do not depend on sample ``i``, and ``x_i``
does not fall as ``length_i`` rises):

- ``r_adjusted_i <= r_i``: no value exceeds the wrapped reward's, and a completion shorter than
  its peers gets exactly its wrapped value. An empty answer to a verifier gets what the verifier
  gives it (0), never more.
- Lengthening sample ``i`` changes its value by ``delta r_i - slope_i * delta max(0, x_i -
  m_i)``: padding never raises the value by more than the wrapped reward's own increase less
  ``slope_i`` times the feature's increase above ``m_i``. With the wrapped value unchanged, a
  longer completion never scores more. A wrapped reward linear in the feature (with ``std``:
  linear in length) whose peers lie on the line is fit exactly, so its value is flat at and
  above the peers' mean, however far one pads; one that pays length less than linearly (a log)
  is over-charged far out: the safe side. ``clipped_std`` and ``tanh_std`` lose this past their
  knee, which is why neither is the default.
- For a wrapped reward in ``[0, 1]`` (a verifier), the slope of ``k`` peers' values on their
  ``std`` z-scores is at most ``sqrt(k / (k - 1)) / 2`` (Cauchy-Schwarz: the z-scores have sum of
  squares ``k - 1``, the values at most ``k / 4``), 0.54 for groups of 8. So a right answer less
  than ``2 * sqrt((k - 1) / k)`` (1.85) of its peers' standard deviations above their mean
  length scores above every wrong one; one further out is charged as padding is, and can fall
  below a wrong answer: length control cannot tell a long right answer from a padded one.

What is not guaranteed: a reward not linear in the feature keeps some of its length dependence
*below* the peers' mean (a pure-length reward still pays a completion for reaching its peers'
mean length, not beyond it); and a sample's GRPO advantage (its value less its mates' mean),
since padding one completion changes its mates' slopes and peers' means. ``slope_fit: pooled``
is AlpacaEval's one fit over the whole set, the sample included; with ``direction: both`` and
``feature: tanh_std`` it is AlpacaEval's regression and this reward's behaviour before red-team
22, and keeps the set's mean reward. Evaluation only: it paid padding in 8 of 9 red-team groups.

Which samples the slope is fit over (``fit``):

- ``group`` (default): each sample's group (`Sample.group_key`), i.e. the completions of one
  prompt. GRPO-style advantages compare only completions of one prompt, so the length effect
  within a group is the one a policy learns from; fitting per group also keeps the difference
  between prompts (a hard question has longer and lower-scored answers) out of the slope, which
  is what AlpacaEval's per-instruction difficulty term is for.
- ``batch``: all samples of one call (under ``leave_one_out``, the others of the call); for
  calls whose groups are too small to fit (one completion per prompt). Length differences
  between prompts then enter the slope: across prompts wrong answers tend to be the longer ones,
  the slope is negative, and only ``direction: longer_only`` keeps it from paying padding
  (finding 22.1b); and a prompt whose right answers are long is charged against the others'
  lengths (red-team 22b: where a policy empties its wrong answers, 6 of 47 of them rank above
  the two right answers of one such question; 0 of 47 with ``fit: group``). One slope per sample
  costs time growing with the square of the batch (about 1 s for 1,024 samples).
- ``calibration``: a slope fit once on reference data (`fit_length_calibration`), read from a
  file; each sample is adjusted on its own, compared with the reference's mean feature, so its
  value does not depend on its batch. A negative calibrated slope is clamped to 0 too, unless
  ``direction: both``.

Degenerate cases, each exact rather than guessed:

- A set whose completions all have the same length (or a set of one): the feature has no spread,
  ``x - mean(x)`` is 0 for every sample, so the value is the wrapped reward's whatever the slope
  (``slope`` is reported as 0.0, the least-squares minimum-norm solution, with a ``fit_note``).
  Likewise, under ``leave_one_out``, a sample whose *other* completions all have one length gets
  slope 0 (nothing to fit a slope from) and its wrapped value, with a ``fit_note``.
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

LengthFeature = Literal["std", "clipped_std", "tanh_std", "log"]
#: ``clipped_std`` clips the z-score of a length at this many standard deviations.
CLIP_STD = 3.0
FitScope = Literal["group", "batch", "calibration"]
SlopeDirection = Literal["longer_only", "both"]
SlopeFit = Literal["leave_one_out", "pooled"]


def length_moments(lengths: Sequence[int]) -> tuple[float, float]:
    """The mean of ``lengths`` and their Bessel-corrected standard deviation (0 for fewer than
    two: one length has no spread)."""
    mean = math.fsum(lengths) / len(lengths)
    if len(lengths) < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((length - mean) ** 2 for length in lengths) / (len(lengths) - 1))


def length_feature(length: int, feature: LengthFeature, length_mean: float, length_std: float) -> float:
    """The feature a reward is regressed on: the z-score ``(length - mean) / std``, unclipped
    (``std``) or clipped to ``[-CLIP_STD, CLIP_STD]`` (``clipped_std``), or ``tanh((length -
    mean) / std)`` (the three are 0 when the lengths have no spread), or ``log(1 + length)``.
    Each rises with ``length``; only ``std`` and ``log`` keep rising without bound."""
    if feature == "log":
        return math.log1p(length)
    if length_std == 0:
        return 0.0
    z = (length - length_mean) / length_std
    if feature == "std":
        return z
    return math.tanh(z) if feature == "tanh_std" else min(max(z, -CLIP_STD), CLIP_STD)


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
        length_mean: The mean length over the reference data (standardises ``clipped_std`` and
            ``tanh_std``).
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
        feature: LengthFeature = "std",
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
    feature: LengthFeature = "std",
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
    feature: LengthFeature = "std"
    """The length feature: ``std``, the z-score ``(length - mean) / std`` with the mean and
    (Bessel-corrected) std of the lengths the slope is fit on; ``log``, ``log(1 + length)``;
    or, saturating (a length-loving reward then pays padding past the knee; for evaluation),
    ``clipped_std``, the z-score clipped at 3, or ``tanh_std``, its tanh (as length-controlled
    AlpacaEval)."""
    unit: LengthUnit = "chars"
    """What length is measured in: ``chars`` (as AlpacaEval), ``words`` (whitespace-separated),
    or ``tokens`` (from ``fields["completion_ids"]``, which TRL passes, else from ``tokenizer``)."""
    group_field: str = "group_id"
    """With ``fit: group``, the `Sample.fields` key naming a sample's group; samples without it
    are grouped by prompt."""
    direction: SlopeDirection = "longer_only"
    """``longer_only`` (the one to train with): ``r - max(0, slope) * max(0, x - m)``, only
    ever subtracting, for length above the peers' mean feature ``m``; or ``both``, as
    length-controlled AlpacaEval, ``r - slope * (x - mean(x))``, either sign and either side:
    evaluation parity only (it pays shortness, and a negative slope pays padding)."""
    slope_fit: SlopeFit = "leave_one_out"
    """How the slope is fit within the set (``fit: group`` or ``batch``): ``leave_one_out`` (each
    sample's slope from the other samples, so a policy-made length outlier cannot set its own
    slope) or ``pooled`` (one least-squares fit over the set, as AlpacaEval)."""
    min_fit_samples: int = Field(default=3, ge=2)
    """The fewest scored samples, with lengths that differ, a slope is fit from; a smaller set is
    ``not_applicable`` (a line through two points would remove all of their signal). At least 3
    with ``slope_fit: leave_one_out`` (each fit leaves one sample out)."""
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
            for option in ("min_fit_samples", "slope_fit"):
                if option in self.model_fields_set:
                    raise OptionError(option, "has no meaning with fit: calibration")
        elif self.calibration is not None:
            raise OptionError("calibration", f"is read only with fit: calibration, not fit: {self.fit}")
        elif self.slope_fit == "leave_one_out" and self.min_fit_samples < 3:
            raise OptionError(
                "min_fit_samples",
                f"is {self.min_fit_samples}, but slope_fit: leave_one_out fits each slope on the "
                "other samples, so it needs at least 3",
            )
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


@dataclass(frozen=True, slots=True)
class _Fit:
    """How one sample is adjusted: its feature, the feature it is moved to, the slope fitted and
    the slope removed (after ``direction``), how many samples the slope came from, and a note."""

    feature: float
    feature_mean: float
    fitted_slope: float
    slope: float
    size: int
    note: str | None = None


@takes_options(LengthControlledOptions)
class LengthControlledReward(Reward):
    """A wrapped reward less the part of it that completion length predicts, after
    length-controlled AlpacaEval: ``r - slope * (x - mean(x))``, with the slope of a
    least-squares fit of the reward on a length feature ``x`` over the sample's group (the other
    samples of it, by default), its batch, or reference data. By default the correction only
    subtracts, ``r - max(0, slope) * max(0, x - m)`` with ``m`` the peers' mean feature, so no
    value exceeds the wrapped one and padding is charged however far it goes (see the module
    docstring).

    Options: `LengthControlledOptions` (``reward``, ``fit``, ``feature``, ``unit``,
    ``group_field``, ``direction``, ``slope_fit``, ``min_fit_samples``, ``calibration``).

    The breakdown holds the wrapped reward's value under its name (its own breakdown under
    ``<its name>/``) and ``length_slope`` (the slope removed), so the TRL adapter logs how
    strongly the reward follows length as training goes. ``details`` has ``raw_value``,
    ``length``, ``unit``, ``feature`` (the sample's), ``feature_mean`` (the feature it is
    compared with: its peers' mean under ``longer_only``, the set's mean under ``both``),
    ``fitted_slope`` (the least-squares slope), ``slope`` (the one charged: the fitted one, or
    0.0 when ``direction: longer_only`` clamped a negative one), ``slope_clamped``,
    ``direction``, ``slope_fit``, ``fit`` and ``fit_size`` (the samples the slope was fit on:
    the others of the set under ``leave_one_out``), a ``fit_note`` where a degenerate case
    decided, and the wrapped reward's details under ``reward_details``.

    Example:
        A reward that only measures length (1% per word up to 100 words): it is linear in words,
        as is the feature, the z-score of words. A completion shorter than its peers keeps its
        value; a longer one gets what the reward pays at its peers' mean length, however far it
        pads:

        >>> from rewardlab import Sample
        >>> from rewardlab.rewards.shaping import LengthReward
        >>> wordy = LengthReward(mode="linear_target", target_length=100, unit="words")
        >>> controlled = LengthControlledReward(wordy, fit="batch", unit="words")
        >>> scores = controlled.score([Sample(completion="a " * n) for n in (10, 20, 30, 40, 50, 60, 70, 80)])
        >>> [round(s.details["raw_value"], 2) for s in scores]
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
        >>> [round(s.value, 3) for s in scores]
        [0.1, 0.2, 0.3, 0.4, 0.443, 0.429, 0.414, 0.4]
        >>> padded = controlled.score([Sample(completion="a " * n) for n in (10, 20, 30, 40, 50, 60, 70, 95)])
        >>> round(padded[-1].value, 3)
        0.4
    """

    name = "length_controlled"

    def __init__(
        self,
        reward: Reward | Mapping[str, Any],
        *,
        fit: FitScope = "group",
        feature: LengthFeature = "std",
        unit: LengthUnit = "chars",
        tokenizer: Any | None = None,
        group_field: str = "group_id",
        direction: SlopeDirection = "longer_only",
        slope_fit: SlopeFit = "leave_one_out",
        min_fit_samples: int = 3,
        calibration: str | Path | LengthCalibration | None = None,
        name: str | None = None,
    ):
        self.reward = built(reward, "reward")
        self.fit = fit
        self.feature = feature
        self.units = CompletionUnits(unit, tokenizer)
        self.group_field = group_field
        self.direction = direction
        self.slope_fit = slope_fit
        self.min_fit_samples = min_fit_samples
        self.calibration = None if calibration is None else _calibration(calibration)
        if name is not None:
            self.name = name
        self.io_bound = self.reward.io_bound
        self.uses_gpu = self.reward.uses_gpu
        self.scores_groups = fit != "calibration" or self.reward.scores_groups
        self.scores_batches = fit == "batch" or self.reward.scores_batches

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

    def _removed(self, fitted: float) -> float:
        return fitted if self.direction == "both" else max(fitted, 0.0)

    def _fits(self, measured: list[_Measured]) -> list[_Fit] | str:
        """Each sample's `_Fit`, or why the set cannot be adjusted (``not_applicable``)."""
        size = len(measured)
        lengths = [m.length for m in measured]
        if self.calibration is not None:
            calibration = self.calibration
            slope = calibration.slope
            return [
                _Fit(
                    calibration.feature_of(length),
                    calibration.feature_mean,
                    slope,
                    self._removed(slope),
                    calibration.count,
                )
                for length in lengths
            ]
        if all(length == lengths[0] for length in lengths):
            note = f"all {size} scored completion(s) of the {self.fit} have one length: nothing to remove"
            x = length_feature(lengths[0], self.feature, lengths[0], 0.0)
            return [_Fit(x, x, 0.0, 0.0, size, note) for _ in measured]
        if size < self.min_fit_samples:
            return (
                f"the {self.fit} has {size} scored completions of different lengths; a length slope "
                f"needs at least {self.min_fit_samples} (min_fit_samples)"
            )
        values = [m.value for m in measured]
        if self.slope_fit == "pooled":
            length_mean, length_std = length_moments(lengths)
            features = [length_feature(length, self.feature, length_mean, length_std) for length in lengths]
            fitted, _, feature_mean = least_squares(features, values)
            return [_Fit(x, feature_mean, fitted, self._removed(fitted), size) for x in features]
        fits = []
        for i in range(size):
            others = lengths[:i] + lengths[i + 1 :]
            length_mean, length_std = length_moments(others)
            features = [length_feature(length, self.feature, length_mean, length_std) for length in others]
            fitted, _, _ = least_squares(features, values[:i] + values[i + 1 :])
            x = length_feature(lengths[i], self.feature, length_mean, length_std)
            why: str | None = None
            if all(length == others[0] for length in others):
                why = (
                    f"the other {size - 1} scored completions of the {self.fit} have one length: "
                    "no slope to fit"
                )
            # Two-sided (AlpacaEval) moves the sample to the set's mean feature; one-sided compares
            # it with its peers' mean, which does not move when it pads.
            compared = (
                math.fsum([x, *features]) / size
                if self.direction == "both"
                else math.fsum(features) / (size - 1)
            )
            fits.append(_Fit(x, compared, fitted, self._removed(fitted), size - 1, why))
        return fits

    def _adjusted(self, measured: list[_Measured], wrapped: Sequence[Score]) -> dict[int, Score]:
        """The length-controlled scores of one fit set (or, with a calibration, of any samples)."""
        fits = self._fits(measured)
        if isinstance(fits, str):
            return {m.index: Score.failure(Status.NOT_APPLICABLE, fits) for m in measured}
        results = {}
        for m, fit in zip(measured, fits, strict=True):
            score = wrapped[m.index]
            details: dict[str, Any] = {
                "raw_value": m.value,
                "length": m.length,
                "unit": self.units.unit,
                "feature": fit.feature,
                "feature_mean": fit.feature_mean,
                "fitted_slope": fit.fitted_slope,
                "slope": fit.slope,
                "slope_clamped": fit.slope != fit.fitted_slope,
                "direction": self.direction,
                "slope_fit": "calibration" if self.calibration is not None else self.slope_fit,
                "fit": self.fit,
                "fit_size": fit.size,
            }
            if fit.note is not None:
                details["fit_note"] = fit.note
            if score.details:
                details["reward_details"] = score.details
            breakdown = {
                self.reward.name: m.value,
                **{f"{self.reward.name}/{key}": value for key, value in score.breakdown.items()},
                "length_slope": fit.slope,
            }
            above = fit.feature - fit.feature_mean
            if self.direction == "longer_only":
                above = max(above, 0.0)  # only ever subtract: shortness earns nothing
            value = m.value - fit.slope * above
            results[m.index] = replace(score, value=value, breakdown=breakdown, details=details)
        return results

    def close(self) -> None:
        self.reward.close()
