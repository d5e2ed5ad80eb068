"""Composition: several rewards as one (`Combine`), and one pipeline for mixed tasks (`Route`)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage, check_batch
from rewardlab.rewards.options import ComponentSpec, OptionError, RewardOptions, RewardSpec, takes_options
from rewardlab.rewards.progress import report_done
from rewardlab.rewards.registry import built


def _prefixed(name: str, breakdown: Mapping[str, float]) -> dict[str, float]:
    return {f"{name}/{key}": value for key, value in breakdown.items()}


async def scores_or_failures(reward: Reward, samples: Sequence[Sample]) -> list[Score]:
    """``reward.ascore(samples)``; if the reward raises (a bug), every sample gets status ``error``
    instead of the exception reaching the other components and the trainer."""
    try:
        return check_batch(reward, samples, await reward.ascore(samples))
    except Exception as error:  # noqa: BLE001 - a component's bug fails its scores, not the batch
        reason = f"reward {reward.name!r} raised {type(error).__name__}: {error}"
        return [Score.failure(Status.ERROR, reason) for _ in samples]


async def _score_all(rewards: Mapping[str, Reward], samples: Sequence[Sample]) -> dict[str, list[Score]]:
    results = await asyncio.gather(*(scores_or_failures(reward, samples) for reward in rewards.values()))
    return dict(zip(rewards, results, strict=True))


class CombineOptions(RewardOptions):
    """Options of `Combine`."""

    components: dict[str, ComponentSpec] = Field(min_length=1)
    """Rewards by name: configs (each may add a ``weight``) or, from Python, `Reward` objects. The
    names key the breakdown and the logged metrics."""
    weights: dict[str, float] | None = None
    """Weight per component for ``mode: weighted_sum`` (default 1.0 each); in a config, a
    component's ``weight`` says the same."""
    mode: Literal["weighted_sum", "min"] = "weighted_sum"
    """``weighted_sum`` of the components, or their ``min`` (the worst component decides)."""
    gate: RewardSpec | None = None
    """A reward that must pass for the others to count, e.g. accuracy only counts when the
    format holds. It appears in the breakdown as ``gate/<its name>``. A gate that does not apply
    to a sample is open; one that failed to score is closed."""
    gate_threshold: float = 1.0
    """The gate passes when its value is at least this."""
    gate_fail_value: float = 0.0
    """The combined value when the gate fails."""
    on_component_failure: Literal["fail", "skip"] = "fail"
    """``fail``: if a component could not score a sample (timeout, backend error, ...), the
    combined score fails with that status, since a missing term would otherwise read as a 0.
    ``skip``: combine the remaining ones and list the skipped components and their statuses in
    ``details["skipped"]``."""

    @model_validator(mode="after")
    def _weights_name_components(self) -> CombineOptions:
        inline = [spec for spec in self.components.values() if isinstance(spec, Mapping) and "weight" in spec]
        unknown = set(self.weights or {}) - set(self.components)
        if unknown:
            raise OptionError("weights", f"name unknown components: {sorted(unknown)}")
        if self.mode == "min" and (self.weights or inline):
            raise OptionError("mode", "min takes no weights: the worst component decides")
        return self


@takes_options(CombineOptions)
class Combine(Reward):
    """Named rewards combined into one value, every component kept in the breakdown.

    Options: `CombineOptions` (components, weights, ``mode`` - weighted sum or min -, a gate,
    and what a failed component does).

    A component that is ``not_applicable`` to a sample is left out of its value; when no
    component applies, the combined score is ``not_applicable`` too.

    Example:
        >>> combined = Combine({"format": {"type": "think_answer_format", "weight": 0.1},
        ...                     "accuracy": {"type": "math_answer"}})  # doctest: +SKIP
    """

    name = "combine"

    def __init__(
        self,
        components: Mapping[str, Reward | Mapping[str, Any]],
        *,
        weights: Mapping[str, float] | None = None,
        mode: Literal["weighted_sum", "min"] = "weighted_sum",
        gate: Reward | Mapping[str, Any] | None = None,
        gate_threshold: float = 1.0,
        gate_fail_value: float = 0.0,
        on_component_failure: Literal["fail", "skip"] = "fail",
        name: str | None = None,
    ):
        self.components, inline = {}, {}
        for key, given in components.items():
            spec = given
            if isinstance(given, Mapping):
                spec = {"name": key, **given}
                if "weight" in spec:
                    inline[key] = spec.pop("weight")
            self.components[key] = built(spec, "components", key)
        given = {**(weights or {}), **inline}
        self.weights = {key: float(given.get(key, 1.0)) for key in self.components}
        self.mode = mode
        self.gate = None if gate is None else built(gate, "gate")
        self.gate_threshold = gate_threshold
        self.gate_fail_value = gate_fail_value
        self.on_component_failure = on_component_failure
        if name is not None:
            self.name = name
        gated = [self.gate] if self.gate else []
        self.io_bound = any(r.io_bound for r in [*self.components.values(), *gated])
        self.uses_gpu = any(r.uses_gpu for r in [*self.components.values(), *gated])
        self.scores_groups = any(r.scores_groups for r in [*self.components.values(), *gated])
        self.scores_batches = any(r.scores_batches for r in [*self.components.values(), *gated])

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        rewards = dict(self.components)
        if self.gate is not None:
            rewards["\0gate"] = self.gate
        per_component = await _score_all(rewards, samples)
        gate_scores = per_component.pop("\0gate", None)
        return [
            self._combine(
                {name: scores[i] for name, scores in per_component.items()},
                None if gate_scores is None else gate_scores[i],
            )
            for i in range(len(samples))
        ]

    def _combine(self, parts: dict[str, Score], gate: Score | None) -> Score:
        gate_key = f"gate/{self.gate.name}" if self.gate is not None else "gate"
        breakdown: dict[str, float] = {}
        details: dict[str, Any] = {}
        reasons = [f"{name}: {score.reason}" for name, score in parts.items() if score.reason]
        for name, score in parts.items():
            if score.value is not None:  # exactly when the score is ok
                breakdown[name] = score.value
                breakdown.update(_prefixed(name, score.breakdown))
            if score.details:
                details[name] = score.details
        usage = Usage.total([*parts.values(), *([gate] if gate else [])])
        reason = "; ".join(reasons) or None

        failed = {n: s for n, s in parts.items() if s.status not in (Status.OK, Status.NOT_APPLICABLE)}
        if gate is not None and gate.status not in (Status.OK, Status.NOT_APPLICABLE):
            failed = {gate_key: gate, **failed}
        if failed and self.on_component_failure == "fail":
            first_name, first = next(iter(failed.items()))
            return Score.failure(
                first.status,
                f"component {first_name!r} failed: {first.reason}",
                breakdown=breakdown,
                usage=usage,
                details=details,
            )
        if failed:
            details["skipped"] = {name: str(failed[name].status) for name in sorted(failed)}

        counted = {name: score.value for name, score in parts.items() if score.value is not None}
        if not counted:
            return Score.failure(
                Status.NOT_APPLICABLE,
                reason or "no component applies",
                breakdown=breakdown,
                usage=usage,
                details=details,
            )
        if self.mode == "min":
            value = min(counted.values())
        else:
            value = sum(self.weights[name] * v for name, v in counted.items())
        if gate is not None and gate.value is not None:
            breakdown[gate_key] = gate.value
        # A gate that could not score (skipped above) is closed: nothing unverified gets through.
        # One that does not apply to the sample is open.
        gate_open = (
            gate is None
            or gate.status is Status.NOT_APPLICABLE
            or (gate.value is not None and gate.value >= self.gate_threshold)
        )
        if not gate_open:
            value = self.gate_fail_value
            details["gate_closed"] = True
        return Score(value=value, breakdown=breakdown, reason=reason, usage=usage, details=details)

    def close(self) -> None:
        for reward in [*self.components.values(), *([self.gate] if self.gate else [])]:
            reward.close()


class RouteOptions(RewardOptions):
    """Options of `Route`."""

    routes: dict[str, RewardSpec] = Field(min_length=1)
    """Reward per field value, e.g. ``{math: ..., code: ...}``: configs or, from Python, `Reward`
    objects."""
    by: str = "data_source"
    """The `Sample.fields` key whose value names the route."""
    default: RewardSpec | None = None
    """Reward for values that have no route; without one such samples are ``not_applicable``
    (and samples without the field ``invalid_input``)."""


@takes_options(RouteOptions)
class Route(Reward):
    """Dispatch each sample to a reward chosen by one of its fields, so one pipeline scores a
    mixed batch (math, code, open-ended), the way verl dispatches on ``data_source``.

    Options: `RouteOptions` (``routes``, ``by``, ``default``).

    The routed value is also reported in the breakdown under the route key, so that per-task
    means show up as separate metrics.
    """

    name = "route"

    def __init__(
        self,
        routes: Mapping[str, Reward | Mapping[str, Any]],
        *,
        by: str = "data_source",
        default: Reward | Mapping[str, Any] | None = None,
        name: str | None = None,
    ):
        self.routes = {
            str(key): built({"name": str(key), **spec} if isinstance(spec, Mapping) else spec, "routes", key)
            for key, spec in routes.items()
        }
        self.by = by
        self.default = None if default is None else built(default, "default")
        if name is not None:
            self.name = name
        defaults = [self.default] if self.default else []
        self.io_bound = any(r.io_bound for r in [*self.routes.values(), *defaults])
        self.uses_gpu = any(r.uses_gpu for r in [*self.routes.values(), *defaults])
        self.scores_groups = any(r.scores_groups for r in [*self.routes.values(), *defaults])
        self.scores_batches = any(r.scores_batches for r in [*self.routes.values(), *defaults])

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        groups: dict[str, list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            if self.by not in sample.fields:
                if self.default is None:
                    scores[index] = Score.failure(
                        Status.INVALID_INPUT,
                        f"{sample.label(index)}: fields.{self.by} is missing; it selects the reward",
                    )
                    continue
                groups["\0default"].append(index)
                continue
            key = str(sample.fields[self.by])
            if key in self.routes or self.default is not None:
                groups[key if key in self.routes else "\0default"].append(index)
            else:
                scores[index] = Score.failure(
                    Status.NOT_APPLICABLE, f"no reward routed for {self.by}={key!r}"
                )

        async def run(key: str, indices: list[int]) -> None:
            reward = self.routes.get(key, self.default)
            assert reward is not None  # a key without a route is grouped only when there is a default
            subset = [samples[i] for i in indices]
            results = await scores_or_failures(reward, subset)
            label = "default" if key == "\0default" else key
            for index, score in zip(indices, results, strict=True):
                breakdown = (
                    {label: score.value, **_prefixed(label, score.breakdown)}
                    if score.value is not None
                    else {}
                )
                scores[index] = replace(score, breakdown=breakdown, details={**score.details, "route": label})
            report_done(self, len(indices))

        await asyncio.gather(*(run(key, indices) for key, indices in groups.items()))
        return scores  # type: ignore[return-value]  # every slot is filled above

    def close(self) -> None:
        for reward in [*self.routes.values(), *([self.default] if self.default else [])]:
            reward.close()
