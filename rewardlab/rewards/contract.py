"""The one contract every scorer in rewardlab follows: `Sample`s in, one `Score` per sample out.

A failure is a value, not an exception and not a silent 0: a `Score` whose status is not ``ok``
carries ``value=None`` and a reason, so a trainer, a report or an offline run can tell "the model
was wrong" from "we could not tell".
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import json
import math
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from rewardlab.errors import InvalidInput

Message = Mapping[str, Any]
T = TypeVar("T")
Text = str | Sequence[Message]

#: Dataset columns read as `Sample.reference` when no column is named, in this order; shared by
#: the TRL adapter and offline scoring so that one dataset means the same thing in both.
REFERENCE_COLUMNS = ("reference", "answer", "solution", "ground_truth", "gold", "target")


class Status(StrEnum):
    """Why a score has, or has not, a value."""

    OK = "ok"
    NOT_APPLICABLE = "not_applicable"
    TIMEOUT = "timeout"
    INVALID_INPUT = "invalid_input"
    PARSE_ERROR = "parse_error"
    BACKEND_ERROR = "backend_error"
    ERROR = "error"


@dataclass(slots=True)
class Usage:
    """What a score cost: model calls and tokens, money, and time spent waiting on models.

    Attributes:
        prompt_tokens: Prompt tokens over all model calls (cached answers count 0).
        completion_tokens: Completion tokens over all model calls (cached answers count 0).
        cost_usd: Price of the calls, where the model has a known price.
        latency_s: Time spent in model calls, summed over calls.
        calls: Model calls the score needed.
        cached_calls: How many of them a cache (or an identical request in the same batch)
            answered.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    calls: int = 0
    cached_calls: int = 0

    @property
    def cache_hit(self) -> bool:
        """True when every call was answered from the cache."""
        return self.calls > 0 and self.cached_calls == self.calls

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
            self.latency_s + other.latency_s,
            self.calls + other.calls,
            self.cached_calls + other.cached_calls,
        )

    @staticmethod
    def total(scores: Sequence[Score]) -> Usage | None:
        """What the scores' model calls used together (a composite's usage); None when none
        reports any."""
        usages = [score.usage for score in scores if score.usage is not None]
        if not usages:
            return None
        total = usages[0]
        for usage in usages[1:]:
            total = total + usage
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "cache_hit": self.cache_hit,
        }


def message_text(
    value: Text | None, roles: tuple[str, ...] = ("assistant",), field_name: str = "completion"
) -> str:
    """Plain text of a prompt or completion given as a string or as chat messages.

    For messages, the contents of the given roles are joined with blank lines; list-of-parts
    contents (``[{"type": "text", "text": ...}]``) contribute their text parts, and a message
    without content (an assistant turn that only calls a tool) contributes nothing. Anything else
    raises `InvalidInput` naming ``field_name``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, Sequence):
        raise InvalidInput(field_name, f"must be text or a list of chat messages, got {type(value).__name__}")
    parts: list[str] = []
    for message in value:
        if not isinstance(message, Mapping):
            raise InvalidInput(field_name, f"chat messages must be mappings, got {type(message).__name__}")
        if roles and message.get("role") not in roles:
            continue
        content = message.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            )
        else:
            raise InvalidInput(field_name, f"message content must be text, got {type(content).__name__}")
    return "\n\n".join(parts)


@dataclass(slots=True)
class Sample:
    """What is scored.

    Attributes:
        prompt: The task as the policy saw it: a string, or chat messages.
        completion: The rollout: a string, or assistant (and tool) messages.
        reference: Gold answer or reference solution. Never shown to the policy.
        id: Stable identifier, used for resume, caching and reports.
        fields: Task data a reward may need (tests, rubric, instruction ids, group id, ...).
    """

    prompt: Text = ""
    completion: Text = ""
    reference: str | None = None
    id: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def completion_text(self) -> str:
        """The completion as plain text (assistant message contents for a conversation)."""
        return message_text(self.completion)

    @property
    def prompt_text(self) -> str:
        """The prompt as plain text (all message contents for a conversation)."""
        return message_text(self.prompt, roles=(), field_name="prompt")

    def label(self, index: int | None = None) -> str:
        """How error messages refer to this sample: its id, else its position in the batch."""
        if self.id is not None:
            return f"sample {self.id!r}"
        return f"sample #{index}" if index is not None else "sample"

    def group_key(self, field: str = "group_id") -> tuple[str, str]:
        """Which group this sample belongs to, for rewards that score the completions of one prompt
        together (pairwise, listwise and self-proposed judges, group length shaping, step
        advantages): ``fields[field]`` when set, else its prompt - the same text, or the same
        messages, is the same group."""
        value = self.fields.get(field)
        if value is not None:
            return "field", str(value)
        if isinstance(self.prompt, str):
            return "prompt", self.prompt
        return "prompt", json.dumps([dict(message) for message in self.prompt], sort_keys=True, default=str)


@dataclass(slots=True)
class Score:
    """What comes back, always exactly one per sample.

    Attributes:
        value: The reward; ``None`` exactly when ``status`` is not ``ok``.
        status: ``ok`` or why there is no value.
        steps: Step-level scores (process rewards), when the reward has them.
        breakdown: Per-component or per-criterion values, by name.
        reason: Why: a judge's rationale, the failed check, an error message.
        usage: Tokens, cost, latency and cache use of model-backed rewards.
        details: JSON-serialisable extras (extracted answer, per-test results, raw judge text).
    """

    value: float | None
    status: Status = Status.OK
    steps: list[float] | None = None
    breakdown: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    usage: Usage | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.status is Status.OK:
            if self.value is None or not math.isfinite(self.value):
                raise ValueError(f"an ok Score needs a finite value, got {self.value!r}")
            self.value = float(self.value)
        elif self.value is not None:
            raise ValueError(f"a Score with status {self.status.value!r} must have value None")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def failure(cls, status: Status | str, reason: str, **extra: Any) -> Score:
        """A score without a value, for a sample that could not be scored."""
        return cls(value=None, status=Status(status), reason=reason, **extra)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (the offline output format)."""
        return {
            "value": self.value,
            "status": self.status.value,
            "steps": self.steps,
            "breakdown": dict(self.breakdown),
            "reason": self.reason,
            "usage": None if self.usage is None else self.usage.to_dict(),
            "details": self.details,
        }


class Reward(abc.ABC):
    """Anything that scores: a batch of samples in, one score per sample out, in order.

    Subclasses implement `ascore`, the batch-first async primitive. Per-sample rule checks are
    simpler as a `RuleReward`. ``name`` is stable: it keys logs, metrics and breakdowns.
    """

    name: str = "reward"
    #: True when scoring mostly waits (on a model server, or on worker processes); the TRL adapter
    #: then hands TRL an async function so that such rewards run concurrently on TRL's event loop.
    io_bound: bool = False
    #: True when the reward runs a model in this process, on the GPU when there is one; the Ray
    #: engine then gives each of its worker actors a share of the cluster's GPUs.
    uses_gpu: bool = False
    #: True when a sample's score depends on the other samples of its group in the same call
    #: (pairwise and listwise judges, group length shaping, group normalisation): the TRL adapter
    #: then scores the groups whole when a trainer splits them across processes.
    scores_groups: bool = False
    #: True when a sample's score depends on every other sample of the same call, not only on its
    #: group's (batch normalisation, a fit over the batch); implies `scores_groups`. A probe then
    #: scores one changed sample per call, in the batch it was scored in (`rewardlab.probe.runner`).
    scores_batches: bool = False

    @abc.abstractmethod
    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Score a batch; must return exactly ``len(samples)`` scores in order."""

    def score(self, samples: Sequence[Sample]) -> list[Score]:
        """Synchronous `ascore`, usable from plain scripts, threads and running event loops."""
        return run_sync(self.ascore(samples))

    def close(self) -> None:  # noqa: B027 - most rewards hold nothing to release
        """Release worker processes or connections the reward holds (idempotent)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, even inside a running event loop (a
    notebook, an async trainer), where a nested `asyncio.run` is illegal: there it runs on a loop
    of its own thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def check_batch(reward: Reward, samples: Sequence[Sample], scores: Sequence[Score]) -> list[Score]:
    """Enforce the one-score-per-sample rule at composition boundaries."""
    if len(scores) != len(samples):
        raise RuntimeError(f"reward {reward.name!r} returned {len(scores)} scores for {len(samples)} samples")
    return list(scores)
