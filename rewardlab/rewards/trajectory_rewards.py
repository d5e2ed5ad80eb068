"""Rewards over agent trajectories (`rewardlab.rewards.trajectory`): outcome checks on the final
state, and any reward applied turn by turn.

- ``final_answer``: any reward applied to the last assistant message's text - an outcome check
  ("is the final answer right?") for a rollout whose earlier turns are tool calls and results a
  math or string check would otherwise read as part of the answer.
- ``environment_state``: the environment's final state (a JSON view in
  ``fields["environment_state"]``, which the TRL adapter fills from TRL's ``environments``)
  against an expected state in another field - the outcome check of tool-use benchmarks that
  grade what an agent did, not what it said (tau-bench compares the database after the episode
  with the one the gold actions produce).
- ``per_turn``: any reward (a rubric, a pointwise judge, a rule) applied to each assistant turn
  given the history before it; `Score.steps` has one value per turn and ``aggregate`` folds them.
  This is turn-level credit as in TARL (Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in
  LLM Agents via Turn-Level Credit Assignment", arXiv:2505.11821, code
  github.com/SiliangZeng/Multi-Turn-RL-Agent: a turn-level reward per tool-use turn beside the
  outcome reward) and SCRIBE (Jiang and Ferraro 2026, arXiv:2601.03555: each intermediate step
  judged against a structured rubric rather than the whole trajectory at once). Judging turns
  one by one asks N questions; for one call over all turns, see ``turn_judge`` (rewardlab.prm).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import InvalidInput
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.options import RewardOptions, RewardSpec, takes_options
from rewardlab.rewards.registry import built
from rewardlab.rewards.steps import Aggregate, aggregate_steps
from rewardlab.rewards.trajectory import ENVIRONMENT_STATE_FIELD, history_text, read_trajectories, turn_text


class FinalAnswerOptions(RewardOptions):
    """Options of `FinalAnswerReward`."""

    reward: RewardSpec
    """The reward applied to the final answer: a config or, from Python, a `Reward`."""


@takes_options(FinalAnswerOptions)
class FinalAnswerReward(Reward):
    """The wrapped reward, on the last assistant message's text of a trajectory.

    Everything but the completion is passed on as it is (prompt, reference, id, fields). A last
    message that only calls tools (a rollout cut off mid-task) has an empty answer, which the
    wrapped reward scores as such: a policy must not escape an outcome check by never answering.
    The score is the wrapped reward's, with ``details.final_answer`` and ``details.turns`` added.

    Example:
        >>> from rewardlab import Sample
        >>> reward = FinalAnswerReward({"type": "string_match"})
        >>> calls = [{"type": "function", "function": {"name": "capital", "arguments": {"of": "France"}}}]
        >>> rollout = [
        ...     {"role": "assistant", "content": "", "tool_calls": calls},
        ...     {"role": "tool", "name": "capital", "content": "Paris"},
        ...     {"role": "assistant", "content": "Paris"},
        ... ]
        >>> reward.score([Sample(completion=rollout, reference="paris")])[0].value
        1.0
    """

    name = "final_answer"

    def __init__(self, reward: Reward | Mapping[str, Any], *, name: str | None = None):
        self.reward = built(reward, "reward")
        if name is not None:
            self.name = name
        self.io_bound = self.reward.io_bound
        self.uses_gpu = self.reward.uses_gpu
        self.scores_groups = self.reward.scores_groups
        self.scores_batches = self.reward.scores_batches

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores, readable = read_trajectories(samples)
        answers = [
            replace(samples[index], completion=trajectory.final_answer) for index, trajectory in readable
        ]
        for (index, trajectory), score in zip(
            readable, await scores_or_failures(self.reward, answers), strict=True
        ):
            score.details = {
                **score.details,
                "final_answer": trajectory.final_answer,
                "turns": len(trajectory.turns),
            }
            scores[index] = score
        return scores  # type: ignore[return-value]  # every index is set above

    def close(self) -> None:
        self.reward.close()


class EnvironmentStateOptions(RewardOptions):
    """Options of `EnvironmentStateReward`."""

    expected_field: str = "expected_state"
    """The `Sample.fields` key holding the expected state: a mapping, or its JSON text."""
    state_field: str = ENVIRONMENT_STATE_FIELD
    """The `Sample.fields` key holding the final state: a mapping, or its JSON text (the TRL
    adapter puts each rollout's environment there)."""
    match: Literal["subset", "exact"] = "subset"
    """``subset``: every key of the expected state must have its value in the final state (other
    keys are not checked); ``exact``: the final state must also have no other keys."""
    partial: bool = False
    """False: 1.0 when every checked key matches, else 0.0. True: the fraction of checked keys
    that match (an unexpected key counts as a checked key that does not)."""


@takes_options(EnvironmentStateOptions)
class EnvironmentStateReward(Reward):
    """The environment's final state against an expected state, key by key.

    Values compare as JSON values, by type: ``1`` equals ``1.0``, but ``True`` is not ``1`` and
    ``"1"`` is not ``1``; lists compare in order, mappings by their keys. ``details.mismatches``
    lists each key that differs with its expected and actual value (``missing`` for a key the
    state lacks, ``unexpected`` for an extra key under ``match: exact``); ``details.checked`` and
    ``details.matched`` count keys. A sample without either state is ``invalid_input`` naming the
    field; a state that is not a mapping too.

    Example:
        >>> from rewardlab import Sample
        >>> reward = EnvironmentStateReward(partial=True)
        >>> sample = Sample(fields={"environment_state": {"lamp": True, "door": "open"},
        ...                         "expected_state": {"lamp": True, "door": "closed"}})
        >>> reward.score([sample])[0].value
        0.5
    """

    name = "environment_state"

    def __init__(
        self,
        *,
        expected_field: str = "expected_state",
        state_field: str = ENVIRONMENT_STATE_FIELD,
        match: Literal["subset", "exact"] = "subset",
        partial: bool = False,
        name: str | None = None,
    ):
        self.expected_field = expected_field
        self.state_field = state_field
        self.match = match
        self.partial = partial
        if name is not None:
            self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores = []
        for index, sample in enumerate(samples):
            try:
                scores.append(self._check(sample))
            except InvalidInput as error:
                scores.append(Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}"))
        return scores

    def _check(self, sample: Sample) -> Score:
        expected = _state(sample.fields, self.expected_field)
        actual = _state(sample.fields, self.state_field)
        mismatches = []
        for key, value in expected.items():
            if key not in actual:
                mismatches.append({"key": key, "expected": value, "missing": True})
            elif not same_json(value, actual[key]):
                mismatches.append({"key": key, "expected": value, "actual": actual[key]})
        checked = len(expected)
        if self.match == "exact":
            extra = [key for key in actual if key not in expected]
            mismatches += [{"key": key, "actual": actual[key], "unexpected": True} for key in extra]
            checked += len(extra)
        matched = checked - len(mismatches)
        value = (matched / checked if checked else 1.0) if self.partial else float(not mismatches)
        reason = None
        if mismatches:
            keys = ", ".join(repr(m["key"]) for m in mismatches[:5])
            reason = f"{len(mismatches)} of {checked} state keys differ from the expected state: {keys}"
        return Score(
            value=value,
            reason=reason,
            details={"mismatches": mismatches, "checked": checked, "matched": matched},
        )


def _state(fields: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    state = fields.get(field)
    if state is None:
        raise InvalidInput(field, "is missing: the sample has no such field")
    if isinstance(state, str):
        try:
            state = json.loads(state)
        except ValueError as error:  # not JSON, or a number too long to convert
            raise InvalidInput(field, f"is text but not JSON: {error}") from None
        except RecursionError:
            raise InvalidInput(field, "is JSON nested too deeply to read") from None
    if not isinstance(state, Mapping):
        raise InvalidInput(field, f"must be a mapping of state keys to values, got {type(state).__name__}")
    return state


def same_json(expected: Any, actual: Any) -> bool:
    """Whether two JSON values are equal, by type: numbers by value (``1 == 1.0``), but a bool
    is not a number and text is not a number; lists in order, mappings by key."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return expected.keys() == actual.keys() and all(same_json(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, Sequence) and not isinstance(expected, str):
        return (
            isinstance(actual, Sequence)
            and not isinstance(actual, str)
            and len(expected) == len(actual)
            and all(same_json(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return type(expected) is type(actual) and expected == actual


class PerTurnOptions(RewardOptions):
    """Options of `PerTurnReward`."""

    reward: RewardSpec
    """The reward applied to each assistant turn (a rubric, a pointwise judge, a rule): a config
    or, from Python, a `Reward`."""
    aggregate: Aggregate = "mean"
    """How the turns' values fold into the value (`rewardlab.rewards.steps`): ``mean`` credits
    every turn alike, ``min`` says "as good as the worst turn", ``last`` trusts the last."""
    observations: bool = True
    """Show each turn's tool results (and user replies) with it: the consequence of its action."""
    max_turns: int | None = Field(default=None, ge=1)
    """Score at most this many turns (the last ones), so a long rollout cannot cost unbounded
    judge calls; the earlier turns stay in the history."""


@takes_options(PerTurnOptions)
class PerTurnReward(Reward):
    """The wrapped reward on each assistant turn of a trajectory (see the module docstring).

    Turn k is scored as a sample whose prompt is the task and the turns before it, as a
    transcript (`history_text`), and whose completion is turn k's text, its tool calls and (with
    ``observations``) their results (`turn_text`); reference, id and fields are passed on.
    `Score.steps` has each scored turn's value and the value is their ``aggregate``;
    ``details.turns`` has each turn's reason and details. A turn the wrapped reward could not
    score fails the sample with its status and a reason naming the turn - a mean over the other
    turns would hide it. Usage is the sum over turns.
    """

    name = "per_turn"

    def __init__(
        self,
        reward: Reward | Mapping[str, Any],
        *,
        aggregate: Aggregate = "mean",
        observations: bool = True,
        max_turns: int | None = None,
        name: str | None = None,
    ):
        self.reward = built(reward, "reward")
        self.aggregate = aggregate
        self.observations = observations
        self.max_turns = max_turns
        if name is not None:
            self.name = name
        self.io_bound = self.reward.io_bound
        self.uses_gpu = self.reward.uses_gpu
        self.scores_groups = self.reward.scores_groups
        self.scores_batches = self.reward.scores_batches

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores, readable = read_trajectories(samples, with_prompt=True)
        jobs: list[tuple[int, int, list[Sample]]] = []  # (sample, its first scored turn, turns)
        for index, trajectory in readable:
            sample = samples[index]
            turns = trajectory.turns
            first = 0 if self.max_turns is None else max(0, len(turns) - self.max_turns)
            jobs.append(
                (
                    index,
                    first,
                    [
                        replace(
                            sample,
                            prompt=history_text(sample.prompt, turns[:k]),
                            completion=turn_text(turns[k], observations=self.observations),
                        )
                        for k in range(first, len(turns))
                    ],
                )
            )
        # One call of the wrapped reward for every turn of the batch, so a judge sees them together.
        flat = [turn for _, _, asked in jobs for turn in asked]
        turn_scores = await scores_or_failures(self.reward, flat) if flat else []
        position = 0
        for index, first, asked in jobs:
            own = turn_scores[position : position + len(asked)]
            position += len(asked)
            scores[index] = self._fold(samples[index].label(index), own, first)
        return scores  # type: ignore[return-value]  # every index is set above

    def _fold(self, who: str, turns: Sequence[Score], first: int) -> Score:
        usage = Usage.total(turns)
        for number, score in enumerate(turns, start=first + 1):
            if not score.ok:
                return Score.failure(score.status, f"{who}: turn {number}: {score.reason}", usage=usage)
        values = [score.value for score in turns if score.value is not None]
        return Score(
            value=aggregate_steps(values, self.aggregate),
            steps=values,
            usage=usage,
            details={
                "first_turn": first,
                "turns": [{"reason": s.reason, "details": s.details} for s in turns],
            },
        )

    def close(self) -> None:
        self.reward.close()
