"""Any rewardlab `Reward` as a TRL reward function (GRPOTrainer, RLOOTrainer).

TRL calls a reward function with keywords: ``prompts``, ``completions``, ``completion_ids``, one
list per dataset column, and ``trainer_state``, ``log_extra`` and ``log_metric``; prompts and
completions are strings (standard format) or chat messages (conversational format). It needs
exactly one float (or None) per completion, and names the function by its ``__name__``.
`as_reward_func` builds such a function: a picklable callable class (TRL copies reward functions
to workers) whose ``__name__`` is the reward's name, async when the reward waits on I/O so TRL
runs it concurrently with its other async rewards.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Literal

from rewardlab.errors import RewardFailed
from rewardlab.rewards.contract import REFERENCE_COLUMNS, Reward, Sample, Score, Status

_TRAINER_KEYWORDS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})

OnError = Literal["none", "raise", "value"]
#: TRL's ``log_metric(name, value)`` and ``log_extra(column, values)``.
LogMetric = Callable[[str, float], None]
LogExtra = Callable[[str, list[Any]], None]


class RewardFunc:
    """A rewardlab reward in TRL's reward-function contract (see `as_reward_func`).

    Args:
        reward: The reward to call.
        on_error: What TRL receives for a sample that could not be scored (timeout, backend
            error, invalid input): ``"none"`` (default), ``"value"`` (``error_value``) or
            ``"raise"``. Not-applicable samples always get None. For rewards a policy could
            game by producing unscorable answers (a CAS timeout is masked, a wrong answer is
            not), ``"value"`` with ``error_value=0.0`` closes that door.
        error_value: The value used with ``on_error="value"``.
        reference_column: Dataset column holding the reference; by default the first present of
            `REFERENCE_COLUMNS`.
        id_column: Dataset column holding a stable sample id, if any.
        log_components: Log the mean of each breakdown component as ``<name>/<component>`` and
            the failure rate as ``<name>/failed_frac`` through TRL's ``log_metric``.
        log_reasons: Add ``<name>/status`` and ``<name>/reason`` columns to TRL's completions table.
    """

    def __init__(
        self,
        reward: Reward,
        *,
        on_error: OnError = "none",
        error_value: float = 0.0,
        reference_column: str | None = None,
        id_column: str = "id",
        log_components: bool = True,
        log_reasons: bool = True,
    ):
        if on_error not in ("none", "raise", "value"):
            raise ValueError(f"on_error must be 'none', 'raise' or 'value', got {on_error!r}")
        self.reward = reward
        self.__name__ = reward.name
        self.on_error = on_error
        self.error_value = error_value
        self.reference_column = reference_column
        self.id_column = id_column
        self.log_components = log_components
        self.log_reasons = log_reasons

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reward!r}, on_error={self.on_error!r})"

    def samples(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None,
        columns: dict[str, Sequence[Any]],
    ) -> list[Sample]:
        """One `Sample` per completion: dataset columns become fields, one of them the reference."""
        reference_column = self.reference_column or next((c for c in REFERENCE_COLUMNS if c in columns), None)
        if reference_column is not None and reference_column not in columns:
            raise KeyError(
                f"reward {self.__name__!r}: reference column {reference_column!r} is not in the dataset; "
                f"columns: {sorted(columns)}"
            )
        samples = []
        for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            fields = {name: values[index] for name, values in columns.items()}
            if completion_ids is not None:
                fields["completion_ids"] = completion_ids[index]
            reference = fields.get(reference_column) if reference_column else None
            identifier = fields.get(self.id_column)
            samples.append(
                Sample(
                    prompt=prompt,
                    completion=completion,
                    reference=None if reference is None else str(reference),
                    id=None if identifier is None else str(identifier),
                    fields=fields,
                )
            )
        return samples

    def values(self, scores: Sequence[Score]) -> list[float | None]:
        """The floats TRL receives: None for not-applicable samples, failures per ``on_error``."""
        failures = [s for s in scores if s.status not in (Status.OK, Status.NOT_APPLICABLE)]
        if failures and self.on_error == "raise":
            reasons = "; ".join(f"{s.status.value}: {s.reason}" for s in failures[:3])
            raise RewardFailed(
                f"reward {self.__name__!r}: {len(failures)} of {len(scores)} samples failed ({reasons})"
            )
        values: list[float | None] = []
        for score in scores:
            if score.ok:
                values.append(score.value)
            elif score.status is Status.NOT_APPLICABLE or self.on_error == "none":
                values.append(None)
            else:
                values.append(self.error_value)
        return values

    def report(
        self,
        scores: Sequence[Score],
        log_metric: LogMetric | None,
        log_extra: LogExtra | None,
    ) -> None:
        """Per-component means and failure rates through ``log_metric``; reasons through ``log_extra``."""
        if log_metric is not None and self.log_components:
            components: dict[str, list[float]] = defaultdict(list)
            for score in scores:
                for key, value in score.breakdown.items():
                    if math.isfinite(value):
                        components[key].append(value)
            for key, values in components.items():
                log_metric(f"{self.__name__}/{key}", sum(values) / len(values))
            failed = sum(s.status not in (Status.OK, Status.NOT_APPLICABLE) for s in scores)
            log_metric(f"{self.__name__}/failed_frac", failed / max(len(scores), 1))
        if log_extra is not None and self.log_reasons:
            log_extra(f"{self.__name__}/status", [s.status.value for s in scores])
            log_extra(f"{self.__name__}/reason", [s.reason for s in scores])

    def _prepare(self, kwargs: dict[str, Any]) -> tuple[list[Sample], LogMetric | None, LogExtra | None]:
        prompts = kwargs.pop("prompts")
        completions = kwargs.pop("completions")
        completion_ids = kwargs.pop("completion_ids", None)
        log_metric = kwargs.get("log_metric")
        log_extra = kwargs.get("log_extra")
        columns = {key: value for key, value in kwargs.items() if key not in _TRAINER_KEYWORDS}
        return self.samples(prompts, completions, completion_ids, columns), log_metric, log_extra

    def __call__(self, **kwargs: Any) -> list[float | None]:
        samples, log_metric, log_extra = self._prepare(kwargs)
        scores = self.reward.score(samples)
        self.report(scores, log_metric, log_extra)
        return self.values(scores)


class AsyncRewardFunc(RewardFunc):
    """`RewardFunc` for I/O-bound rewards: TRL awaits it on its event loop alongside other async rewards."""

    # TRL tells an async reward function apart by its coroutine ``__call__``; a subclass keeps
    # ``isinstance(func, RewardFunc)`` true for both forms.
    async def __call__(self, **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        samples, log_metric, log_extra = self._prepare(kwargs)
        scores = await self.reward.ascore(samples)
        self.report(scores, log_metric, log_extra)
        return self.values(scores)


def as_reward_func(reward: Reward, *, asynchronous: bool | None = None, **options: Any) -> RewardFunc:
    """Wrap a reward for TRL's ``reward_funcs``.

    Args:
        reward: Any rewardlab reward, e.g. a `Combine` built from YAML.
        asynchronous: Force the async (True) or sync (False) form; by default async exactly
            when the reward waits on other processes or servers (``reward.io_bound``).
        **options: `RewardFunc` options: ``on_error`` (``"none"``, the default: TRL receives None
            for a sample that could not be scored, and leaves a completion that no reward could
            score out of the group baseline; ``"value"``: ``error_value``; ``"raise"``),
            ``error_value``, ``reference_column``, ``id_column``, ``log_components``,
            ``log_reasons``.

    Example:
        >>> from rewardlab import build
        >>> accuracy = as_reward_func(build({"type": "math_answer"}))
        >>> accuracy.__name__
        'math_answer'
        >>> accuracy(prompts=["1+1?"], completions=["\\\\boxed{2}"], answer=["2"])
        [1.0]
    """
    use_async = reward.io_bound if asynchronous is None else asynchronous
    return (AsyncRewardFunc if use_async else RewardFunc)(reward, **options)
