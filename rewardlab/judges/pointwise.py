"""The pointwise judge: each completion graded on its own, on a scale or yes/no."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from rewardlab.errors import InvalidInput
from rewardlab.judges.judge import (
    Judge,
    JudgeOptions,
    completion_for_judge,
    expected_label,
    graded_score,
    minimum_score,
    prompt_for_judge,
    reference_for_judge,
)
from rewardlab.judges.verdicts import LabelSet
from rewardlab.rewards.contract import Sample, Score, Status
from rewardlab.rewards.options import Scale, takes_options

YES_NO = "yes_no"
DEFAULT_QUESTION = "Is the response correct, and does it fully answer the request?"


class PointwiseJudgeOptions(JudgeOptions):
    """Options of `PointwiseJudge`."""

    scale: Scale | Literal["yes_no"] = (1, 10)
    """``[low, high]`` integers, or ``yes_no``."""
    criteria: str | None = None
    """What to grade on, added to the prompt (e.g. "factual accuracy only")."""
    question: str = DEFAULT_QUESTION
    """The yes/no question (``scale: yes_no`` only)."""
    use_reference: bool = True
    """Show the judge the sample's reference answer, when it has one."""
    normalize: bool = True
    """Map the score to [0, 1] (``(score - low) / (high - low)``; yes is 1); the raw score stays
    in the breakdown as ``score``."""


@takes_options(PointwiseJudgeOptions)
class PointwiseJudge(Judge):
    """Grades each completion alone.

    Options: `PointwiseJudgeOptions` (the scale or a yes/no question, criteria, whether the
    reference is shown), and the backend, client, template and verdict options every judge
    shares (`JudgeOptions`).

    The value is the verdict, or - reading log-probabilities (``verdict_from``) - its
    expectation: the probability of "yes", or the mean score under the judge's distribution.

    Example:
        >>> judge = PointwiseJudge(scale=[1, 5], backend={"type": "local"})  # doctest: +SKIP
        >>> judge.score([Sample(prompt="2+2?", completion="4")])[0].value  # doctest: +SKIP
    """

    name = "pointwise_judge"

    def __init__(
        self,
        *,
        scale: Sequence[int] | Literal["yes_no"] = (1, 10),
        criteria: str | None = None,
        question: str = DEFAULT_QUESTION,
        use_reference: bool = True,
        normalize: bool = True,
        **options: Any,
    ):
        self.binary = isinstance(scale, str)  # the options allow one word: yes_no
        if isinstance(scale, str):
            self.default_template = "pointwise_binary.jinja"
            self.low, self.high = 0, 1
            self.labels = LabelSet(["yes", "no"])
        else:
            self.low, self.high = scale
            self.default_template = "pointwise_scale.jinja"
            self.labels = LabelSet([str(x) for x in range(self.low, self.high + 1)])
        super().__init__(**options)
        self.check_labels(self.labels)
        self.criteria = criteria
        self.question = question
        self.use_reference = use_reference
        self.normalize = normalize

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        return list(await asyncio.gather(*(self._score_one(s, i) for i, s in enumerate(samples))))

    async def _score_one(self, sample: Sample, index: int) -> Score:
        who = sample.label(index)
        try:
            prompt, completion = prompt_for_judge(sample), completion_for_judge(sample)
            reference = reference_for_judge(sample)
        except InvalidInput as error:
            return Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
        if self.is_trivial(completion):
            return minimum_score(0.0 if self.normalize else float(self.low))
        values = {
            "prompt": prompt,
            "completion": completion,
            "reference": reference if self.use_reference else None,
            "criteria": self.criteria,
            "question": self.question,
            "low": self.low,
            "high": self.high,
        }
        key = "verdict" if self.binary else "score"
        judgement = await self.ask(values, self.labels, key, scale_max=None if self.binary else self.high)
        if not judgement.ok:
            return judgement.failure(who)
        distribution = judgement.distribution(self.labels)
        # Binary: the probability of "yes"; a scale: the expected score.
        raw = distribution["yes"] if self.binary else expected_label(distribution)
        return graded_score(judgement, raw, self.low, self.high, self.normalize)
