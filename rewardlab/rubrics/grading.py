"""`RubricReward`: a response graded against a rubric by an LLM judge.

Where a sample's rubric comes from, in order: the `RubricStore` at ``store``, by the sample's
prompt id (the live rubrics of online elicitation, which must win over the data they started
from); its ``fields[rubric_field]`` (a dataset column); the ``rubric`` given in the config; or,
with ``generate``, a rubric the judge writes from the sample's reference or from the task (once
per prompt). A sample with none of these is ``invalid_input``. The grader sees the prompt, the
response and the rubric - not the reference, unless ``use_reference`` (a rubric written from a
hidden reference is there so that the grader need not see it).

Three ways to grade, a choice between cost and accuracy:

- ``per_criterion``: one judge call per criterion - the most accurate, N calls;
- ``one_call``: every criterion in one call - one call, but a long answer to parse;
- ``holistic``: the judge sees the whole rubric and gives one Likert grade (the implicit
  aggregation of Rubrics-as-Rewards).

Per-criterion verdicts (the judge's probability of "yes" where it gives log-probabilities; a
choice's value for ordinal criteria) fold into one value by ``aggregate`` (see `aggregate.py`);
``Score.breakdown`` holds each criterion's verdict under its id (so the TRL adapter logs
``<name>/<criterion id>``), or each category's mean verdict (``breakdown_by: category``), and
``details`` each criterion's text, weight and verdict.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, InstanceOf, model_validator
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import RubricError, VerdictError
from rewardlab.judges.judge import (
    Judge,
    Judgement,
    JudgeOptions,
    cache_keys,
    expected_label,
    graded_score,
    scored,
)
from rewardlab.judges.verdicts import LabelSet, read_label_list
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.details import clipped
from rewardlab.rewards.options import OptionError, PathOption, Scale, takes_options
from rewardlab.rubrics.aggregate import Aggregation, aggregate
from rewardlab.rubrics.generate import Source, generate_criteria
from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.rubrics.store import RubricStore, prompt_key

Mode = Literal["per_criterion", "one_call", "holistic"]
TEMPLATES = {
    "per_criterion": "rubric_criterion.jinja",
    "one_call": "rubric_all.jinja",
    "holistic": "rubric_holistic.jinja",
}
YES_NO = LabelSet(["yes", "no"])


def criterion_labels(criterion: Criterion) -> LabelSet:
    """The answers a judge may give for ``criterion``: its choices, or yes / no."""
    if criterion.choices is None:
        return YES_NO
    return LabelSet([choice.label for choice in criterion.choices])


def satisfaction(criterion: Criterion, distribution: Mapping[str, float], fully: bool = False) -> float:
    """How far ``criterion`` is met, from the judge's distribution over its labels: the
    probability of "yes", or an ordinal criterion's expected choice value - or, with ``fully``
    (all-or-nothing grading), the probability of a choice worth the whole criterion."""
    if criterion.choices is None:
        met = distribution["yes"]
    elif fully:
        met = sum(p for label, p in distribution.items() if criterion.choice(label).value >= 1.0)
    else:
        met = sum(criterion.choice(label).value * p for label, p in distribution.items())
    return min(1.0, max(0.0, met))  # float round-off must not push a probability out of [0, 1]


def _rubric(value: Any) -> Rubric | None:
    return None if value is None else _rubric_from_config(value)


class RubricOptions(JudgeOptions):
    """Options of `RubricReward`."""

    rubric: Annotated[
        str | list[dict[str, Any]] | dict[str, Any] | SkipJsonSchema[InstanceOf[Rubric]] | None,
        AfterValidator(_rubric),
    ] = None
    """A rubric for every sample: a list of criteria (``{text, weight, category, id,
    choices}``), ``{criteria: [...]}``, or a JSON/YAML file holding one."""
    rubric_field: str = "rubric"
    """The `Sample.fields` key that may hold a sample's own rubric."""
    store: PathOption | SkipJsonSchema[InstanceOf[RubricStore]] | None = None
    """A `RubricStore` file to look rubrics up in by prompt id (the live rubrics of online
    elicitation)."""
    prompt_id_field: str = "prompt_id"
    """The `Sample.fields` key holding a sample's prompt id; without it, a hash of the
    prompt."""
    generate: Source | None = None
    """``reference`` or ``task``: write a rubric when a sample has none, from its reference or
    from the task."""
    task_description_field: str = "task_description"
    """The `Sample.fields` key describing the task, for ``generate: task``."""
    min_criteria: int = Field(default=3, ge=1)
    """Fewest criteria of a generated rubric."""
    max_criteria: int = Field(default=12, ge=1)
    """Most criteria of a generated rubric."""
    mode: Mode = "per_criterion"
    """``per_criterion`` (one call per criterion, the most accurate), ``one_call`` (every
    criterion in one call) or ``holistic`` (one Likert grade for the whole rubric)."""
    aggregate: Aggregation = "points"
    """How criterion verdicts fold into the value: ``points`` (HealthBench), ``weighted_sum``,
    ``all_or_nothing`` (RIFL) or ``fraction`` (Compute-as-Teacher); see `aggregate.py`."""
    scale: Scale = (1, 10)
    """``[low, high]`` of the holistic grade."""
    breakdown_by: Literal["criterion", "category"] = "criterion"
    """``criterion``: each criterion's verdict under its id (logged by the TRL adapter as
    ``rubric/<id>``); ``category``: the mean verdict of each category (a bounded set of metrics
    when every prompt has its own rubric)."""
    use_reference: bool = False
    """Show the grader the sample's reference answer, when it has one (off: rubric graders see
    the prompt, the response and the rubric)."""

    @model_validator(mode="after")
    def _consistent(self) -> RubricOptions:
        if self.min_criteria > self.max_criteria:
            raise OptionError("max_criteria", f"should be at least min_criteria={self.min_criteria}")
        rubric = self.rubric
        if isinstance(rubric, Rubric) and self.mode != "holistic" and self.aggregate == "points":
            try:
                aggregate(rubric, [0.0] * len(rubric.criteria), "points")
            except RubricError as error:
                raise OptionError("rubric", str(error)) from None
        return self


@takes_options(RubricOptions)
class RubricReward(Judge):
    """Grades each completion against its rubric (see the module docstring).

    Options: `RubricOptions` (where rubrics come from, how criteria are asked about and how
    their verdicts fold), and the backend, client, template and verdict options every judge
    shares (`JudgeOptions`).
    """

    name = "rubric"
    template_package = "rewardlab.rubrics"

    def __init__(
        self,
        *,
        rubric: Rubric | str | Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        rubric_field: str = "rubric",
        store: str | Path | RubricStore | None = None,
        prompt_id_field: str = "prompt_id",
        generate: Source | None = None,
        task_description_field: str = "task_description",
        min_criteria: int = 3,
        max_criteria: int = 12,
        mode: Mode = "per_criterion",
        aggregate: Aggregation = "points",
        scale: Sequence[int] = (1, 10),
        breakdown_by: Literal["criterion", "category"] = "criterion",
        use_reference: bool = False,
        **options: Any,
    ):
        self.default_template = TEMPLATES[mode]
        super().__init__(**options)
        self.rubric = None if rubric is None else _rubric_from_config(rubric)
        self.rubric_field = rubric_field
        self.store = RubricStore(store) if isinstance(store, str | Path) else store
        self.prompt_id_field = prompt_id_field
        self.generate = generate
        self.task_description_field = task_description_field
        self.min_criteria = min_criteria
        self.max_criteria = max_criteria
        self.mode = mode
        self.aggregate = aggregate
        self.low, self.high = scale
        self.holistic_labels = LabelSet([str(x) for x in range(self.low, self.high + 1)])
        self.check_labels(self.holistic_labels if mode == "holistic" else YES_NO)
        for criterion in self.rubric.criteria if self.rubric is not None else ():
            self.check_labels(criterion_labels(criterion))
        self.breakdown_by = breakdown_by
        self.use_reference = use_reference
        self._generated: dict[str, tuple[Rubric, Usage]] = {}
        self._observers: list[Callable[[Sequence[Sample], list[Score], dict[int, Rubric]], None]] = []

    def observe(self, observer: Callable[[Sequence[Sample], list[Score], dict[int, Rubric]], None]) -> None:
        """Call ``observer(samples, scores, rubrics)`` after every batch (online elicitation
        collects the step's rollouts and verdicts this way); ``rubrics`` maps a sample's index to
        the rubric it was graded with."""
        self._observers.append(observer)

    def unobserve(self, observer: Callable[[Sequence[Sample], list[Score], dict[int, Rubric]], None]) -> None:
        """Stop calling ``observer``."""
        self._observers.remove(observer)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_observers": []}  # observers belong to this process's trainer

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        texts = self.readable(samples, scores, minimum=0.0)
        rubrics = await self._rubrics(samples, texts, scores)
        graded = await asyncio.gather(
            *(self._grade(samples[i], i, texts[i], *rubrics[i]) for i in texts if scores[i] is None)
        )
        for index, score in zip([i for i in texts if scores[i] is None], graded, strict=True):
            scores[index] = score
        result = scored(scores)
        used = {index: rubric for index, (rubric, _) in rubrics.items()}
        for observer in self._observers:
            observer(samples, result, used)
        return result

    def prompt_id(self, sample: Sample, prompt: str) -> str:
        """The id a sample's prompt has in the store: its field, or a hash of the prompt."""
        value = sample.fields.get(self.prompt_id_field)
        return str(value) if value is not None else prompt_key(prompt)

    async def _rubrics(
        self, samples: Sequence[Sample], texts: dict[int, tuple[str, str]], scores: list[Score | None]
    ) -> dict[int, tuple[Rubric, Usage]]:
        """Each sample's rubric and what finding it cost; failures go straight into ``scores``."""
        found: dict[int, tuple[Rubric, Usage]] = {}
        to_generate: dict[str, list[int]] = defaultdict(list)
        for index, (prompt, _) in texts.items():
            sample = samples[index]
            try:
                rubric = self._known_rubric(sample, prompt)
            except RubricError as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
                continue
            except sqlite3.Error as error:
                reason = f"{sample.label(index)}: rubric store {self.store.path}: {error}"  # type: ignore[union-attr]
                scores[index] = Score.failure(Status.BACKEND_ERROR, reason)
                continue
            if rubric is not None:
                found[index] = (rubric, Usage())
            elif self.generate is not None:
                to_generate[self._generation_key(sample, prompt)].append(index)
            else:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT,
                    f"{sample.label(index)}: {self.rubric_field}: no rubric for this sample (not in "
                    "the field, the store or the config, and generate is off)",
                )
        results = await asyncio.gather(
            *(self._generated_rubric(samples, texts, group) for group in to_generate.values())
        )
        for group, result in zip(to_generate.values(), results, strict=True):
            for position, index in enumerate(group):
                if isinstance(result, Score):
                    failure = Score.failure(result.status, f"{samples[index].label(index)}: {result.reason}")
                    failure.details = dict(result.details)
                    failure.usage = result.usage if position == 0 else Usage()
                    scores[index] = failure
                else:
                    rubric, usage = result
                    # One generation serves the prompt's samples: charged to the first.
                    found[index] = (
                        rubric,
                        usage if position == 0 else Usage(calls=usage.calls, cached_calls=usage.calls),
                    )
        return found

    def _known_rubric(self, sample: Sample, prompt: str) -> Rubric | None:
        if self.store is not None:
            stored = self.store.rubric(self.prompt_id(sample, prompt))
            if stored is not None:
                return stored
        own = sample.fields.get(self.rubric_field)
        if own is not None:
            return Rubric.from_data(own, where=f"fields.{self.rubric_field}")
        return self.rubric

    def _generation_key(self, sample: Sample, prompt: str) -> str:
        reference = (
            sample.reference
            if self.generate == "reference"
            else sample.fields.get(self.task_description_field)
        )
        return hashlib.sha256(f"{self.generate}\0{prompt}\0{reference}".encode()).hexdigest()

    async def _generated_rubric(
        self, samples: Sequence[Sample], texts: dict[int, tuple[str, str]], group: list[int]
    ) -> tuple[Rubric, Usage] | Score:
        index = group[0]
        sample, prompt = samples[index], texts[index][0]
        key = self._generation_key(sample, prompt)
        if key in self._generated:
            rubric, usage = self._generated[key]
            return rubric, Usage(calls=usage.calls, cached_calls=usage.calls)  # written earlier
        if self.generate == "reference" and not sample.reference:
            return Score.failure(
                Status.INVALID_INPUT, "reference: generating a rubric from the reference needs one"
            )
        listed = await generate_criteria(
            self,
            self.generate or "task",
            prompt=prompt,
            reference=sample.reference,
            task_description=sample.fields.get(self.task_description_field),
            min_criteria=self.min_criteria,
            max_criteria=self.max_criteria,
        )
        if not listed.ok:
            return listed.failure("rubric generation")
        rubric = Rubric(
            tuple(listed.values or ()),
            id=self.prompt_id(sample, prompt),
            metadata={"source": f"generated:{self.generate}"},
        )
        self._generated[key] = (rubric, listed.completion.usage)
        return rubric, listed.completion.usage

    async def _grade(
        self, sample: Sample, index: int, texts: tuple[str, str], rubric: Rubric, found_usage: Usage
    ) -> Score:
        who = sample.label(index)
        if self.mode != "holistic" and self.aggregate == "points" and rubric.positive_weight <= 0:
            # Checked before any call: the verdicts could not be folded into a value anyway.
            reason = f"{who}: rubric {rubric.id}: the points rule needs at least one positive criterion"
            return Score.failure(Status.INVALID_INPUT, reason, usage=found_usage)
        prompt, completion = texts
        values = {
            "prompt": prompt,
            "completion": completion,
            "reference": sample.reference if self.use_reference else None,
            "low": self.low,
            "high": self.high,
        }
        if self.mode == "holistic":
            score = await self._holistic(values, rubric, who)
        elif self.mode == "one_call":
            score = await self._one_call(values, rubric, who)
        else:
            score = await self._per_criterion(values, rubric, who)
        score.usage = found_usage + (score.usage or Usage())
        score.details.update(rubric_id=rubric.id, rubric_version=rubric.version, mode=self.mode)
        return score

    async def _holistic(self, values: dict[str, Any], rubric: Rubric, who: str) -> Score:
        criteria = [{"text": c.text, "weight": c.weight} for c in rubric.criteria]
        judgement = await self.ask(
            {**values, "criteria": criteria}, self.holistic_labels, "score", scale_max=self.high
        )
        if not judgement.ok:
            return judgement.failure(who)
        raw = expected_label(judgement.distribution(self.holistic_labels))
        return graded_score(judgement, raw, self.low, self.high, normalize=True)

    async def _per_criterion(self, values: dict[str, Any], rubric: Rubric, who: str) -> Score:
        questions = [
            (
                {
                    **values,
                    "criterion": c.text,
                    "pitfall": c.is_pitfall,
                    "labels": criterion_labels(c).labels,
                },
                criterion_labels(c),
            )
            for c in rubric.criteria
        ]
        judgements, usage, failure = await self.ask_each(
            questions, "verdict", lambda k: f"{who} criterion {rubric.criteria[k].id}"
        )
        if failure is not None:
            return failure
        met = [
            satisfaction(c, j.distribution(criterion_labels(c)), self.aggregate == "all_or_nothing")
            for c, j in zip(rubric.criteria, judgements, strict=True)
        ]
        labels = [j.verdict.label for j in judgements]  # type: ignore[union-attr]
        keys = cache_keys([j.completion for j in judgements])
        return self._aggregated(rubric, met, labels, usage, who, keys=keys, judgements=judgements)

    async def _one_call(self, values: dict[str, Any], rubric: Rubric, who: str) -> Score:
        criteria = [{"text": c.text, "labels": criterion_labels(c).labels} for c in rubric.criteria]

        def read(text: str, fences: Any) -> list[str]:
            raw = read_label_list(
                text, LabelSet(_all_labels(rubric)), "verdicts", len(rubric.criteria), fences=fences
            )
            labels = []
            for position, (criterion, label) in enumerate(zip(rubric.criteria, raw, strict=True), start=1):
                canonical = criterion_labels(criterion).canonical(label)
                if canonical is None:
                    raise VerdictError(
                        f"verdict {position} (criterion {criterion.id}) is {label!r}, not "
                        f"{criterion_labels(criterion).describe()}"
                    )
                labels.append(canonical)
            return labels

        listed = await self.ask_list({**values, "criteria": criteria}, read)
        if not listed.ok:
            return listed.failure(who)
        labels = listed.values or []
        met = [
            satisfaction(
                c,
                {label: float(label == chosen) for label in criterion_labels(c).labels},
                self.aggregate == "all_or_nothing",
            )
            for c, chosen in zip(rubric.criteria, labels, strict=True)
        ]
        keys = cache_keys([listed.completion])
        return self._aggregated(rubric, met, labels, listed.completion.usage, who, keys=keys)

    def _aggregated(
        self,
        rubric: Rubric,
        met: list[float],
        labels: list[str],
        usage: Usage,
        who: str,
        *,
        keys: list[str],
        judgements: list[Judgement] | None = None,
    ) -> Score:
        try:
            value = aggregate(rubric, met, self.aggregate)
        except RubricError as error:
            return Score.failure(Status.INVALID_INPUT, f"{who}: rubric {rubric.id}: {error}", usage=usage)
        listed = []
        for position, (criterion, s, label) in enumerate(zip(rubric.criteria, met, labels, strict=True)):
            entry: dict[str, Any] = {
                "id": criterion.id,
                "text": clipped(criterion.text, 300),
                "weight": criterion.weight,
                "met": round(s, 6),
                "verdict": label,
            }
            verdict = None if judgements is None else judgements[position].verdict
            if judgements is not None and verdict is not None and verdict.source != "bare":
                entry["reason"] = clipped(judgements[position].answer, 1000)
            listed.append(entry)
        return Score(
            value=value,
            breakdown=self._breakdown(rubric, met),
            usage=usage,
            details={"criteria": listed, "aggregate": self.aggregate, "cache_keys": keys},
        )

    def _breakdown(self, rubric: Rubric, met: list[float]) -> dict[str, float]:
        if self.breakdown_by == "criterion":
            return {criterion.id: s for criterion, s in zip(rubric.criteria, met, strict=True)}
        by_category: dict[str, list[float]] = defaultdict(list)
        for criterion, s in zip(rubric.criteria, met, strict=True):
            by_category[criterion.category or "uncategorized"].append(s)
        return {category: sum(values) / len(values) for category, values in by_category.items()}

    def close(self) -> None:
        super().close()
        if self.store is not None:
            self.store.close()


def _all_labels(rubric: Rubric) -> list[str]:
    labels: list[str] = []
    seen: set[str] = set()
    for criterion in rubric.criteria:
        for label in criterion_labels(criterion).labels:
            if label.lower() not in seen:
                seen.add(label.lower())
                labels.append(label)
    return labels


def _rubric_from_config(value: Any) -> Rubric:
    if isinstance(value, Rubric):
        return value
    if isinstance(value, str | Path) and not str(value).lstrip().startswith(("[", "{")):
        return Rubric.load(value)
    return Rubric.from_data(value, where="rubric")
