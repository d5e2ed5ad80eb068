"""The listwise judge: all G completions of a prompt judged together, in one call per ordering.

Seeing the whole group lets the judge grade relative quality - what GRPO's group-normalised
advantage consumes anyway - at G times fewer calls than pointwise judging. Position bias is
countered by asking again with the group in other orders (reversed, then shuffled) and averaging
each completion's result over the orderings.

Two modes: ``scores`` (every completion gets a score on the scale) and ``best`` (the judge names
the best completion; with log-probabilities, each completion's value is the judge's probability
that it is the best).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.judges.judge import Judge, JudgeOptions, cache_keys, scored
from rewardlab.judges.verdicts import LabelSet, read_number_list
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, Scale, takes_options


class ListwiseJudgeOptions(JudgeOptions):
    """Options of `ListwiseJudge`."""

    mode: Literal["scores", "best"] = "scores"
    """``scores``: every completion gets a score on the scale; ``best``: the judge names the
    best completion (with log-probabilities, each completion's value is the judge's probability
    that it is the best)."""
    scale: Scale = (1, 10)
    """``[low, high]`` integers for ``scores`` mode."""
    orderings: int = Field(default=2, ge=1)
    """How many different orderings of the group to ask about (1: as given; 2 adds the reversed
    order; more add seeded shuffles; at most G! for a group of G)."""
    group_field: str = "group_id"
    """The `Sample.fields` key naming a sample's group; samples without it are grouped by
    prompt."""
    max_group_size: int = Field(default=16, ge=1)
    """Refuse larger groups (status ``invalid_input``): a judge's context and attention are
    finite. ``best`` mode reads log-probabilities only up to 9 completions (labels "1"-"9" are
    single tokens)."""
    criteria: str | None = None
    """What to judge on, added to the prompt."""
    use_reference: bool = True
    """Show the judge the reference answer of the group, when it has one."""
    normalize: bool = True
    """Map scores to [0, 1] (``scores`` mode)."""

    @model_validator(mode="after")
    def _logprobs_read_one_token(self) -> ListwiseJudgeOptions:
        if self.verdict_from == "logprobs" and (self.mode == "scores" or self.max_group_size > 9):
            raise OptionError(
                "verdict_from",
                "logprobs reads the best completion's number from one token: it needs mode: best "
                "and max_group_size <= 9",
            )
        return self


@takes_options(ListwiseJudgeOptions)
class ListwiseJudge(Judge):
    """Judges the completions of each prompt in the batch together.

    Options: `ListwiseJudgeOptions` (scores or the best, the scale, orderings, group size), and
    the backend, client, template and verdict options every judge shares (`JudgeOptions`).

    A failed call fails every sample of its group (with the same reason); the group's usage is
    counted once, on its first sample.
    """

    name = "listwise_judge"
    scores_groups = True

    def __init__(
        self,
        *,
        mode: Literal["scores", "best"] = "scores",
        scale: Sequence[int] = (1, 10),
        orderings: int = 2,
        group_field: str = "group_id",
        max_group_size: int = 16,
        criteria: str | None = None,
        use_reference: bool = True,
        normalize: bool = True,
        **options: Any,
    ):
        self.default_template = "listwise_scores.jinja" if mode == "scores" else "listwise_best.jinja"
        super().__init__(**options)
        self.mode = mode
        self.low, self.high = scale
        self.orderings = orderings
        self.group_field = group_field
        self.max_group_size = max_group_size
        self.criteria = criteria
        self.use_reference = use_reference
        self.normalize = normalize

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        groups: dict[Any, list[tuple[int, str, str]]] = defaultdict(list)
        minimum = 0.0 if self.normalize or self.mode == "best" else float(self.low)
        for index, (prompt, completion) in self.readable(samples, scores, minimum).items():
            groups[samples[index].group_key(self.group_field)].append((index, prompt, completion))
        await asyncio.gather(*(self._judge_group(samples, members, scores) for members in groups.values()))
        return scored(scores)

    def _orders(self, prompt: str, size: int) -> list[list[int]]:
        """The orderings asked about, all different (at most G! of them): as given, reversed,
        then shuffles seeded by the prompt (so a rerun asks the same questions and hits the
        cache)."""
        wanted = min(self.orderings, math.factorial(size))
        orders = [list(range(size)), list(range(size))[::-1]][:wanted]
        seed = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16)
        shuffler = random.Random(seed)
        while len(orders) < wanted:
            order = list(range(size))
            shuffler.shuffle(order)
            if order not in orders:
                orders.append(order)
        return orders

    async def _judge_group(
        self, samples: Sequence[Sample], members: list[tuple[int, str, str]], scores: list[Score | None]
    ) -> None:
        indices = [index for index, _, _ in members]
        prompt = members[0][1]
        if len(members) < 2:
            for index in indices:
                scores[index] = Score.failure(
                    Status.NOT_APPLICABLE,
                    f"{samples[index].label(index)}: no other non-empty completion of this prompt "
                    "in the batch",
                )
            return
        if len(members) > self.max_group_size:
            for index in indices:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT,
                    f"{samples[index].label(index)}: its group has {len(members)} completions, "
                    f"more than max_group_size={self.max_group_size}",
                )
            return
        completions = [completion for _, _, completion in members]
        reference = samples[indices[0]].reference if self.use_reference else None
        base = {
            "prompt": prompt,
            "criteria": self.criteria,
            "reference": reference,
            "low": self.low,
            "high": self.high,
        }
        orders = self._orders(prompt, len(members))
        results = await asyncio.gather(*(self._ask_order(base, completions, order) for order in orders))
        usage = sum((usage for _, usage, _, _ in results), Usage())
        failed = next((failure for _, _, failure, _ in results if failure is not None), None)
        if failed is not None:
            for position, index in enumerate(indices):
                failure = Score.failure(
                    failed.status, f"{samples[index].label(index)} (group): {failed.reason}"
                )
                failure.details = dict(failed.details)
                failure.usage = usage if position == 0 else Usage()
                scores[index] = failure
            return
        per_order = [values for values, _, _, _ in results]
        keys = [key for _, _, _, order_keys in results for key in order_keys]
        for position, index in enumerate(indices):
            raw = sum(values[position] for values in per_order) / len(per_order)
            if self.mode == "best":
                value = raw
            else:
                value = (raw - self.low) / (self.high - self.low) if self.normalize else raw
            scores[index] = Score(
                value=value,
                breakdown={"score" if self.mode == "scores" else "best_probability": raw},
                usage=usage if position == 0 else Usage(),
                details={
                    "group_size": len(members),
                    "orderings": orders,
                    "by_ordering": [round(values[position], 6) for values in per_order],
                    "cache_keys": keys,
                },
            )

    async def _ask_order(
        self, base: dict[str, Any], completions: list[str], order: list[int]
    ) -> tuple[list[float], Usage, Score | None, list[str]]:
        """Ask about one ordering; the values come back in the group's own order, with the
        answer's cache keys."""
        shown = [completions[i] for i in order]
        values = {**base, "responses": shown}
        if self.mode == "scores":
            judgement = await self.ask_list(
                values,
                lambda text, fences: read_number_list(
                    text, "scores", len(shown), self.low, self.high, fences=fences
                ),
            )
            usage, keys = judgement.completion.usage, cache_keys([judgement.completion])
            if not judgement.ok:
                return [], usage, judgement.failure("listwise judge"), keys
            by_position = judgement.values or []
        else:
            labels = LabelSet([str(i) for i in range(1, len(shown) + 1)])
            choice = await self.ask(values, labels, "best")
            usage, keys = choice.completion.usage, cache_keys([choice.completion])
            if not choice.ok:
                return [], usage, choice.failure("listwise judge"), keys
            distribution = choice.distribution(labels)
            by_position = [distribution[str(i)] for i in range(1, len(shown) + 1)]
        in_group_order = [0.0] * len(order)
        for position, original in enumerate(order):
            in_group_order[original] = float(by_position[position])
        return in_group_order, usage, None, keys
