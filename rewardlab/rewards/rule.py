"""`RuleReward`: a reward computed by a cheap check of each sample on its own.

What every rule reward shares, so that each one only writes its check:

- **Failures are per sample.** An `InvalidInput` raised by ``check`` becomes status
  ``invalid_input``; any other exception becomes status ``error`` with the exception as the reason.
- **An answer region** (`answer_region`): rewards that read the model's answer read the same part
  of the completion, with reasoning blocks left out (see `rewardlab.rewards.answer_region`).
- **A budget per sample** (`execution`, `sample_budget_s`): built-in rule rewards check samples in
  killable worker processes (see `rewardlab.rewards.sample_workers`), so that no completion can stall
  the caller. A subclass of your own runs inline unless it sets ``execution = "worker"``, which
  needs it to pickle.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from rewardlab.errors import InvalidInput
from rewardlab.rewards.answer_region import DEFAULT_REGION, AnswerRegion, Region
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.process_pool import preload_in_workers
from rewardlab.rewards.sample_workers import (
    DEFAULT_SAMPLE_BUDGET_S,
    Execution,
    checked_execution,
    run_per_sample,
)


def reference_answers(sample: Sample, references_field: str | None, *, reward: str, noun: str) -> list[str]:
    """The answers ``sample`` is compared against: ``sample.reference``, then the strings listed
    in ``sample.fields[references_field]`` when that option is set (SQuAD and TriviaQA rows carry
    several acceptable answers). One reader for every reward with a ``references_field`` option,
    so that they accept the same rows and refuse the rest with the same `InvalidInput`.

    Args:
        sample: The sample being scored.
        references_field: The `Sample.fields` key listing more answers, or None for
            ``sample.reference`` alone.
        reward: The reward's name, for the error when there is no answer at all.
        noun: What the answers are to that reward (``"gold answer"``, ``"reference answer"``).
    """
    references = [] if sample.reference is None else [sample.reference]
    if references_field is None:
        if not references:
            raise InvalidInput("reference", f"{reward} needs a {noun} in sample.reference")
        return references
    key = f"fields.{references_field}"
    if references_field not in sample.fields:
        raise InvalidInput(key, f"missing; it should list the {noun}s")
    listed = sample.fields[references_field]
    if isinstance(listed, str) or not isinstance(listed, Sequence):
        raise InvalidInput(key, f"must be a list of strings, got {type(listed).__name__}")
    if not all(isinstance(item, str) for item in listed):
        raise InvalidInput(key, "must be a list of strings")
    references.extend(listed)
    if not references:
        raise InvalidInput(key, f"is empty and sample.reference is not set: no {noun}")
    return references


def check_one(reward: RuleReward, item: tuple[int, Sample]) -> Score:
    """``reward.check`` of one sample, with exceptions turned into failed scores naming it."""
    index, sample = item
    try:
        return reward.check(sample)
    except InvalidInput as error:
        return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
    except Exception as error:  # noqa: BLE001 - a reward bug must not sink the batch
        return Score.failure(Status.ERROR, f"{sample.label(index)}: {type(error).__name__}: {error}")


class RuleReward(Reward):
    """A reward computed by a cheap per-sample check (see the module docstring).

    Subclasses implement `check`; built-in ones call `configure_rule` from their constructor.
    """

    execution: Execution = "inline"
    sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S
    answer_region: AnswerRegion = DEFAULT_REGION

    def configure_rule(
        self,
        *,
        answer_region: Any = None,
        execution: str = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
    ) -> None:
        """Set the shared rule options, checked (ValueError on a bad value).

        Args:
            answer_region: Where the answer is read (`AnswerRegion.from_option`: ``"default"``,
                ``"whole"``, or a mapping of markers).
            execution: ``"worker"`` (a killable worker per sample batch) or ``"inline"``.
            sample_budget_s: Wall-clock budget of one sample's check in a worker; past it the
                sample gets status ``timeout``.
        """
        self.answer_region = AnswerRegion.from_option(answer_region)
        self.execution = checked_execution(execution, sample_budget_s)
        if self.execution == "worker":
            preload_in_workers(type(self).__module__)
        self.sample_budget_s = float(sample_budget_s)
        # Checks in other processes are waited on: the TRL adapter then runs the reward as an
        # async function, beside the trainer's other async rewards.
        self.io_bound = self.execution == "worker"

    @abc.abstractmethod
    def check(self, sample: Sample) -> Score:
        """Score one sample."""

    def answer(self, sample: Sample) -> Region:
        """The sample's answer region (its text is None when the completion holds no answer)."""
        return self.answer_region.read(sample.completion_text)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await run_per_sample(
            check_one, self, samples, execution=self.execution, budget_s=self.sample_budget_s
        )
