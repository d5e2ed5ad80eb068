"""Self-proposed rubrics (Compute-as-Teacher): rewards without a reference, from the group of
rollouts itself.

For each prompt's group of G rollouts, a frozen anchor model - which does not see the question,
so it cannot simply solve it - synthesizes one reference from the rollouts, reconciling their
disagreements. Then:

- on verifiable tasks (``verify: math``), each rollout scores by programmatic answer
  equivalence against the synthesized reference (`MathAnswerReward`);
- otherwise the anchor turns the synthesized reference into binary criteria, and an independent
  judge (this reward's backend) checks each rollout against them: the reward is the fraction met.

A group needs at least ``min_group`` non-empty rollouts (a reference synthesized from one
rollout is that rollout); smaller groups are ``not_applicable``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.judges.judge import Judge, JudgeOptions, scored
from rewardlab.llm.backend import Backend
from rewardlab.llm.backends import BackendOption, make_backend
from rewardlab.llm.client import ModelClient
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.details import clipped
from rewardlab.rewards.options import OptionError, takes_options
from rewardlab.rubrics.generate import read_generated_criteria
from rewardlab.rubrics.grading import RubricReward
from rewardlab.rubrics.model import Rubric


class SelfProposedRubricOptions(JudgeOptions):
    """Options of `SelfProposedRubricReward`; the backend, client, template and verdict options
    are those of the judge that grades the criteria."""

    anchor: BackendOption = None
    """The anchor model's backend config; by default the judge's own."""
    verify: Literal["math"] | None = None
    """``math`` for verifiable answers (checked against the synthesized reference by
    ``math_answer``); null for rubric grading."""
    group_field: str = "group_id"
    """The `Sample.fields` key naming a sample's group; samples without it are grouped by
    prompt."""
    min_group: int = Field(default=2, ge=2)
    """Fewest non-empty rollouts to synthesize a reference from (a reference synthesized from
    one rollout is that rollout)."""
    min_criteria: int = Field(default=3, ge=1)
    """Fewest proposed criteria."""
    max_criteria: int = Field(default=8, ge=1)
    """Most proposed criteria."""
    synthesis_max_tokens: int = Field(default=1024, ge=1)
    """Most tokens of the synthesized reference."""

    @model_validator(mode="after")
    def _bounds(self) -> SelfProposedRubricOptions:
        if self.min_criteria > self.max_criteria:
            raise OptionError("max_criteria", f"should be at least min_criteria={self.min_criteria}")
        return self


@takes_options(SelfProposedRubricOptions)
class SelfProposedRubricReward(Judge):
    """Compute-as-Teacher rewards for groups of rollouts (see the module docstring).

    Options: `SelfProposedRubricOptions` (the anchor model, verification or criteria, group
    bounds), and the backend, client, template and verdict options of the grading judge
    (`JudgeOptions`).
    """

    name = "self_proposed_rubric"
    scores_groups = True
    template_package = "rewardlab.rubrics"
    default_template = "cat_synthesize.jinja"

    def __init__(
        self,
        *,
        anchor: Backend | Mapping[str, Any] | None = None,
        verify: Literal["math"] | None = None,
        group_field: str = "group_id",
        min_group: int = 2,
        min_criteria: int = 3,
        max_criteria: int = 8,
        synthesis_max_tokens: int = 1024,
        **options: Any,
    ):
        super().__init__(**options)
        self.anchor_client = (
            self.client if anchor is None else ModelClient(make_backend(anchor), self.client.options)
        )
        grader_options = {
            key: value for key, value in options.items() if key not in ("name", "template", "backend")
        }
        # The grader shares this judge's backend and client (one cache, one concurrency limit)
        # and never sees a reference: the method is reference-free.
        self.grader = RubricReward(
            aggregate="fraction",
            mode="per_criterion",
            use_reference=False,
            backend=self.backend,
            **grader_options,
        )
        self.grader.client = self.client
        self.verify = verify
        self.group_field = group_field
        self.min_group = min_group
        self.bounds = (min_criteria, max_criteria)
        self.synthesis_max_tokens = synthesis_max_tokens
        self._math: Any = None

    def clients(self) -> list[ModelClient]:
        return super().clients() + ([self.anchor_client] if self.anchor_client is not self.client else [])

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        groups: dict[Any, list[tuple[int, str, str]]] = defaultdict(list)
        for index, (prompt, completion) in self.readable(samples, scores, minimum=0.0).items():
            groups[samples[index].group_key(self.group_field)].append((index, prompt, completion))
        await asyncio.gather(*(self._group(samples, members, scores) for members in groups.values()))
        return scored(scores)

    async def _group(
        self, samples: Sequence[Sample], members: list[tuple[int, str, str]], scores: list[Score | None]
    ) -> None:
        indices = [index for index, _, _ in members]
        if len(members) < self.min_group:
            for index in indices:
                scores[index] = Score.failure(
                    Status.NOT_APPLICABLE,
                    f"{samples[index].label(index)}: {len(members)} non-empty rollout(s) of this prompt "
                    f"in the batch; a reference is synthesized from at least {self.min_group}",
                )
            return
        synthesis = await self.ask_text(
            {"rollouts": [completion for _, _, completion in members]},
            self.prompt,
            self.synthesis_max_tokens,
            client=self.anchor_client,
        )
        usage = synthesis.usage
        synthesized = synthesis.response.text.strip() if synthesis.response is not None else ""
        if not synthesized:
            reason = synthesis.reason if synthesis.response is None else "the anchor wrote an empty reference"
            status = synthesis.status if synthesis.response is None else Status.PARSE_ERROR
            self._fail_group(
                samples, indices, scores, status=status, reason=f"reference synthesis: {reason}", usage=usage
            )
            return
        if self.verify == "math":
            results = await self._math_reward().ascore(
                [
                    Sample(completion=completion, reference=synthesized, id=_label_id(samples, index))
                    for index, _, completion in members
                ]
            )
        else:
            proposal = await self.ask_list(
                {
                    "prompt": members[0][1],
                    "reference": synthesized,
                    "min_criteria": self.bounds[0],
                    "max_criteria": self.bounds[1],
                },
                lambda text, fences: read_generated_criteria(
                    text, fences, "self-proposed", self.bounds, "essential"
                ),
                prompt=self.prompt_named("cat_criteria.jinja"),
                client=self.anchor_client,
            )
            usage = usage + proposal.completion.usage
            if not proposal.ok:
                failure = proposal.failure("criteria proposal")
                self._fail_group(
                    samples,
                    indices,
                    scores,
                    status=failure.status,
                    reason=failure.reason or "",
                    usage=usage,
                    details=failure.details,
                )
                return
            rubric = Rubric(tuple(proposal.values or ()), metadata={"source": "self-proposed"})
            graded = [
                dataclasses.replace(
                    samples[index],
                    id=_label_id(samples, index),  # the inner grader names samples by batch position
                    fields={**samples[index].fields, "rubric": rubric.to_dict()},
                )
                for index in indices
            ]
            results = await self.grader.judge_batch(graded)
        for position, (index, result) in enumerate(zip(indices, results, strict=True)):
            result.details["synthesized_reference"] = clipped(synthesized, 2000)
            # The group's shared calls (synthesis, proposal) are charged once, on its first sample.
            result.usage = (usage if position == 0 else Usage()) + (result.usage or Usage())
            scores[index] = result

    def _fail_group(
        self,
        samples: Sequence[Sample],
        indices: list[int],
        scores: list[Score | None],
        *,
        status: Status,
        reason: str,
        usage: Usage,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        for position, index in enumerate(indices):
            scores[index] = Score.failure(
                status,
                f"{samples[index].label(index)} (group): {reason}",
                usage=usage if position == 0 else Usage(),
                details=dict(details or {}),
            )

    def _math_reward(self) -> Any:
        if self._math is None:
            from rewardlab.rewards.math.reward import MathAnswerReward

            self._math = MathAnswerReward()
        return self._math

    def close(self) -> None:
        super().close()
        if self._math is not None:
            self._math.close()


def _label_id(samples: Sequence[Sample], index: int) -> str:
    """An id that makes an inner reward's messages name the sample as this batch knows it."""
    identifier = samples[index].id
    return identifier if identifier is not None else f"#{index}"
