"""Feeding online elicitation: `StepCollector` gathers what a `RubricReward` scored during a
training step, grouped by prompt; `replay` runs elicitation over saved rollouts step by step, the
way a training run would (and the way the tests and ``rewardlab elicit`` do it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from rewardlab.errors import InputError
from rewardlab.judges.judge import completion_for_judge, prompt_for_judge
from rewardlab.rewards.contract import Sample, Score, run_sync
from rewardlab.rubrics.elicit import PromptRollouts, RubricElicitor, StepReport
from rewardlab.rubrics.grading import RubricReward
from rewardlab.rubrics.model import Rubric


class StepCollector:
    """Records every batch ``reward`` scores until `drain` is called.

    Args:
        reward: The rubric reward to watch.
        reference_field: The field holding a reference (control) policy's response; samples
            without it use their reference answer.
    """

    def __init__(self, reward: RubricReward, reference_field: str = "reference_response"):
        self.reward = reward
        self.reference_field = reference_field
        self._prompts: dict[str, PromptRollouts] = {}
        reward.observe(self.record)

    def close(self) -> None:
        """Stop recording."""
        self.reward.unobserve(self.record)

    def record(self, samples: Sequence[Sample], scores: list[Score], rubrics: Mapping[int, Rubric]) -> None:
        for index, (sample, score) in enumerate(zip(samples, scores, strict=True)):
            if index not in rubrics or not score.ok:
                continue
            prompt = prompt_for_judge(sample)
            prompt_id = self.reward.prompt_id(sample, prompt)
            rollouts = self._prompts.setdefault(prompt_id, PromptRollouts(prompt_id, prompt, [], []))
            rollouts.policy.append(completion_for_judge(sample))
            reference = sample.fields.get(self.reference_field, sample.reference)
            if isinstance(reference, str) and reference.strip() and reference not in rollouts.reference:
                rollouts.reference.append(reference)
            for criterion in rubrics[index].criteria:
                if criterion.id in score.breakdown:
                    rollouts.verdicts.setdefault(criterion.id, []).append(score.breakdown[criterion.id])
            rollouts.base = rubrics[index]

    def drain(self) -> list[PromptRollouts]:
        """Everything recorded since the last drain, by prompt."""
        prompts, self._prompts = list(self._prompts.values()), {}
        return prompts


def merge_rollouts(collected: Iterable[Sequence[PromptRollouts]]) -> list[PromptRollouts]:
    """One `PromptRollouts` per prompt from several collectors' (the ranks of a distributed run,
    each of which saw part of every prompt's group)."""
    merged: dict[str, PromptRollouts] = {}
    for prompts in collected:
        for rollouts in prompts:
            into = merged.setdefault(
                rollouts.prompt_id,
                PromptRollouts(rollouts.prompt_id, rollouts.prompt, [], [], base=rollouts.base),
            )
            into.policy.extend(rollouts.policy)
            into.reference.extend(r for r in rollouts.reference if r not in into.reference)
            for criterion_id, values in rollouts.verdicts.items():
                into.verdicts.setdefault(criterion_id, []).extend(values)
    return list(merged.values())


@dataclass(slots=True)
class ReplayStep:
    """One replayed step: the scores the rubrics in force gave, and the elicitation after it."""

    step: int
    scores: list[Score]
    report: StepReport


def replay(
    reward: RubricReward, elicitor: RubricElicitor, rows: Iterable[Mapping[str, Any]]
) -> list[ReplayStep]:
    """Score saved rollouts step by step with ``reward`` (which reads the live store) and elicit
    after each step. Rows need ``step``, ``prompt`` and ``completion``; ``prompt_id``,
    ``reference_response`` and ``reference`` are used when present."""
    collector = StepCollector(reward)
    try:
        return _replay_steps(reward, elicitor, collector, rows)
    finally:
        collector.close()


def _replay_steps(
    reward: RubricReward,
    elicitor: RubricElicitor,
    collector: StepCollector,
    rows: Iterable[Mapping[str, Any]],
) -> list[ReplayStep]:
    ordered = sorted(rows, key=lambda row: int(row["step"]))
    steps = []
    for step, group in groupby(ordered, key=lambda row: int(row["step"])):
        samples = [
            Sample(
                prompt=row["prompt"],
                completion=row["completion"],
                reference=row.get("reference"),
                id=str(row.get("id", f"step{step}-{position}")),
                fields=dict(row),
            )
            for position, row in enumerate(group)
        ]
        scores = reward.score(samples)
        report = run_sync(elicitor.step(step, collector.drain()))
        steps.append(ReplayStep(step, scores, report))
    return steps


def read_step_rows(path: Path) -> list[dict[str, Any]]:
    """Saved rollouts for `replay` from a JSONL file; a row that cannot be used is an
    `InputError` naming its line and field (a replay with a hole in it would mislead)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from error
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not JSON: {error.msg}") from error
        if not isinstance(row, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        for name in ("step", "prompt", "completion"):
            if row.get(name) is None:
                raise InputError(f"{path}:{number}: {name}: missing (rows need step, prompt and completion)")
        if isinstance(row["step"], bool) or not isinstance(row["step"], int):
            raise InputError(f"{path}:{number}: step: expected an integer, got {row['step']!r}")
        rows.append(row)
    return rows


def step_record(step: ReplayStep) -> dict[str, Any]:
    """One replayed step as a JSON-ready record (what ``rewardlab elicit --output`` writes)."""
    values = [score.value for score in step.scores if score.value is not None]  # the ok ones
    return {
        "step": step.step,
        "samples": len(step.scores),
        "scored": len(values),
        "mean_reward": sum(values) / len(values) if values else None,
        "versions": step.report.versions,
        "changes": {
            prompt_id: [
                {
                    "action": change.action,
                    "criterion_id": change.criterion_id or getattr(change.criterion, "id", None),
                    "text": change.criterion.text if change.criterion is not None else None,
                    "reason": change.reason,
                }
                for change in changes
            ]
            for prompt_id, changes in step.report.changes.items()
        },
        "failures": step.report.failures,
    }
