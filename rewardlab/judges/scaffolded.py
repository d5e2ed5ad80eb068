"""The reference-scaffolded judge (ExpRL): a hidden reference solution becomes a problem-specific
grading scaffold, and the judge grades each rollout against it - the whole rollout (outcome
level) or each segment of it (process level).

The point, as in ExpRL, is dense credit on hard problems: a rollout that makes real progress
but does not finish earns reward that a final-answer check would never give. The reference is
used only here, in the judge's prompts; the policy is trained on the original prompt alone.
`Score.details` keeps the judge's answers, which may quote the reference: they are for logs and
reports, never for anything the policy is shown.

The scaffold comes from, in order: the sample's ``fields["scaffold"]`` (precomputed); the
reference itself (``scaffold: reference``); or one judge call per distinct problem that turns the
reference into a grading guide of milestones and pitfalls (``scaffold: generate``, cached like
every call).

At process level the rollout is split into segments (the ``steps`` option, `StepOptions`:
paragraphs, at most 12, by default) and every segment gets a label - progress, neutral or
error - worth 1, 0 and -1 by default.
``Score.steps`` holds the segment values and ``Score.value`` their aggregate (a named choice,
``mean`` by default). When several rollouts of one problem are in the batch, each also gets
``details["step_advantages"]``: the process-supervision advantage (see
`rewardlab.rewards.steps.process_advantages`) with which ExpRL's process rewards enter GRPO.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import Field, field_validator

from rewardlab.errors import InvalidInput
from rewardlab.judges.judge import (
    Judge,
    Judgement,
    JudgeOptions,
    cache_keys,
    call_failure,
    completion_for_judge,
    expected_label,
    graded_score,
    minimum_score,
    prompt_for_judge,
    reference_for_judge,
    scored,
)
from rewardlab.judges.verdicts import LabelSet, read_label_list
from rewardlab.llm.client import Completion
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.options import PathOption, Scale, takes_options
from rewardlab.rewards.steps import Aggregate, StepOptions, aggregate_steps, process_advantages, step_spans

DEFAULT_STEP_LABELS = MappingProxyType({"progress": 1.0, "neutral": 0.0, "error": -1.0})
#: Segments as ExpRL grades them: paragraphs, the shortest merged while there are more than 12.
SEGMENTS = StepOptions(split="paragraphs", max_steps=12)


@dataclass(slots=True)
class _Task:
    """One sample to grade: its texts and where its scaffold comes from."""

    index: int
    prompt: str
    completion: str
    reference: str
    problem_key: str
    spans: list[tuple[int, int]] = field(default_factory=list)


class ReferenceScaffoldedJudgeOptions(JudgeOptions):
    """Options of `ReferenceScaffoldedJudge`."""

    level: Literal["outcome", "process"] = "outcome"
    """``outcome``: one score for the rollout; ``process``: one label per segment."""
    scaffold: Literal["generate", "reference"] = "generate"
    """``generate``: a judge call writes a grading guide from the reference; ``reference``: the
    reference itself is the guide."""
    scaffold_field: str = "scaffold"
    """The `Sample.fields` key holding a precomputed scaffold, which takes precedence."""
    scaffold_template: PathOption | None = None
    """Template file for scaffold generation, replacing the built-in one."""
    scaffold_max_words: int = Field(default=250, ge=1)
    """Length asked of a generated scaffold."""
    show_reference: bool = True
    """Show the judge the reference solution beside the scaffold."""
    scale: Scale = (0, 10)
    """``[low, high]`` integers for outcome scores."""
    normalize: bool = True
    """Map outcome scores to [0, 1]."""
    step_labels: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_STEP_LABELS))
    """Segment labels and their values, in order: progress, neutral, error."""
    process_calls: Literal["auto", "one", "per_segment"] = "auto"
    """``one`` call labels every segment; ``per_segment`` asks about each segment with what came
    before it (costlier, but works with guided choice and yields label probabilities); ``auto``
    is per segment exactly when reasoning is off."""
    steps: StepOptions = SEGMENTS
    """Where the segments are (`StepOptions`): paragraphs, the shortest adjacent ones merged
    while there are more than 12, unless the sample lists its own steps. A rollout with no
    segment is one empty segment, so it still gets a verdict."""
    aggregate: Aggregate = "mean"
    """How segment values fold into the value."""
    group_field: str = "group_id"
    """The `Sample.fields` key naming a sample's group (for step advantages); samples without it
    are grouped by prompt."""

    @field_validator("step_labels")
    @classmethod
    def _three_labels(cls, labels: dict[str, float]) -> dict[str, float]:
        if len(labels) != 3:
            raise ValueError("needs three labels: progress, neutral, error (in that order)")
        return labels


@takes_options(ReferenceScaffoldedJudgeOptions)
class ReferenceScaffoldedJudge(Judge):
    """Grades rollouts against a scaffold built from a hidden reference solution.

    Options: `ReferenceScaffoldedJudgeOptions` (outcome or process level, where the scaffold
    comes from, the outcome scale, segment labels, segments and how they fold), and the backend,
    client, template and verdict options every judge shares (`JudgeOptions`).
    """

    name = "reference_scaffolded_judge"
    default_template = "scaffolded_outcome.jinja"

    def __init__(
        self,
        *,
        level: Literal["outcome", "process"] = "outcome",
        scaffold: Literal["generate", "reference"] = "generate",
        scaffold_field: str = "scaffold",
        scaffold_template: str | Path | None = None,
        scaffold_max_words: int = 250,
        show_reference: bool = True,
        scale: Sequence[int] = (0, 10),
        normalize: bool = True,
        step_labels: Mapping[str, float] = DEFAULT_STEP_LABELS,
        process_calls: Literal["auto", "one", "per_segment"] = "auto",
        steps: StepOptions = SEGMENTS,
        aggregate: Aggregate = "mean",
        group_field: str = "group_id",
        **options: Any,
    ):
        super().__init__(**options)
        self.level = level
        self.scores_groups = level == "process"
        self.per_segment = process_calls == "per_segment" or (process_calls == "auto" and not self.reasoning)
        if level == "process" and options.get("template") is None:
            name = "scaffolded_segment.jinja" if self.per_segment else "scaffolded_process.jinja"
            self.prompt = self.prompt_named(name)
        self.scaffold_prompt = self.prompt_named(scaffold_template or "scaffold.jinja")
        self.scaffold = scaffold
        self.scaffold_field = scaffold_field
        self.scaffold_max_words = scaffold_max_words
        self.show_reference = show_reference
        self.low, self.high = scale
        self.normalize = normalize
        self.outcome_labels = LabelSet([str(x) for x in range(self.low, self.high + 1)])
        self.step_values = dict(step_labels)
        self.step_labels = LabelSet(list(step_labels))
        self.steps = steps
        self.aggregate = aggregate
        self.group_field = group_field
        self.check_labels(self.outcome_labels if level == "outcome" else self.step_labels)

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        tasks: list[_Task] = []
        for index, sample in enumerate(samples):
            try:
                task = self._task(sample, index)
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
                continue
            if self.is_trivial(task.completion):
                scores[index] = minimum_score(self._minimum())
                continue
            tasks.append(task)
        scaffolds = await self._scaffolds(samples, tasks)
        first_of_problem = {task.problem_key: task.index for task in reversed(tasks)}
        graded = await asyncio.gather(
            *(
                self._grade(
                    samples[t.index], t, scaffolds[t.problem_key], first_of_problem[t.problem_key] == t.index
                )
                for t in tasks
            )
        )
        for task, score in zip(tasks, graded, strict=True):
            scores[task.index] = score
        if self.level == "process":
            self._add_step_advantages(samples, tasks, scores)
        return scored(scores)

    def _minimum(self) -> float:
        """The lowest value a rollout can get: an empty one gets it without a call."""
        if self.level == "process":
            return aggregate_steps([min(self.step_values.values())], self.aggregate)
        return 0.0 if self.normalize else float(self.low)

    def _task(self, sample: Sample, index: int) -> _Task:
        prompt, completion = prompt_for_judge(sample), completion_for_judge(sample)
        precomputed = sample.fields.get(self.scaffold_field)
        reference = reference_for_judge(sample)
        if not isinstance(reference, str) or not reference.strip():
            if precomputed is None or self.show_reference:
                raise InvalidInput(
                    "reference", "the reference-scaffolded judge needs the hidden reference solution"
                )
            reference = ""
        if precomputed is not None and not isinstance(precomputed, str):
            raise InvalidInput(
                self.scaffold_field, f"a scaffold must be text, got {type(precomputed).__name__}"
            )
        key = hashlib.sha256(f"{prompt}\0{reference}\0{precomputed}".encode()).hexdigest()[:16]
        spans = []
        if self.level == "process":
            # A rollout without a step still gets a verdict, as one empty segment.
            spans = step_spans(completion, sample.fields, self.steps) or [(0, len(completion))]
        return _Task(index, prompt, completion, reference, key, spans)

    async def _scaffolds(self, samples: Sequence[Sample], tasks: list[_Task]) -> dict[str, Completion | str]:
        """One scaffold per distinct problem: the text, or the failed call that should have made it."""
        first: dict[str, _Task] = {}
        for task in tasks:
            first.setdefault(task.problem_key, task)

        async def make(task: _Task) -> Completion | str:
            precomputed = samples[task.index].fields.get(self.scaffold_field)
            if precomputed is not None:
                return precomputed
            if self.scaffold == "reference":
                return task.reference
            values = {
                "prompt": task.prompt,
                "reference": task.reference,
                "max_words": self.scaffold_max_words,
            }
            return await self.ask_text(values, self.scaffold_prompt, max_tokens=4 * self.scaffold_max_words)

        made = await asyncio.gather(*(make(task) for task in first.values()))
        return dict(zip(first, made, strict=True))

    async def _grade(self, sample: Sample, task: _Task, scaffold: Completion | str, first: bool) -> Score:
        who = sample.label(task.index)
        scaffold_usage = Usage()
        if isinstance(scaffold, Completion):
            # One call serves all the problem's samples: the first is charged for it, the others
            # count it as answered from the cache, so that usage adds up over a batch.
            scaffold_usage = scaffold.usage if first else Usage(calls=1, cached_calls=1)
            if scaffold.response is None:
                return call_failure(scaffold, None, f"{who} (grading scaffold)")
            if not scaffold.response.text.strip():
                return Score.failure(
                    Status.PARSE_ERROR,
                    f"{who}: the judge wrote an empty grading scaffold",
                    usage=scaffold_usage,
                )
            scaffold_text = scaffold.response.text.strip()
        else:
            scaffold_text = scaffold
        values = {
            "prompt": task.prompt,
            "scaffold": scaffold_text,
            "reference": task.reference,
            "show_reference": self.show_reference,
            "completion": task.completion,
            "low": self.low,
            "high": self.high,
            "labels": self.step_labels.labels,
        }
        if self.level == "outcome":
            score = await self._grade_outcome(values, who)
        else:
            score = await self._grade_process(values, task.completion, task.spans, who)
        score.usage = scaffold_usage + (score.usage or Usage())
        score.details["scaffold_id"] = hashlib.sha256(scaffold_text.encode()).hexdigest()[:16]
        return score

    async def _grade_outcome(self, values: dict[str, Any], who: str) -> Score:
        judgement = await self.ask(values, self.outcome_labels, "score", scale_max=self.high)
        if not judgement.ok:
            return judgement.failure(who)
        raw = expected_label(judgement.distribution(self.outcome_labels))
        return graded_score(judgement, raw, self.low, self.high, self.normalize)

    async def _grade_process(
        self, values: dict[str, Any], completion: str, spans: list[tuple[int, int]], who: str
    ) -> Score:
        segments = [completion[start:end] for start, end in spans]
        if self.per_segment:
            questions = [
                (
                    {**values, "segment": segment, "earlier": completion[: spans[k][0]].strip()},
                    self.step_labels,
                )
                for k, segment in enumerate(segments)
            ]
            judgements, usage, failure = await self.ask_each(
                questions, "label", lambda k: f"{who} segment {k + 1}"
            )
            if failure is not None:
                return failure
            steps = [self._expected_value(j) for j in judgements]
            labels = [j.verdict.label for j in judgements]  # type: ignore[union-attr]
            keys = cache_keys([j.completion for j in judgements])
        else:
            listed = await self.ask_list(
                {**values, "segments": segments},
                lambda text, fences: read_label_list(
                    text, self.step_labels, "segments", len(segments), fences=fences
                ),
            )
            usage = listed.completion.usage
            if not listed.ok:
                return listed.failure(who)
            labels = listed.values or []
            steps = [self.step_values[label] for label in labels]
            keys = cache_keys([listed.completion])
        return Score(
            value=aggregate_steps(steps, self.aggregate),
            steps=steps,
            breakdown={label: float(labels.count(label)) for label in self.step_labels.labels},
            usage=usage,
            details={
                "segments": [list(span) for span in spans],
                "labels": labels,
                "aggregate": self.aggregate,
                "cache_keys": keys,
            },
        )

    def _expected_value(self, judgement: Judgement) -> float:
        distribution = judgement.distribution(self.step_labels)
        return sum(self.step_values[label] * p for label, p in distribution.items())

    def _add_step_advantages(
        self, samples: Sequence[Sample], tasks: list[_Task], scores: list[Score | None]
    ) -> None:
        groups: dict[Any, list[int]] = defaultdict(list)
        for task in tasks:
            score = scores[task.index]
            if score is not None and score.ok and score.steps:
                groups[samples[task.index].group_key(self.group_field)].append(task.index)
        for members in groups.values():
            if len(members) < 2:
                continue
            advantages = process_advantages([scores[i].steps for i in members])  # type: ignore[union-attr,misc]
            for index, values in zip(members, advantages, strict=True):
                scores[index].details["step_advantages"] = [round(v, 6) for v in values]  # type: ignore[union-attr]
