"""Any rewardlab `Reward` as a TRL reward function (GRPOTrainer, RLOOTrainer).

TRL calls a reward function with keywords: ``prompts``, ``completions``, ``completion_ids``, one
list per dataset column, and ``trainer_state``, ``log_extra`` and ``log_metric``; prompts and
completions are strings (standard format) or chat messages (conversational format; with tools, a
completion is the whole multi-turn trajectory: assistant messages with ``tool_calls`` and the
``tool`` messages answering them). With an ``environment_factory``, TRL also passes
``environments``, one environment instance per completion (``trl/trainer/grpo_trainer.py``,
``_calculate_rewards``: ``reward_kwargs["environments"] = self.environments``); the adapter puts
a JSON view of each (`environment_state`) in the sample's ``fields["environment_state"]``, so a
reward such as ``environment_state`` can check the final state. It needs exactly one float (or
None) per completion, and names the function by its ``__name__``.
`as_reward_func` builds such a function: a picklable callable class (TRL copies reward functions
to workers) whose ``__name__`` is the reward's name, async when the reward waits on I/O so TRL
runs it concurrently with its other async rewards.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from rewardlab.errors import RewardFailed
from rewardlab.rewards.contract import REFERENCE_COLUMNS, Reward, Sample, Score, Status
from rewardlab.rewards.trajectory import ENVIRONMENT_STATE_FIELD

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
        environments: Sequence[Any] | None = None,
    ) -> list[Sample]:
        """One `Sample` per completion: dataset columns become fields, one of them the reference;
        with TRL's ``environments``, each completion's environment as JSON in
        ``fields["environment_state"]`` (`environment_state`)."""
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
            if environments is not None:
                fields[ENVIRONMENT_STATE_FIELD] = environment_state(environments[index])
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

    def _prepare(
        self, kwargs: dict[str, Any]
    ) -> tuple[list[Sample], slice, LogMetric | None, LogExtra | None]:
        """The samples to score and where this call's own lie among them: every process's samples
        for a reward that scores groups (`whole_groups`), else this call's."""
        prompts = kwargs.pop("prompts")
        completions = kwargs.pop("completions")
        completion_ids = kwargs.pop("completion_ids", None)
        log_metric = kwargs.get("log_metric")
        log_extra = kwargs.get("log_extra")
        environments = kwargs.get("environments")
        columns = {key: value for key, value in kwargs.items() if key not in _TRAINER_KEYWORDS}
        samples = self.samples(prompts, completions, completion_ids, columns, environments)
        if self.reward.scores_groups:
            samples, own = whole_groups(samples)
        else:
            own = slice(0, len(samples))
        return samples, own, log_metric, log_extra

    def __call__(self, **kwargs: Any) -> list[float | None]:
        samples, own, log_metric, log_extra = self._prepare(kwargs)
        scores = self.reward.score(samples)[own]
        self.report(scores, log_metric, log_extra)
        return self.values(scores)


class AsyncRewardFunc(RewardFunc):
    """`RewardFunc` for I/O-bound rewards: TRL awaits it on its event loop alongside other async rewards."""

    # TRL tells an async reward function apart by its coroutine ``__call__``; a subclass keeps
    # ``isinstance(func, RewardFunc)`` true for both forms.
    async def __call__(self, **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        samples, own, log_metric, log_extra = self._prepare(kwargs)
        scores = (await self.reward.ascore(samples))[own]
        self.report(scores, log_metric, log_extra)
        return self.values(scores)


def whole_groups(samples: list[Sample]) -> tuple[list[Sample], slice]:
    """Every process's samples, in rank order, and where this process's lie among them.

    TRL computes rewards on each process's share of the generation batch and gathers the values
    afterwards, and a share need not hold whole groups: with ``num_generations: 4`` and two
    completions per process, each process holds half of each prompt's completions. A reward that
    grades a group (a pairwise judge, Kimi's length reward, group normalisation) would then grade
    halves - or, below its minimum group size, nothing at all. So for such a reward (`scores_groups`)
    every process gathers all processes' samples (``torch.distributed.all_gather_object``), scores
    them all, and keeps its own: the groups are whole, at the cost of scoring the batch on each
    process. Outside a multi-process run this is the samples as they are.

    The gathering is a collective call: it happens before the reward is awaited, so that every
    process makes its collective calls in the same order (TRL calls sync reward functions one by
    one and starts async ones in order).
    """
    torch = sys.modules.get("torch")
    distributed = getattr(torch, "distributed", None)
    if (
        distributed is None
        or not distributed.is_available()
        or not distributed.is_initialized()
        or distributed.get_world_size() < 2
    ):
        return samples, slice(0, len(samples))
    gathered: list[list[Sample]] = [[] for _ in range(distributed.get_world_size())]
    distributed.all_gather_object(gathered, samples)
    start = sum(len(part) for part in gathered[: distributed.get_rank()])
    return [sample for part in gathered for sample in part], slice(start, start + len(samples))


def environment_state(environment: Any) -> dict[str, Any]:
    """A JSON view of a TRL environment instance, taken when the reward is computed.

    TRL reuses environment instances across batches (it resets them, it does not make new ones),
    so a reward must see a copy of the state as the rollout left it, not the live object. The
    view is the environment's ``to_dict()`` when it defines one (the way to choose what a reward
    sees, or to hide a connection or a random generator), else the fields of a dataclass, else
    its instance attributes (``__dict__`` and set ``__slots__``, private ones included: TRL's own
    examples keep state in ``self._counter``). Tuples and sets become lists (sets sorted),
    nested dataclasses mappings. A value with no JSON form is a `TypeError` naming the
    environment's class and the attribute, raised at the first reward call rather than scoring a
    state the reward cannot read.

    Example:
        >>> class Counter:
        ...     def __init__(self):
        ...         self._count = 0
        ...     def reset(self, **kwargs):
        ...         self._count = 0
        ...     def increment(self, step: int) -> int:
        ...         self._count += step
        ...         return self._count
        >>> counter = Counter()
        >>> counter.increment(2)
        2
        >>> environment_state(counter)
        {'_count': 2}
    """
    name = type(environment).__name__
    if callable(getattr(environment, "to_dict", None)):
        state = environment.to_dict()
        if not isinstance(state, Mapping):
            raise TypeError(
                f"environment {name}: to_dict() must return a mapping, got {type(state).__name__}"
            )
    elif dataclasses.is_dataclass(environment) and not isinstance(environment, type):
        state = {f.name: getattr(environment, f.name) for f in dataclasses.fields(environment)}
    else:
        state = _attributes(environment)
    return {
        str(key): _json_value(value, f"environment {name}: attribute {key!r}") for key, value in state.items()
    }


def _attributes(environment: Any) -> dict[str, Any]:
    """Instance attributes: those in ``__dict__`` and, for a class with ``__slots__``, the slots
    that are set."""
    found = dict(getattr(environment, "__dict__", {}))
    for klass in type(environment).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(environment, slot):
                found.setdefault(slot, getattr(environment, slot))
    return found


def _json_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where} is {value}, which JSON cannot hold")
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _json_value(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, set | frozenset):
        items = [_json_value(v, f"{where} item") for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, list | tuple):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(
        f"{where} is a {type(value).__name__}, which has no JSON form; define to_dict() on the "
        "environment, returning the state a reward should see"
    )


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
        >>> accuracy = as_reward_func(build({"type": "math_answer"}), asynchronous=False)
        >>> accuracy.__name__
        'math_answer'
        >>> accuracy(prompts=["1+1?"], completions=["\\\\boxed{2}"], answer=["2"])
        [1.0]
    """
    use_async = reward.io_bound if asynchronous is None else asynchronous
    return (AsyncRewardFunc if use_async else RewardFunc)(reward, **options)
