"""OpenRLHF's remote reward protocol (``--remote_rm_url``), served by ``rewardlab serve`` at
``POST /get_reward``: ``query``/``prompts``/``labels`` in, ``rewards``/``scores``/``extra_logs``
out (``openrlhf/utils/remote_rm_utils.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from rewardlab.errors import RequestError
from rewardlab.request_body import clip_texts, describe, plain_json
from rewardlab.rewards.contract import Sample, Score


def _label(value: Any) -> Any:
    """An OpenRLHF label is text, a number or null; it becomes the sample's reference as text.

    A number is written as the number it is, not as Python spells a float: ``1.0`` is ``"1"``
    (as ``"1.0"`` a completion answering 1 failed an exact match), ``0.5`` is ``"0.5"``. A
    non-finite number (JSON has none, but Python's writers send ``NaN``) is refused: as a
    reference it would be the word "nan".
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number, got {value}")
        return str(int(value)) if value.is_integer() else repr(value)
    raise ValueError(f"must be text, a number or null, got {type(value).__name__}")


Label = Annotated[Any, AfterValidator(_label)]


class GetRewardRequest(BaseModel):
    """The body OpenRLHF's remote reward client sends (``openrlhf/utils/remote_rm_utils.py``):
    ``query`` is each prompt followed by its response, as decoded by the policy's tokenizer with
    special tokens kept; ``prompts`` the prompts alone; ``labels`` the dataset's ``--label_key``
    column. Other keys (later OpenRLHF versions may add some) are ignored, as OpenRLHF's own
    servers do."""

    model_config = ConfigDict(extra="ignore")

    query: list[str]
    prompts: list[str]
    labels: list[Label] | None = None

    def to_samples(self) -> list[Sample]:
        """One sample per query: the completion is the query after its prompt, the reference the
        label. A query that does not start with its prompt is refused: guessing where the
        response starts would score the wrong text."""
        count = len(self.query)
        if len(self.prompts) != count:
            raise RequestError(422, f"prompts has {len(self.prompts)} items but query has {count}")
        if self.labels is not None and len(self.labels) != count:
            raise RequestError(422, f"labels has {len(self.labels)} items but query has {count}")
        samples = []
        for index, (query, prompt) in enumerate(zip(self.query, self.prompts, strict=True)):
            if not query.startswith(prompt):
                raise RequestError(
                    422,
                    f"query[{index}] does not start with prompts[{index}] (they differ from character "
                    f"{_first_difference(query, prompt)}); query must be the prompt followed by the response",
                )
            reference = None if self.labels is None else self.labels[index]
            samples.append(Sample(prompt=prompt, completion=query[len(prompt) :], reference=reference))
        return samples


def _first_difference(first: str, second: str) -> int:
    return next(
        (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
        min(len(first), len(second)),
    )


def _count_lists(plain: Any, max_samples: int) -> None:
    """Refuse (413) a ``/get_reward`` body, read as plain values, with a list over the cap."""
    for name in ("query", "prompts", "labels"):
        items = plain.get(name) if isinstance(plain, dict) else None
        if isinstance(items, list) and len(items) > max_samples:
            raise RequestError(413, f"{name} has {len(items)} items: more than max_batch_size {max_samples}")


def read_get_reward_request(body: bytes, max_samples: int) -> list[Sample]:
    """The samples of a ``/get_reward`` body; `RequestError` 413 when ``query``, ``prompts`` or
    ``labels`` has more than ``max_samples`` items (before any item is checked), 422 naming the
    problem otherwise."""
    _count_lists(plain_json(body), max_samples)
    try:
        request = GetRewardRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestError(422, describe(error)) from None
    return request.to_samples()


def get_reward_record(
    name: str, scores: Sequence[Score], failure_value: float, max_text_chars: int
) -> dict[str, Any]:
    """OpenRLHF's answer: ``rewards`` (advantages) and ``scores`` (dynamic filtering) both the
    reward's values, and ``extra_logs`` of per-sample numbers that OpenRLHF concatenates and logs.

    OpenRLHF needs a number for every sample, so a sample without a value (a failure, or not
    applicable) gets ``failure_value`` - never silently: ``extra_logs["<name>/failed"]`` is 1.0
    for it, and ``statuses`` and ``reasons`` (keys OpenRLHF ignores) say what happened. Breakdown
    components are logged as ``<name>/<component>`` when every sample of the batch has them.
    Reasons are clipped to ``max_text_chars``.
    """
    rewards = [score.value if score.ok else failure_value for score in scores]
    extra_logs: dict[str, list[float]] = {f"{name}/failed": [0.0 if s.ok else 1.0 for s in scores]}
    if scores:
        shared = set.intersection(*(set(s.breakdown) for s in scores))
        for component in sorted(shared):
            values = [float(s.breakdown[component]) for s in scores]
            if all(math.isfinite(v) for v in values):
                extra_logs[f"{name}/{component}"] = values
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": extra_logs,
        "statuses": [score.status.value for score in scores],
        "reasons": [clip_texts(score.reason, max_text_chars) for score in scores],
    }
