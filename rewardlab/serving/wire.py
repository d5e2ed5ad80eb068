"""The reward server's own JSON, both ways: samples in and scores out for ``POST /score``
(OpenRLHF's ``POST /get_reward`` is `rewardlab.integrations.openrlhf`).

Validation errors name the place in the request (``samples[3].completion``), so that a client
with a thousand samples in a batch can find the culprit. A score on the wire carries every field
of `Score.to_dict` plus the sample's ``id``, its texts clipped (`clip_texts`).

A body is read twice: first by the standard library into plain values, only to count what it
holds, then - once the counts are within the limits - into validated models. Checked the other
way, a body of a million ``{}`` became a million sample models (seconds of CPU and hundreds of
MB) before the batch cap refused it, and a ``/get_reward`` body of 16 million labels took 3 s and
1.7 GB validating each label before its (empty) ``query`` was counted. The first read is the
standard library's because it builds only the Python values (about 5 bytes per byte of a body of
numbers), where pydantic first builds a tree of its own (about 24). What is counted: the samples
(``/score``), the items of ``query``, ``prompts`` and ``labels`` (``/get_reward``; 413 past the
batch cap), and the JSON values in each sample's ``fields`` (413 past ``max_field_values``,
counted container by container, so that one list of 15 million numbers is refused at its
length). The second read is of a body known to be within the limits, and keeps pydantic's
JSON-mode messages (``Input should be an object``) and its refusal of lone surrogates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from rewardlab.errors import RequestError
from rewardlab.request_body import clip_texts, describe, plain_json
from rewardlab.rewards.contract import Sample, Score, Status, Usage


def _text_or_messages(value: Any) -> Any:
    """A prompt or completion is text or a list of chat messages, each a mapping with a role."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ValueError(f"must be text or a list of chat messages, got {type(value).__name__}")
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(f"message {index} must be an object, got {type(message).__name__}")
        if not isinstance(message.get("role"), str):
            raise ValueError(f"message {index} needs a 'role' string")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise ValueError(f"message {index} content must be text or a list of parts")
    return value


Text = Annotated[Any, AfterValidator(_text_or_messages)]


class WireSample(BaseModel):
    """One sample as a client sends it; unknown keys are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")

    prompt: Text = ""
    completion: Text = ""
    reference: str | None = None
    id: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict)

    def to_sample(self) -> Sample:
        return Sample(self.prompt, self.completion, self.reference, self.id, self.fields)


class ScoreRequest(BaseModel):
    """The body of ``POST /score``."""

    model_config = ConfigDict(extra="forbid")

    samples: list[WireSample]


def sample_record(sample: Sample) -> dict[str, Any]:
    """A sample as `WireSample` JSON (what `RemoteReward` sends)."""
    return {
        "prompt": sample.prompt if isinstance(sample.prompt, str) else [dict(m) for m in sample.prompt],
        "completion": sample.completion
        if isinstance(sample.completion, str)
        else [dict(m) for m in sample.completion],
        "reference": sample.reference,
        "id": sample.id,
        "fields": dict(sample.fields),
    }


class WireUsage(BaseModel):
    """`Usage.to_dict` on the wire."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    calls: int = 0
    cached_calls: int = 0
    cache_hit: bool = False

    def to_usage(self) -> Usage:
        return Usage(
            self.prompt_tokens,
            self.completion_tokens,
            self.cost_usd,
            self.latency_s,
            self.calls,
            self.cached_calls,
        )


class WireScore(BaseModel):
    """One score as the server answers it: the sample's ``id`` and every field of `Score.to_dict`."""

    id: str | None = None
    value: float | None
    status: Status
    steps: list[float] | None = None
    breakdown: dict[str, float] = Field(default_factory=dict)
    reason: str | None = None
    usage: WireUsage | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    def to_score(self) -> Score:
        return Score(
            value=self.value,
            status=self.status,
            steps=self.steps,
            breakdown=self.breakdown,
            reason=self.reason,
            usage=None if self.usage is None else self.usage.to_usage(),
            details=self.details,
        )


class ScoreResponse(BaseModel):
    """The body of a ``POST /score`` answer: one score per sample, in order."""

    scores: list[WireScore]
    reward: str
    latency_s: float


def score_record(score: Score, sample_id: str | None, max_text_chars: int) -> dict[str, Any]:
    """A score as `WireScore` JSON, its ``reason`` and the texts in its ``details`` clipped to
    ``max_text_chars``."""
    record = score.to_dict()
    record["reason"] = clip_texts(record["reason"], max_text_chars)
    record["details"] = clip_texts(record["details"], max_text_chars)
    return {"id": sample_id, **record}


def too_many(count: int, max_samples: int) -> RequestError:
    return RequestError(413, f"batch of {count} samples exceeds max_batch_size {max_samples}")


def _values_within(value: Any, limit: int) -> bool:
    """Whether ``value`` holds at most ``limit`` JSON values (itself and every item, entry and
    key-value pair at any depth). A container's length is added before it is walked, so the
    walk stops within ``limit`` steps: a list of 15 million numbers is refused at once."""
    count, stack = 1, [value]
    while stack:
        item = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        count += len(children)
        if count > limit:
            return False
        stack.extend(child for child in children if isinstance(child, dict | list))
    return True


def _count_samples(plain: Any, max_samples: int, max_field_values: int) -> None:
    """Refuse (413) a ``/score`` body, read as plain values, over either limit."""
    listed = plain.get("samples") if isinstance(plain, dict) else None
    if not isinstance(listed, list):
        return  # malformed: the full read says where
    if len(listed) > max_samples:
        raise too_many(len(listed), max_samples)
    for index, sample in enumerate(listed):
        fields = sample.get("fields") if isinstance(sample, dict) else None
        if not _values_within(fields, max_field_values):
            raise RequestError(
                413, f"samples[{index}].fields holds more than max_field_values {max_field_values} values"
            )


def read_score_request(body: bytes, max_samples: int, max_field_values: int) -> list[Sample]:
    """The samples of a ``/score`` body; `RequestError` 413 for more than ``max_samples``, or a
    sample whose ``fields`` hold more than ``max_field_values`` JSON values (both before any
    sample is checked), 422 naming the sample and field otherwise."""
    _count_samples(plain_json(body), max_samples, max_field_values)
    try:
        request = ScoreRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestError(422, describe(error)) from None
    return [sample.to_sample() for sample in request.samples]


def render_json(content: Mapping[str, Any]) -> bytes:
    """JSON for a response. Scores are promised JSON-ready; an object that is not (in a reward's
    details) is written as its ``str``, as offline scoring writes it. Non-finite floats in a
    breakdown or details are written as ``NaN``/``Infinity``, as Python's json (and so offline
    output, `RemoteReward` and OpenRLHF's ``requests``) reads them."""
    return json.dumps(content, default=str, separators=(",", ":")).encode()
