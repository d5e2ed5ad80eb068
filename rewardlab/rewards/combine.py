"""Composition: several rewards as one (`Combine`), and one pipeline for mixed tasks (`Route`)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from rewardlab.errors import ConfigError
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage, check_batch
from rewardlab.rewards.progress import report_done
from rewardlab.rewards.registry import build


def _prefixed(name: str, breakdown: Mapping[str, float]) -> dict[str, float]:
    return {f"{name}/{key}": value for key, value in breakdown.items()}


def _total_usage(scores: Sequence[Score]) -> Usage | None:
    usages = [score.usage for score in scores if score.usage is not None]
    if not usages:
        return None
    total = usages[0]
    for usage in usages[1:]:
        total = total + usage
    return total


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


class Combine(Reward):
    """Named rewards combined into one value, every component kept in the breakdown.

    Args:
        components: Rewards by name; the names key the breakdown and the logged metrics.
        weights: Weight per component for ``mode="weighted_sum"`` (default 1.0 each).
        mode: ``"weighted_sum"`` or ``"min"`` (the worst component decides).
        gate: Optional reward that must pass for the others to count, e.g. accuracy only counts
            when the format holds. It appears in the breakdown as ``gate/<its name>``. A gate
            that does not apply to a sample is open; one that failed to score is closed.
        gate_threshold: The gate passes when its value is at least this (default 1.0).
        gate_fail_value: The combined value when the gate fails (default 0.0).
        on_component_failure: ``"fail"`` (default): if a component could not score a sample
            (timeout, backend error, ...), the combined score fails with that status, since a
            missing term would otherwise read as a 0. ``"skip"``: combine the remaining ones and
            list the skipped components and their statuses in ``details["skipped"]``.

    A component that is ``not_applicable`` to a sample is left out of its value; when no
    component applies, the combined score is ``not_applicable`` too.
    """

    def __init__(
        self,
        components: Mapping[str, Reward],
        *,
        weights: Mapping[str, float] | None = None,
        mode: Literal["weighted_sum", "min"] = "weighted_sum",
        gate: Reward | None = None,
        gate_threshold: float = 1.0,
        gate_fail_value: float = 0.0,
        on_component_failure: Literal["fail", "skip"] = "fail",
        name: str = "combine",
    ):
        if not components:
            raise ValueError("Combine needs at least one component")
        if mode not in ("weighted_sum", "min"):
            raise ValueError(f"mode must be 'weighted_sum' or 'min', got {mode!r}")
        if on_component_failure not in ("fail", "skip"):
            raise ValueError(f"on_component_failure must be 'fail' or 'skip', got {on_component_failure!r}")
        unknown = set(weights or {}) - set(components)
        if unknown:
            raise ValueError(f"weights name unknown components: {sorted(unknown)}")
        if mode == "min" and weights:
            raise ValueError("weights have no meaning with mode='min'")
        self.components = dict(components)
        self.weights = {key: float((weights or {}).get(key, 1.0)) for key in self.components}
        self.mode = mode
        self.gate = gate
        self.gate_threshold = gate_threshold
        self.gate_fail_value = gate_fail_value
        self.on_component_failure = on_component_failure
        self.name = name
        self.io_bound = any(r.io_bound for r in [*self.components.values(), *([gate] if gate else [])])

    @classmethod
    def from_config(cls, options: dict[str, Any], *, path: str) -> Combine:
        """Build from ``components: {name: {type: ..., weight: w, ...}}`` and an optional ``gate``."""
        options = dict(options)
        raw = options.pop("components", None)
        if not isinstance(raw, Mapping) or not raw:
            raise ConfigError(path, "combine needs 'components': a mapping of name -> reward config")
        components, weights = {}, {}
        for key, entry in raw.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{path}.components.{key}", "must be a reward config mapping")
            sub = {"name": key, **entry}
            if "weight" in sub:
                weights[key] = sub.pop("weight")
            components[key] = build(sub, path=f"{path}.components.{key}".lstrip("."))
        if options.get("gate") is not None:
            options["gate"] = build(options["gate"], path=f"{path}.gate".lstrip("."))
        try:
            return cls(components, weights=weights or None, **options)
        except (TypeError, ValueError) as error:
            raise ConfigError(path, f"combine: {error}") from error

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
        breakdown: dict[str, float] = {}
        details: dict[str, Any] = {}
        reasons = [f"{name}: {score.reason}" for name, score in parts.items() if score.reason]
        for name, score in parts.items():
            if score.ok:
                breakdown[name] = score.value
                breakdown.update(_prefixed(name, score.breakdown))
            if score.details:
                details[name] = score.details
        usage = _total_usage([*parts.values(), *([gate] if gate else [])])
        reason = "; ".join(reasons) or None

        failed = {n: s for n, s in parts.items() if s.status not in (Status.OK, Status.NOT_APPLICABLE)}
        if gate is not None and gate.status not in (Status.OK, Status.NOT_APPLICABLE):
            failed = {f"gate/{self.gate.name}": gate, **failed}
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

        counted = {name: score.value for name, score in parts.items() if score.ok}
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
        if gate is not None and gate.ok:
            breakdown[f"gate/{self.gate.name}"] = gate.value
        # A gate that could not score (skipped above) is closed: nothing unverified gets through.
        # One that does not apply to the sample is open.
        gate_open = (
            gate is None
            or gate.status is Status.NOT_APPLICABLE
            or (gate.ok and gate.value >= self.gate_threshold)
        )
        if not gate_open:
            value = self.gate_fail_value
            details["gate_closed"] = True
        return Score(value=value, breakdown=breakdown, reason=reason, usage=usage, details=details)

    def close(self) -> None:
        for reward in [*self.components.values(), *([self.gate] if self.gate else [])]:
            reward.close()


class Route(Reward):
    """Dispatch each sample to a reward chosen by one of its fields, so one pipeline scores a
    mixed batch (math, code, open-ended), the way verl dispatches on ``data_source``.

    Args:
        routes: Reward per field value, e.g. ``{"math": ..., "code": ...}``.
        by: The `Sample.fields` key that names the route (default ``"data_source"``).
        default: Reward for values that have no route; without one such samples are
            ``not_applicable``.

    The routed value is also reported in the breakdown under the route key, so that per-task
    means show up as separate metrics.
    """

    def __init__(
        self,
        routes: Mapping[str, Reward],
        *,
        by: str = "data_source",
        default: Reward | None = None,
        name: str = "route",
    ):
        if not routes:
            raise ValueError("Route needs at least one route")
        self.routes = dict(routes)
        self.by = by
        self.default = default
        self.name = name
        self.io_bound = any(r.io_bound for r in [*self.routes.values(), *([default] if default else [])])

    @classmethod
    def from_config(cls, options: dict[str, Any], *, path: str) -> Route:
        """Build from ``routes: {value: reward config}`` and an optional ``default`` config."""
        options = dict(options)
        raw = options.pop("routes", None)
        if not isinstance(raw, Mapping) or not raw:
            raise ConfigError(path, "route needs 'routes': a mapping of field value -> reward config")
        routes = {}
        for key, entry in raw.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{path}.routes.{key}", "must be a reward config mapping")
            routes[str(key)] = build({"name": str(key), **entry}, path=f"{path}.routes.{key}".lstrip("."))
        if options.get("default") is not None:
            options["default"] = build(options["default"], path=f"{path}.default".lstrip("."))
        try:
            return cls(routes, **options)
        except (TypeError, ValueError) as error:
            raise ConfigError(path, f"route: {error}") from error

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
            reward = self.default if key == "\0default" else self.routes[key]
            subset = [samples[i] for i in indices]
            results = await scores_or_failures(reward, subset)
            label = "default" if key == "\0default" else key
            for index, score in zip(indices, results, strict=True):
                breakdown = {label: score.value, **_prefixed(label, score.breakdown)} if score.ok else {}
                scores[index] = replace(score, breakdown=breakdown, details={**score.details, "route": label})
            report_done(self, len(indices))

        await asyncio.gather(*(run(key, indices) for key, indices in groups.items()))
        return scores  # type: ignore[return-value]  # every slot is filled above

    def close(self) -> None:
        for reward in [*self.routes.values(), *([self.default] if self.default else [])]:
            reward.close()
