"""The pairwise judge: completions compared two at a time, always in both orders.

LLM judges favour a position (often the first response) - a bias that a single order bakes into
the reward. Every comparison is therefore asked twice, with the responses swapped, and the two
verdicts are averaged: a split verdict (A wins, then A wins again - that is, each response wins
once) is a tie. How often the two orders agree is reported as position consistency.

A completion is compared either with the other completions of its prompt in the batch
(``against: group``, round-robin, the GRPO setting) or with a baseline response from the
sample's fields (``against: baseline``, Arena-Hard style).

Within a group, ``check_transitivity`` counts the triads of completions whose comparisons form a
cycle (A beats B, B beats C, C beats A): no ranking agrees with such a triad, so a group with
many of them has win rates that say more about the judge than about the completions. The count is
Kendall and Babington Smith's circular triads ("On the method of paired comparisons",
Biometrika 1940), the measure Xu et al. apply to LLM judges with both orders asked ("Investigating
Non-Transitivity in LLM-as-a-Judge", ICML 2025, arXiv:2502.14074: the share of triads that are
hard non-transitive). A comparison's winner is the side its two-order preference favours; a tie
(exactly 0.5: a split verdict) is no winner, so a triad with a tie is checked but never counted as
a cycle (``tied_triads`` says how many), since counting weak intransitivity would flag every
position-inconsistent pair a second time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.judges.judge import (
    Judge,
    Judgement,
    JudgeOptions,
    cache_keys,
    scored,
)
from rewardlab.judges.verdicts import LabelSet
from rewardlab.rewards.contract import Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, takes_options

#: How many of a group's cycles each score lists (the count is always whole).
MAX_CYCLES_LISTED = 20
PAIR_LABELS = LabelSet(["A", "B", "tie"], aliases={"C": "tie", "draw": "tie", "equal": "tie"})


@dataclass(slots=True)
class Comparison:
    """Both orders of one comparison: ``first`` shows x as A, ``second`` shows y as A."""

    first: Judgement
    second: Judgement

    @property
    def ok(self) -> bool:
        return self.first.ok and self.second.ok

    def preference(self) -> float:
        """P(x beats y), ties counting half, averaged over the two orders."""
        one, two = self.first.distribution(PAIR_LABELS), self.second.distribution(PAIR_LABELS)
        return 0.5 * ((one["A"] + 0.5 * one["tie"]) + (two["B"] + 0.5 * two["tie"]))

    def consistent(self) -> bool:
        """Whether the two written verdicts name the same winner (or both a tie)."""
        unswap = {"A": "B", "B": "A", "tie": "tie"}
        return self.first.verdict.label == unswap[self.second.verdict.label]  # type: ignore[union-attr]

    @property
    def usage(self) -> Usage:
        return self.first.completion.usage + self.second.completion.usage

    def failure(self, who: str) -> Score:
        failed = self.first if not self.first.ok else self.second
        score = failed.failure(who)
        score.usage = self.usage
        return score


class PairwiseJudgeOptions(JudgeOptions):
    """Options of `PairwiseJudge`."""

    against: Literal["group", "baseline"] = "group"
    """``group``: each completion against every other completion of the same prompt in the
    batch (the value is its mean win probability); ``baseline``: against the response in
    ``fields[baseline_field]`` (the value is the win probability)."""
    baseline_field: str = "baseline"
    """The `Sample.fields` key holding the baseline response (``against: baseline``)."""
    group_field: str = "group_id"
    """The `Sample.fields` key naming a sample's group; samples without it are grouped by
    prompt."""
    max_opponents: int | None = Field(default=None, ge=1)
    """Compare each completion with this many others of its group (neighbours in batch order,
    wrapping around; off by one for one member when the group size and this are both odd);
    null compares all pairs, which costs G(G-1) calls for a group of G."""
    criteria: str | None = None
    """What to compare on, added to the prompt."""
    use_reference: bool = True
    """Show the judge the sample's reference answer, when it has one."""
    check_transitivity: bool = False
    """Count the group's intransitive triads (``against: group``; see the module docstring):
    ``details["transitivity"]`` of each sample, and ``intransitive_fraction`` in the breakdown
    (logged as a metric by the TRL adapter) where the group has a triad whose three comparisons
    gave a verdict. No extra calls: it reads the comparisons already made."""

    @model_validator(mode="after")
    def _transitivity_within_a_group(self) -> PairwiseJudgeOptions:
        if self.check_transitivity and self.against != "group":
            raise OptionError(
                "check_transitivity", "needs against: group; a baseline comparison has no triads"
            )
        return self


@takes_options(PairwiseJudgeOptions)
class PairwiseJudge(Judge):
    """Compares completions two at a time, in both orders.

    Options: `PairwiseJudgeOptions` (against the group or a baseline, how many opponents), and
    the backend, client, template and verdict options every judge shares (`JudgeOptions`).

    ``breakdown`` has ``win_rate`` and ``position_consistency`` (the share of comparisons whose
    two orders agreed); ``details`` lists each comparison. Each comparison's usage is counted on
    one of its two samples, so that usage adds up over a batch. A sample is scored by its
    comparisons that gave a verdict, and fails only when none did; ``details["failed_comparisons"]``
    lists the others. Failing it for any failed comparison let one completion that plants verdicts
    (refusing every judge answer it appears in) void each honest completion of its group.
    """

    name = "pairwise_judge"
    default_template = "pairwise.jinja"

    def __init__(
        self,
        *,
        against: Literal["group", "baseline"] = "group",
        baseline_field: str = "baseline",
        group_field: str = "group_id",
        max_opponents: int | None = None,
        criteria: str | None = None,
        use_reference: bool = True,
        check_transitivity: bool = False,
        **options: Any,
    ):
        super().__init__(**options)
        self.check_labels(PAIR_LABELS)
        self.check_transitivity = check_transitivity
        self.against = against
        self.scores_groups = against == "group"
        self.baseline_field = baseline_field
        self.group_field = group_field
        self.max_opponents = max_opponents
        self.criteria = criteria
        self.use_reference = use_reference

    async def compare(self, prompt: str, x: str, y: str, reference: str | None = None) -> Comparison:
        """Both orders of x against y."""
        base = {"prompt": prompt, "criteria": self.criteria, "reference": reference}
        first, second = await asyncio.gather(
            self.ask({**base, "response_a": x, "response_b": y}, PAIR_LABELS, "winner"),
            self.ask({**base, "response_a": y, "response_b": x}, PAIR_LABELS, "winner"),
        )
        return Comparison(first, second)

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        texts = self.readable(samples, scores, minimum=0.0)
        if self.against == "baseline":
            await asyncio.gather(*(self._against_baseline(samples, i, texts[i], scores) for i in texts))
        else:
            await self._round_robin(samples, texts, scores)
        return scored(scores)

    async def _against_baseline(
        self, samples: Sequence[Sample], index: int, text: tuple[str, str], scores: list[Score | None]
    ) -> None:
        sample = samples[index]
        baseline = (
            sample.reference if self.baseline_field == "reference" else sample.fields.get(self.baseline_field)
        )
        if not isinstance(baseline, str) or not baseline.strip():
            scores[index] = Score.failure(
                Status.INVALID_INPUT,
                f"{sample.label(index)}: {self.baseline_field}: a baseline response (text) is needed "
                "to compare with",
            )
            return
        reference = sample.reference if self.use_reference and self.baseline_field != "reference" else None
        comparison = await self.compare(text[0], text[1], baseline, reference)
        scores[index] = self._score([(comparison, False, "baseline")], sample.label(index))

    async def _round_robin(
        self, samples: Sequence[Sample], texts: dict[int, tuple[str, str]], scores: list[Score | None]
    ) -> None:
        groups: dict[Any, list[int]] = defaultdict(list)
        for index in texts:
            groups[samples[index].group_key(self.group_field)].append(index)
        pairs = {pair for members in groups.values() for pair in self._pairs(members)}
        ordered = sorted(pairs)
        results = await asyncio.gather(
            *(
                self.compare(texts[i][0], texts[i][1], texts[j][1], self._reference(samples[i]))
                for i, j in ordered
            )
        )
        by_sample: dict[int, list[tuple[Comparison, bool, str]]] = defaultdict(list)
        for (i, j), comparison in zip(ordered, results, strict=True):
            by_sample[i].append((comparison, False, samples[j].id or f"#{j}"))
            by_sample[j].append((comparison, True, samples[i].id or f"#{i}"))
        preferences = {
            pair: comparison.preference()
            for pair, comparison in zip(ordered, results, strict=True)
            if comparison.ok
        }
        for members in groups.values():
            for index in members:
                who = samples[index].label(index)
                if len(members) == 1:
                    scores[index] = Score.failure(
                        Status.NOT_APPLICABLE,
                        f"{who}: no other non-empty completion of this prompt in the batch to compare with",
                    )
                else:
                    scores[index] = self._score(by_sample[index], who)
            if self.check_transitivity and len(members) > 1:
                _add_transitivity(members, preferences, scores, samples)

    def _pairs(self, members: list[int]) -> list[tuple[int, int]]:
        size = len(members)
        if self.max_opponents is None or self.max_opponents >= size - 1:
            return list(itertools.combinations(members, 2))
        # A ring: each member meets its k // 2 nearest neighbours on each side and, for odd k, the
        # member opposite it (i with i + G // 2, which no ring step reaches since k < G - 1).
        # Everyone meets k others, except when G and k are both odd: then the last member has
        # no one opposite and meets k - 1 (or, for k = 1, the first member, who meets 2).
        pairs = set()
        for position, member in enumerate(members):
            for step in range(1, self.max_opponents // 2 + 1):
                other = members[(position + step) % size]
                pairs.add((min(member, other), max(member, other)))
        if self.max_opponents % 2:
            for position in range(size // 2):
                a, b = members[position], members[position + size // 2]
                pairs.add((min(a, b), max(a, b)))
            if size % 2 and self.max_opponents == 1:
                pairs.add((min(members[0], members[-1]), max(members[0], members[-1])))
        return sorted(pairs)

    def _reference(self, sample: Sample) -> str | None:
        return sample.reference if self.use_reference else None

    def _score(self, comparisons: list[tuple[Comparison, bool, str]], who: str) -> Score:
        # A comparison serves both of its samples; its calls are counted once, on the first.
        usage = sum((c.usage for c, swapped, _ in comparisons if not swapped), Usage())
        # A sample is scored by the comparisons that gave a verdict: one that failed (a judge
        # answer refused because a completion planted verdicts in it, a timeout) must not fail the
        # sample's other comparisons too, or one planted completion voids its whole group.
        failed = [(comparison, opponent) for comparison, _, opponent in comparisons if not comparison.ok]
        if len(failed) == len(comparisons):
            comparison, opponent = failed[0]
            score = comparison.failure(f"{who} vs {opponent}")
            score.usage = usage
            return score
        comparisons = [entry for entry in comparisons if entry[0].ok]
        preferences, consistent, listed = [], 0, []
        for comparison, swapped, opponent in comparisons:
            preference = comparison.preference()
            if swapped:
                preference = 1.0 - preference
            preferences.append(preference)
            consistent += comparison.consistent()
            listed.append(
                {
                    "opponent": opponent,
                    "win_probability": round(preference, 6),
                    "verdicts": [comparison.first.verdict.label, comparison.second.verdict.label],  # type: ignore[union-attr]
                    "consistent": comparison.consistent(),
                    "swapped": swapped,
                }
            )
        win_rate = sum(preferences) / len(preferences)
        return Score(
            value=win_rate,
            breakdown={"win_rate": win_rate, "position_consistency": consistent / len(comparisons)},
            usage=usage,
            details={
                "comparisons": listed,
                **(
                    {"failed_comparisons": [_failed(c, opponent) for c, opponent in failed]} if failed else {}
                ),
                "cache_keys": cache_keys(
                    [c.first.completion for c, _, _ in comparisons]
                    + [c.second.completion for c, _, _ in comparisons]
                ),
            },
        )


def _failed(comparison: Comparison, opponent: str) -> dict[str, Any]:
    score = comparison.failure(opponent)
    return {"opponent": opponent, "status": str(score.status), "reason": score.reason}


def _beats(preferences: dict[tuple[int, int], float], x: int, y: int) -> int:
    """1 when x beat y, -1 when y beat x, 0 for a tie (``preferences`` holds P(i beats j) for
    i < j)."""
    p = preferences[(x, y)] if x < y else 1.0 - preferences[(y, x)]
    return (p > 0.5) - (p < 0.5)


def _add_transitivity(
    members: list[int],
    preferences: dict[tuple[int, int], float],
    scores: list[Score | None],
    samples: Sequence[Sample],
) -> None:
    """Count the group's triads, tied triads and cycles, and add them to its members' scores."""
    triads = tied = 0
    cycles: list[tuple[int, int, int]] = []
    for a, b, c in itertools.combinations(sorted(members), 3):
        if not all(pair in preferences for pair in ((a, b), (b, c), (a, c))):
            continue
        triads += 1
        outcomes = (_beats(preferences, a, b), _beats(preferences, b, c), _beats(preferences, c, a))
        if 0 in outcomes:
            tied += 1
        elif outcomes[0] == outcomes[1] == outcomes[2]:  # a>b>c>a, or a<b<c<a
            cycles.append((a, b, c))
    fraction = len(cycles) / triads if triads else None
    for index in members:
        score = scores[index]
        if score is None or not score.ok:
            continue
        score.details["transitivity"] = {
            "triads": triads,
            "tied_triads": tied,
            "intransitive": len(cycles),
            "fraction": fraction,
            "in_cycles": sum(index in cycle for cycle in cycles),
            "cycles": [[samples[i].id or f"#{i}" for i in cycle] for cycle in cycles[:MAX_CYCLES_LISTED]],
        }
        if fraction is not None:
            score.breakdown["intransitive_fraction"] = fraction
