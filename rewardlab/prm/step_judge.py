"""`StepJudge`: a generative process reward - an LLM judge checks every step of a solution.

Two ways to ask, a choice between cost and independence:

- ``per_step``: one call per step, showing the problem, the steps before it, and the step to
  check; the verdict is ``correct`` / ``incorrect`` (its probability, where the backend gives
  log-probabilities). N calls, each short, each step judged on its own.
- ``one_call`` (ThinkPRM-style): the judge verifies the whole solution step by step in one
  answer and ends with every step's verdict. One call, a long answer to parse.

``Score.steps`` holds each step's probability of being correct; ``aggregate`` folds them (``min``
by default). An empty completion gets the minimum without a call (``empty_completion``).
``details.first_error`` is the first step judged incorrect (ProcessBench's target;
None when every step passed), and ``details.step_verdicts`` each step's label. With
``use_reference``, the judge also sees the sample's reference solution.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from rewardlab.errors import InvalidInput
from rewardlab.judges.judge import Judge, JudgeOptions, scored
from rewardlab.judges.verdicts import LabelSet, read_label_list
from rewardlab.prm.trajectory import step_texts
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.options import takes_options
from rewardlab.rewards.steps import Aggregate, StepOptions, aggregate_steps

STEP_LABELS = LabelSet(["correct", "incorrect"])
#: At most 12 steps, so a judge is never asked about hundreds of one-line steps.
JUDGED_STEPS = StepOptions(max_steps=12)


class StepJudgeOptions(JudgeOptions):
    """Options of `StepJudge`."""

    mode: Literal["per_step", "one_call"] = "per_step"
    """``per_step``: one call per step, each step judged on its own; ``one_call``: the judge
    verifies the whole solution step by step in one answer (ThinkPRM-style)."""
    aggregate: Aggregate = "min"
    """How step probabilities fold into the value."""
    use_reference: bool = False
    """Show the judge the sample's reference solution."""
    steps: StepOptions = JUDGED_STEPS
    """Where the steps are (`StepOptions`; at most 12 by default, so a judge is never asked
    about hundreds of one-line steps)."""


@takes_options(StepJudgeOptions)
class StepJudge(Judge):
    """Per-step verdicts from an LLM judge (see the module docstring).

    Options: `StepJudgeOptions` (per step or one call, the steps and how they fold), and the
    backend, client, template and verdict options every judge shares (`JudgeOptions`).
    """

    name = "step_judge"
    template_package = "rewardlab.prm"

    def __init__(
        self,
        *,
        mode: Literal["per_step", "one_call"] = "per_step",
        aggregate: Aggregate = "min",
        use_reference: bool = False,
        steps: StepOptions = JUDGED_STEPS,
        **options: Any,
    ):
        self.default_template = "step_judge_step.jinja" if mode == "per_step" else "step_judge_all.jinja"
        super().__init__(**options)
        if mode == "per_step":
            self.check_labels(STEP_LABELS)
        self.mode = mode
        self.aggregate = aggregate
        self.use_reference = use_reference
        self.steps = steps

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        jobs = []
        for index, prompt_and_completion in self.readable(samples, scores, minimum=0.0).items():
            try:
                jobs.append((index, prompt_and_completion[0], step_texts(samples[index], self.steps)))
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{samples[index].label(index)}: {error}")
        judged = await asyncio.gather(
            *(self._judge(samples[index], index, prompt, steps) for index, prompt, steps in jobs)
        )
        for (index, _, _), score in zip(jobs, judged, strict=True):
            scores[index] = score
        return scored(scores)

    async def _judge(self, sample: Sample, index: int, prompt: str, steps: list[str]) -> Score:
        who = sample.label(index)
        reference = sample.reference if self.use_reference else None
        if self.mode == "one_call":
            return await self._one_call(who, prompt, steps, reference)
        questions = [
            (
                {
                    "prompt": prompt,
                    "previous": steps[:k],
                    "step": step,
                    "number": k + 1,
                    "reference": reference,
                },
                STEP_LABELS,
            )
            for k, step in enumerate(steps)
        ]
        judgements, usage, failure = await self.ask_each(
            questions, "verdict", lambda k: f"{who} step {k + 1}"
        )
        if failure is not None:
            return failure
        correct = [j.distribution(STEP_LABELS)["correct"] for j in judgements]
        labels = [j.verdict.label for j in judgements]  # type: ignore[union-attr]
        return self._result(correct, labels, usage)

    async def _one_call(self, who: str, prompt: str, steps: list[str], reference: str | None) -> Score:
        listed = await self.ask_list(
            {"prompt": prompt, "steps": steps, "reference": reference},
            lambda text, fences: read_label_list(text, STEP_LABELS, "steps", len(steps), fences=fences),
        )
        if not listed.ok:
            return listed.failure(who)
        labels = listed.values or []
        return self._result([float(label == "correct") for label in labels], labels, listed.completion.usage)

    def _result(self, correct: list[float], labels: list[str], usage: Usage) -> Score:
        first_error = next((k for k, label in enumerate(labels) if label == "incorrect"), None)
        return Score(
            value=aggregate_steps(correct, self.aggregate),
            steps=correct,
            usage=usage,
            details={"first_error": first_error, "step_verdicts": labels, "mode": self.mode},
        )
