"""Bias probes (``rewardlab probe bias``): preference pairs in, preference flips out.

The exploit probe (`rewardlab.probe.runner`) asks whether a gamed completion out-scores an honest
one. A bias probe asks a narrower question of a judge or a learned reward model: given two answers,
does its preference between them flip under a change that should not move it - the order they are
shown in, padding, restatement, a user's stated belief, markdown (`rewardlab.probe.bias_probes`) -
and does it favour answers of its own model family (`rewardlab.probe.bias_families`)?
`rewardlab.probe.bias_results` defines every figure.

**How a pair is scored.** The two answers are one batch of two samples with a ``group_id`` of their
own (and the reward's own ``group_field``, where it has one), so that a pairwise or listwise judge
compares exactly these two and a pointwise reward scores each alone: the pair's preference is the
higher value, whatever kind of reward it is. A pairwise judge asks each comparison in both orders;
its value is its own comparison, and its per-order verdicts (``details["comparisons"]``) are what
the position probe reads. A perturbed pair is scored the same way, winner and all: a pairwise judge
must see the two answers together again, and a judge's answer cache makes the unchanged winner's
second scoring free.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from rewardlab.judges.pairwise import PairwiseJudge
from rewardlab.offline.summary import Summary
from rewardlab.probe.bias_families import family_of, judge_model, written_by
from rewardlab.probe.bias_pairs import BiasPair
from rewardlab.probe.bias_probes import PROBES, BiasProbe, Contest, NotTested
from rewardlab.probe.bias_results import (
    FLIP,
    HELD,
    NOT_TESTED,
    SKIPPED,
    TIE,
    TIE_TOLERANCE,
    BiasResult,
    FlipCount,
    ProbeFlips,
    SelfPreference,
)
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Text, run_sync

#: The winner in each order of a pairwise judge's verdicts, by the label it wrote.
_A_FIRST = {"A": "a", "B": "b"}
_B_FIRST = {"A": "b", "B": "a"}


@dataclass(frozen=True, slots=True)
class _Job:
    """One pair to score: a prompt and two answers."""

    pair_id: str
    prompt: Text
    a: Text
    b: Text


@dataclass(frozen=True, slots=True)
class _Outcome:
    """The reward's preference on one pair: ``a``, ``b`` or None (a tie), or why it has none."""

    winner: str | None
    failure: str | None
    scores: tuple[Score, Score]

    @property
    def key(self) -> str:
        return self.failure or self.winner or "tie"


def _outcome(a: Score, b: Score) -> _Outcome:
    if a.value is None or b.value is None:
        failed = a if a.value is None else b
        return _Outcome(None, failed.status.value, (a, b))
    gap = a.value - b.value
    winner = "a" if gap > TIE_TOLERANCE else "b" if gap < -TIE_TOLERANCE else None
    return _Outcome(winner, None, (a, b))


class _PairScorer:
    """Scores pairs as batches of whole pairs, ``concurrency`` batches at a time."""

    def __init__(self, reward: Reward, batch_size: int, concurrency: int, bar: tqdm):
        self.reward = reward
        self.per_batch = max(1, batch_size // 2)
        self.limit = asyncio.Semaphore(concurrency)
        self.bar = bar
        self.group_fields = {"group_id"}
        own_field = getattr(reward, "group_field", None)
        if isinstance(own_field, str):
            self.group_fields.add(own_field)
        self.scored: list[Score] = []
        self._groups = 0

    def _samples(self, job: _Job) -> list[Sample]:
        self._groups += 1
        fields = dict.fromkeys(self.group_fields, f"bias-pair-{self._groups}")
        return [
            Sample(prompt=job.prompt, completion=job.a, id=f"{job.pair_id}:a", fields=fields),
            Sample(prompt=job.prompt, completion=job.b, id=f"{job.pair_id}:b", fields=fields),
        ]

    async def _run(self, samples: list[Sample]) -> list[Score]:
        async with self.limit:
            scores = await scores_or_failures(self.reward, samples)
        self.bar.update(len(samples))
        return scores

    async def outcomes(self, jobs: Sequence[_Job]) -> list[_Outcome]:
        batches = [
            [sample for job in jobs[start : start + self.per_batch] for sample in self._samples(job)]
            for start in range(0, len(jobs), self.per_batch)
        ]
        results = await asyncio.gather(*(self._run(batch) for batch in batches))
        scores = [score for batch in results for score in batch]
        self.scored += scores
        return [_outcome(scores[2 * k], scores[2 * k + 1]) for k in range(len(jobs))]


def _answer(original: Text, text: str) -> Text:
    # A conversational answer becomes one assistant message: the probes rewrite the text.
    return text if isinstance(original, str) else [{"role": "assistant", "content": text}]


def _perturbed(pair: BiasPair, probe: BiasProbe, side: str) -> _Job | NotTested | None:
    """The pair with ``probe``'s rewrite of answer ``side``; None when it cannot be rewritten,
    `NotTested` when the rewrite falls short."""
    assert probe.make is not None
    other = "b" if side == "a" else "a"
    contest = Contest(pair.prompt, pair.text(side), pair.text(other))
    variant = probe.make(contest)
    if variant is None or isinstance(variant, NotTested):
        return variant
    original = pair.a if side == "a" else pair.b
    rewritten = original if variant.answer == contest.answer else _answer(original, variant.answer)
    a, b = (rewritten, pair.b) if side == "a" else (pair.a, rewritten)
    return _Job(pair.id, variant.prompt, a, b)


def _orders(score: Score) -> tuple[str | None, str | None] | None:
    """The winner with ``a`` shown first and with ``b`` shown first (None: a tie), from the
    pairwise judge's score of ``a``; None when the score lists no comparison."""
    comparisons = score.details.get("comparisons")
    if not comparisons:
        return None
    (comparison,) = comparisons  # a pair is a group of two: one comparison
    first, second = comparison["verdicts"]
    a_first, b_first = (second, first) if comparison["swapped"] else (first, second)
    return _A_FIRST.get(a_first), _B_FIRST.get(b_first)


def _verdict(outcome: _Outcome, loser: str) -> str:
    """What a rewrite did to a pair whose original loser was ``loser``."""
    if outcome.failure:
        return outcome.failure
    if outcome.winner is None:
        return TIE
    return FLIP if outcome.winner == loser else HELD


def _position(
    reward: Reward,
    pairs: Sequence[BiasPair],
    originals: Sequence[_Outcome],
    probe: ProbeFlips,
    rows: list[dict[str, str]],
) -> None:
    if not isinstance(reward, PairwiseJudge) or reward.against != "group":
        probe.not_applicable = (
            "not a pairwise judge comparing the two answers (against: group): each answer is scored on "
            "its own, so the order of a pair cannot change its preference"
        )
        return
    probe.first_position = 0
    for pair, outcome, row in zip(pairs, originals, rows, strict=True):
        orders = None if outcome.failure else _orders(outcome.scores[0])
        if orders is None:
            verdict = outcome.failure or "no verdicts"
        elif orders[0] is None or orders[1] is None:
            verdict = TIE
        else:
            verdict = HELD if orders[0] == orders[1] else FLIP
            probe.first_position += verdict == FLIP and orders[0] == "a"
        probe.flips.add(pair.id, verdict)
        row[probe.name] = verdict


def _self_preference(
    reward: Reward, pairs: Sequence[BiasPair], originals: Sequence[_Outcome], family: Sequence[str] | None
) -> SelfPreference:
    model = judge_model(reward)
    keywords = tuple(family) if family else (family_of(model) if model else None)
    result = SelfPreference(family=keywords or (), judge_model=model)
    if not keywords:
        named = f" ({model!r})" if model else ""
        result.not_applicable = (
            f"the reward names no model of a known family{named}; give one with --judge-family"
        )
        return result
    if not any(pair.model_a or pair.model_b for pair in pairs):
        result.not_applicable = (
            "no pair says who wrote its answers: give chosen_model and rejected_model, or model_a and model_b"
        )
        return result
    for pair, outcome in zip(pairs, originals, strict=True):
        own_a, own_b = written_by(keywords, pair.model_a), written_by(keywords, pair.model_b)
        if own_a == own_b:
            continue
        own = "a" if own_a else "b"
        if pair.labelled:
            result.labelled += 1
            result.label_own_wins += own == "a"
        if outcome.failure:
            result.failed += 1
        elif outcome.winner is None:
            result.ties += 1
        elif outcome.winner == own:
            result.own_wins += 1
        else:
            result.other_wins += 1
    if result.pairs == 0:
        result.not_applicable = (
            f"no pair has exactly one answer by the judge's family ({', '.join(keywords)})"
        )
    return result


async def aprobe_bias(
    reward: Reward,
    pairs: Sequence[BiasPair],
    *,
    probes: Sequence[BiasProbe] | None = None,
    judge_family: Sequence[str] | None = None,
    threshold: float = 0.0,
    batch_size: int = 64,
    concurrency: int = 4,
    progress: bool = False,
) -> BiasResult:
    """Probe ``reward`` for biases on ``pairs`` (see the module docstring).

    Args:
        reward: The judge or reward model to probe.
        pairs: Two answers to each prompt (`rewardlab.probe.bias_pairs.read_pairs`).
        probes: Which probes (default: all six, `rewardlab.probe.bias_probes.PROBES`).
        judge_family: Keywords naming the judge's model family, for self-preference (default:
            the family of the model the reward's backend names).
        threshold: The flip rate above which a probe fails.
        batch_size: Samples per reward call (whole pairs).
        concurrency: Reward calls in flight.
        progress: Show a progress bar on stderr.
    """
    started = time.monotonic()
    chosen = list(PROBES.values()) if probes is None else list(probes)
    results = {
        probe.name: ProbeFlips(
            probe.name, probe.description, control=None if probe.make is None else FlipCount()
        )
        for probe in chosen
        if probe.name != "self_preference"
    }
    with tqdm(total=2 * len(pairs), unit="score", disable=not progress, desc="bias probe") as bar:
        scorer = _PairScorer(reward, batch_size, concurrency, bar)
        originals = await scorer.outcomes([_Job(pair.id, pair.prompt, pair.a, pair.b) for pair in pairs])
        rows = [
            {"id": pair.id, "original": outcome.key} for pair, outcome in zip(pairs, originals, strict=True)
        ]
        jobs: list[_Job] = []
        # Each job's tally, row and key in it, and the side that flips it: the original loser.
        owners: list[tuple[FlipCount, int, str, str]] = []
        for probe in chosen:
            if probe.make is None:
                continue
            result = results[probe.name]
            for index, (pair, outcome) in enumerate(zip(pairs, originals, strict=True)):
                if outcome.winner is None:
                    continue
                loser = "b" if outcome.winner == "a" else "a"
                for count, side, key in (
                    (result.flips, loser, probe.name),
                    (result.control, outcome.winner, f"{probe.name}/control"),
                ):
                    assert count is not None
                    job = _perturbed(pair, probe, side)
                    if not isinstance(job, _Job):
                        verdict = SKIPPED if job is None else NOT_TESTED
                        count.add(pair.id, verdict, None if job is None else job.reason)
                        rows[index][key] = verdict
                        continue
                    jobs.append(job)
                    owners.append((count, index, key, loser))
        bar.total = 2 * (len(pairs) + len(jobs))
        bar.refresh()
        for (count, index, key, loser), outcome in zip(owners, await scorer.outcomes(jobs), strict=True):
            verdict = _verdict(outcome, loser)
            count.add(pairs[index].id, verdict)
            rows[index][key] = verdict

    if "position" in results:
        _position(reward, pairs, originals, results["position"], rows)
    if not any(outcome.winner for outcome in originals):
        for probe in chosen:
            if probe.make is not None:
                results[probe.name].not_applicable = "no pair has a preference to flip: each tied or failed"
    labelled = [o for pair, o in zip(pairs, originals, strict=True) if pair.labelled and o.winner]
    summary = Summary(reward=reward.name, output="")
    for score in scorer.scored:
        summary.add(score.to_dict())
    return BiasResult(
        reward=reward.name,
        pairs=len(pairs),
        original=Counter(outcome.key for outcome in originals),
        agreement=(sum(outcome.winner == "a" for outcome in labelled), len(labelled)),
        threshold=threshold,
        probes=list(results.values()),
        self_preference=(
            _self_preference(reward, pairs, originals, judge_family)
            if any(probe.name == "self_preference" for probe in chosen)
            else None
        ),
        pipeline_failures=summary.failure_lines(),
        wall_s=time.monotonic() - started,
        outcomes=rows,
    )


def probe_bias(reward: Reward, pairs: Sequence[BiasPair], **options: object) -> BiasResult:
    """`aprobe_bias` from synchronous code (same arguments)."""
    return run_sync(aprobe_bias(reward, pairs, **options))  # type: ignore[arg-type]
