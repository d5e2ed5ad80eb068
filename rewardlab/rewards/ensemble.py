"""Reward ensembles: several rewards for one judgement, combined so that disagreement costs.

A policy optimised against one learned reward finds the places where that reward is wrong.
Several rewards trained or built differently are wrong in different places, so a completion that
scores high on one and low on the others is more likely an exploit than a good answer. The
combinations follow two papers:

- Coste et al. 2023, "Reward Model Ensembles Help Mitigate Overoptimization" (arXiv:2310.02743):
  worst-case optimisation (WCO, ``combine: min``), and uncertainty-weighted optimisation (UWO,
  ``combine: mean_minus_variance``), the mean over the k members less lambda times their
  intra-ensemble variance, ``1/k * sum_i (R_i - mean)^2``.
- Eisenstein et al. 2023, "Helping or Herding? Reward Model Ensembles Mitigate but do not
  Eliminate Reward Hacking" (arXiv:2312.09244), who compare aggregations of an ensemble of
  reward models, among them the mean less a multiple of the members' standard deviation
  (``combine: mean_minus_std``, the default: in the reward's own units, unlike the variance),
  and read rewards as z-scores.

A variance or standard deviation across members compares their values directly, so it means
something only on one scale: the disagreement of a reward in [-10, 10] and a judge in [0, 1] says
nothing. ``normalize`` puts members on one scale first:
``reference`` by each member's mean and standard deviation on reference data (stationary: a
sample's value does not depend on what else is in its batch, so it is the one to train with), or
``batch`` by the member's values in the same call (no reference data needed, but a sample's value
then moves with its batch mates). Where rewardlab departs from the papers: the standard deviation
is the population one (divided by k, as UWO's variance is), and a member whose values in a batch
have no spread cannot be standardised and is left out of that batch, never given an invented 0.
A spread below ``SPREAD_TOLERANCE`` (1e-12) of the values' magnitude counts as none: it is float
rounding (0.1 + 0.2 is 0.30000000000000004, not 0.3), and dividing by it would turn 5.6e-17 of
rounding into a full standard deviation (rewardlab red-team 22, finding 11). Means and standard
deviations are taken on the values divided by their largest magnitude first (as LAPACK's
``dnrm2`` scales before squaring), so values near the float limit cannot overflow the batch; a
sample whose combined value is still not finite fails alone, with the reason.

Eisenstein et al. also find that ensembles mitigate, not remove, hacking: members that share a
pretrained base share blind spots, so the members should differ as much as possible.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, RewardOptions, RewardSpec, takes_options
from rewardlab.rewards.registry import built

EnsembleCombination = Literal["mean_minus_std", "mean_minus_variance", "min", "mean"]
Normalization = Literal["none", "batch", "reference"]
#: The ensemble's own breakdown entry, the members' standard deviation; no member may take it.
DISAGREEMENT = "disagreement"
#: ``normalize: batch`` treats a member's values as having no spread when their standard deviation
#: is at most this fraction of their largest magnitude: float rounding, not a difference.
SPREAD_TOLERANCE = 1e-12


class EnsembleMemberStats(BaseModel):
    """A member's mean and standard deviation on reference data, for ``normalize: reference``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    mean: float
    """The member's mean value on the reference data."""
    std: float = Field(gt=0)
    """The member's standard deviation on the reference data (> 0)."""


class EnsembleOptions(RewardOptions):
    """Options of `EnsembleReward`."""

    members: dict[str, RewardSpec] = Field(min_length=1)
    """The rewards of the ensemble by name: configs or, from Python, `Reward` objects. The names
    key the breakdown, ``details["members"]`` and ``reference_stats``. At least two, or one whose
    ``heads`` are the members."""
    combine: EnsembleCombination = "mean_minus_std"
    """How the members' values become one: ``mean_minus_std`` (mean less ``k`` standard
    deviations; Eisenstein et al. 2023), ``mean_minus_variance`` (mean less ``k`` times the
    variance: UWO of Coste et al. 2023), ``min`` (the worst member decides: WCO) or ``mean``."""
    k: float = Field(default=1.0, ge=0)
    """The weight of the disagreement penalty in ``mean_minus_std`` and
    ``mean_minus_variance`` (UWO's lambda); refused with ``min`` and ``mean``."""
    normalize: Normalization = "none"
    """Put members on one scale before combining: ``none`` (their values as they are, for members
    on one scale already), ``reference`` (``(value - mean) / std`` by ``reference_stats``) or
    ``batch`` (the z-score of the member's value among its values in the same call; a member
    without spread there is left out of that call)."""
    reference_stats: dict[str, EnsembleMemberStats] | None = None
    """Each member's ``{mean, std}`` on reference data, by member name; needed by
    ``normalize: reference`` (for every member) and read only then."""
    heads: list[str] | None = None
    """Read the members from one reward's breakdown instead: with exactly one entry in
    ``members`` (e.g. a multi-head reward model), the entries of its ``Score.breakdown`` named
    here are the ensemble's members."""
    on_member_failure: Literal["fail", "skip"] = "fail"
    """``fail``: a member that could not score a sample (timeout, backend error, ...) fails the
    ensemble's score with that status, since a missing member would shrink the measured
    disagreement. ``skip``: combine the members that scored, as long as there are
    ``min_members``, and list the skipped ones in ``details["skipped"]``."""
    min_members: int = Field(default=2, ge=1)
    """The fewest members that must have a value for a sample to be scored; fewer is
    ``not_applicable`` (or the status of a member's failure). Two is the fewest whose
    disagreement means anything."""

    @model_validator(mode="after")
    def _members_consistent(self) -> EnsembleOptions:
        if self.heads is not None:
            if len(self.members) != 1:
                raise OptionError(
                    "heads", f"are read from one member's breakdown; members has {len(self.members)}"
                )
            if len(self.heads) < 2 or len(set(self.heads)) != len(self.heads):
                raise OptionError("heads", f"should name at least 2 different heads, got {self.heads}")
            names, option = self.heads, "heads"
        else:
            if len(self.members) < 2:
                raise OptionError(
                    "members", "an ensemble needs at least 2 members, or one member and its heads"
                )
            names, option = list(self.members), "members"
        if DISAGREEMENT in names:
            raise OptionError(
                option, f"{DISAGREEMENT!r} is the ensemble's own breakdown entry; rename the member"
            )
        if self.min_members > len(names):
            raise OptionError("min_members", f"should be at most the number of members ({len(names)})")
        if "k" in self.model_fields_set and self.combine in ("min", "mean"):
            raise OptionError("k", f"has no meaning with combine: {self.combine}")
        if self.normalize == "reference":
            given = set(self.reference_stats or {})
            if missing := [name for name in names if name not in given]:
                raise OptionError("reference_stats", f"normalize: reference needs the stats of {missing}")
            if unknown := sorted(given - set(names)):
                raise OptionError("reference_stats", f"name no member: {unknown}; members: {names}")
        elif self.reference_stats is not None:
            raise OptionError("reference_stats", "is read only with normalize: reference")
        return self


@dataclass(slots=True)
class _Outcome:
    """What the members said about one sample."""

    raw: dict[str, float] = field(default_factory=dict)  # members with a value
    failed: dict[str, Score] = field(default_factory=dict)  # members that could not score it
    left_out: dict[str, str] = field(default_factory=dict)  # not applicable, or not standardisable


@takes_options(EnsembleOptions)
class EnsembleReward(Reward):
    """Several rewards for one judgement, combined as ``mean - k * std`` (or UWO's variance
    penalty, the worst member, or the mean), so that a completion the members disagree on is
    worth less than one they agree on (see the module docstring).

    Options: `EnsembleOptions` (``members`` or ``heads``, ``combine`` and ``k``, ``normalize``,
    the failure policy).

    The breakdown holds each member's raw value (and its own breakdown under ``<member>/``) and
    ``disagreement``, the members' standard deviation on the scale they are combined on, so the TRL
    adapter logs ``<name>/disagreement``: disagreement that rises during training is a sign that
    the policy moves to where the members are unreliable. ``details`` has ``members`` (raw values),
    ``standardized`` (with ``normalize``), ``mean`` and ``std``, and each member's details under
    ``member_details``.

    A member that is ``not_applicable`` to a sample is left out of it; a member that failed is
    handled by ``on_member_failure``; fewer than ``min_members`` values leave the sample without a
    value (the status of a member's failure, else ``not_applicable``), never a 0.

    Example:
        >>> from rewardlab import Sample
        >>> ensemble = EnsembleReward(
        ...     {"exact": {"type": "string_match"}, "lenient": {"type": "regex_match", "pattern": "4"}},
        ...     k=0.5,
        ... )
        >>> [score] = ensemble.score([Sample(completion="It is 4, I think.", reference="4")])
        >>> score.details["members"], score.value  # mean 0.5, std 0.5
        ({'exact': 0.0, 'lenient': 1.0}, 0.25)
        >>> ensemble.close()
    """

    name = "ensemble"

    def __init__(
        self,
        members: Mapping[str, Reward | Mapping[str, Any]],
        *,
        combine: EnsembleCombination = "mean_minus_std",
        k: float = 1.0,
        normalize: Normalization = "none",
        reference_stats: Mapping[str, EnsembleMemberStats] | None = None,
        heads: list[str] | None = None,
        on_member_failure: Literal["fail", "skip"] = "fail",
        min_members: int = 2,
        name: str | None = None,
    ):
        self.members = {
            key: built({"name": key, **spec} if isinstance(spec, Mapping) else spec, "members", key)
            for key, spec in members.items()
        }
        self.combine = combine
        self.k = float(k)
        self.normalize = normalize
        self.reference_stats = dict(reference_stats or {})
        self.heads = None if heads is None else list(heads)
        self.on_member_failure = on_member_failure
        self.min_members = min_members
        if name is not None:
            self.name = name
        self.io_bound = any(member.io_bound for member in self.members.values())
        self.uses_gpu = any(member.uses_gpu for member in self.members.values())
        self.scores_groups = normalize == "batch" or any(
            member.scores_groups for member in self.members.values()
        )
        batch_scored = [member.scores_batches for member in self.members.values()]
        self.scores_batches = normalize == "batch" or any(batch_scored)

    @property
    def member_names(self) -> list[str]:
        """The names the members' values go by: the heads, or the members."""
        return self.heads if self.heads is not None else list(self.members)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        results = await asyncio.gather(*(scores_or_failures(m, samples) for m in self.members.values()))
        per_member = dict(zip(self.members, results, strict=True))
        outcomes = [
            self._outcome({name: scores[i] for name, scores in per_member.items()})
            for i in range(len(samples))
        ]
        scales = self._scales(outcomes)
        return [
            self._combined(outcome, scales, {name: scores[i] for name, scores in per_member.items()})
            for i, outcome in enumerate(outcomes)
        ]

    def _outcome(self, scores: Mapping[str, Score]) -> _Outcome:
        outcome = _Outcome()
        if self.heads is None:
            for name, score in scores.items():
                self._record(outcome, name, score)
            return outcome
        ((member, score),) = scores.items()
        for head in self.heads:
            value = score.breakdown.get(head)
            if not score.ok:
                self._record(outcome, head, score)
            elif value is None or not math.isfinite(value):
                reason = f"member {member!r} reported no finite {head!r} in its breakdown {score.breakdown}"
                self._record(outcome, head, Score.failure(Status.ERROR, reason))
            else:
                self._record(outcome, head, Score(value))
        return outcome

    @staticmethod
    def _record(outcome: _Outcome, name: str, score: Score) -> None:
        if score.value is not None:  # exactly when the score is ok
            outcome.raw[name] = score.value
        elif score.status is Status.NOT_APPLICABLE:
            outcome.left_out[name] = "not applicable" + (f": {score.reason}" if score.reason else "")
        else:
            outcome.failed[name] = score

    def _scales(self, outcomes: Sequence[_Outcome]) -> dict[str, tuple[float, float] | str]:
        """Each member's ``(offset, scale)``, or why it cannot be standardised in this call."""
        if self.normalize == "none":
            return dict.fromkeys(self.member_names, (0.0, 1.0))
        if self.normalize == "reference":
            return {
                name: (self.reference_stats[name].mean, self.reference_stats[name].std)
                for name in self.member_names
            }
        scales: dict[str, tuple[float, float] | str] = {}
        for name in self.member_names:
            values = [outcome.raw[name] for outcome in outcomes if name in outcome.raw]
            mean, std = _mean_and_std(values) if values else (0.0, 0.0)
            magnitude = max((abs(value) for value in values), default=0.0)
            if std > SPREAD_TOLERANCE * magnitude:
                scales[name] = (mean, std)
            elif std > 0:
                scales[name] = (
                    f"normalize: batch cannot standardise it: its {len(values)} value(s) in this call "
                    f"spread by {std:.2g} around {mean:.6g}, at most {SPREAD_TOLERANCE:g} of their "
                    "magnitude: float rounding, no spread"
                )
            else:
                scales[name] = (
                    f"normalize: batch cannot standardise it: "
                    f"its {len(values)} value(s) in this call have no spread"
                )
        return scales

    def _combined(
        self, outcome: _Outcome, scales: Mapping[str, tuple[float, float] | str], scores: Mapping[str, Score]
    ) -> Score:
        breakdown = dict(outcome.raw)
        details: dict[str, Any] = {"members": dict(outcome.raw)}
        if self.heads is None:
            for name, score in scores.items():
                if score.ok:
                    breakdown.update({f"{name}/{key}": value for key, value in score.breakdown.items()})
        member_details = {name: score.details for name, score in scores.items() if score.details}
        if member_details:
            details["member_details"] = member_details
        usage = Usage.total(list(scores.values()))
        reasons = [f"{name}: {score.reason}" for name, score in scores.items() if score.reason]

        if outcome.failed and self.on_member_failure == "fail":
            name, first = next(iter(outcome.failed.items()))
            return Score.failure(
                first.status,
                f"member {name!r} failed: {first.reason}",
                breakdown=breakdown,
                usage=usage,
                details=details,
            )
        if outcome.failed:
            details["skipped"] = {name: str(score.status) for name, score in sorted(outcome.failed.items())}
        standardized: dict[str, float] = {}
        left_out = dict(outcome.left_out)
        for name, value in outcome.raw.items():
            scale = scales[name]
            if isinstance(scale, str):
                left_out[name] = scale
            else:
                # Divided first: value - offset can overflow where both are near the float limit.
                standardized[name] = value / scale[1] - scale[0] / scale[1]
        if left_out:
            details["left_out"] = left_out
        if len(standardized) < self.min_members:
            why = (
                f"{len(standardized)} of {len(self.member_names)} members have a value; "
                f"min_members is {self.min_members}"
            )
            if outcome.failed:
                name, first = next(iter(outcome.failed.items()))
                status, reason = first.status, f"{why}; member {name!r} failed: {first.reason}"
            else:
                status, reason = (
                    Status.NOT_APPLICABLE,
                    f"{why}; " + "; ".join(f"{n}: {r}" for n, r in left_out.items()),
                )
            return Score.failure(status, reason, breakdown=breakdown, usage=usage, details=details)

        mean, std = _mean_and_std(list(standardized.values()))
        if self.normalize != "none":
            details["standardized"] = standardized
        details.update(mean=mean, std=std)
        value = self._value(standardized, mean, std)
        if not all(math.isfinite(x) for x in (value, std, *standardized.values())):
            return Score.failure(
                Status.ERROR,
                f"the members' values {outcome.raw} are too large to combine: "
                f"{self.combine} overflows a float (mean {mean:.3g}, std {std:.3g}, value {value:.3g})",
                breakdown=breakdown,
                usage=usage,
                details=details,
            )
        breakdown[DISAGREEMENT] = std
        return Score(
            value,
            breakdown=breakdown,
            reason="; ".join(reasons) or None,
            usage=usage,
            details=details,
        )

    def _value(self, values: Mapping[str, float], mean: float, std: float) -> float:
        if self.combine == "mean_minus_std":
            return mean - self.k * std
        if self.combine == "mean_minus_variance":
            return mean - self.k * (std * std)  # inf where it overflows, where ** would raise
        if self.combine == "min":
            return min(values.values())
        return mean

    def close(self) -> None:
        for member in self.members.values():
            member.close()


def _mean_and_std(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the population standard deviation (divided by n, as UWO's variance is) of
    finite values, computed on the values divided by their largest magnitude, so that neither
    the sum nor the squares overflow (both results are at most that magnitude)."""
    magnitude = max(abs(value) for value in values)
    if magnitude == 0:
        return 0.0, 0.0
    scaled = [value / magnitude for value in values]
    mean = math.fsum(scaled) / len(scaled)
    std = math.sqrt(math.fsum((x - mean) * (x - mean) for x in scaled) / len(scaled))
    return mean * magnitude, std * magnitude
