"""What step rewards are used for, as plain functions over `Score`s: picking the best of N
candidates, confidence that predicts success (scored by AUROC), and finding the step where a
failed trajectory went wrong; and McNemar's exact test, for whether one way of picking beats
another on the same sets of candidates."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rewardlab.rewards.contract import Score


def best_of_n(scores: Sequence[Score]) -> int | None:
    """The index of the candidate with the highest value (the first, on a tie); None when no
    candidate could be scored. Failed candidates are never picked."""
    scored = [
        (score.value, -index) for index, score in enumerate(scores) if score.ok and score.value is not None
    ]
    return -max(scored)[1] if scored else None


def auroc(confidences: Sequence[float], successes: Sequence[bool]) -> float:
    """The area under the ROC curve of ``confidences`` as a predictor of ``successes``: the
    probability that a random success is more confident than a random failure (ties count half).
    Needs at least one of each."""
    if len(confidences) != len(successes):
        raise ValueError(f"{len(confidences)} confidences for {len(successes)} outcomes")
    positives = [c for c, s in zip(confidences, successes, strict=True) if s]
    negatives = [c for c, s in zip(confidences, successes, strict=True) if not s]
    if not positives or not negatives:
        raise ValueError("AUROC needs at least one success and one failure")
    ranked = sorted([(c, 1) for c in positives] + [(c, 0) for c in negatives])
    # Mann-Whitney U from average ranks, so ties count half.
    rank_sum, position = 0.0, 0
    while position < len(ranked):
        end = position
        while end < len(ranked) and ranked[end][0] == ranked[position][0]:
            end += 1
        average_rank = (position + 1 + end) / 2
        rank_sum += average_rank * sum(label for _, label in ranked[position:end])
        position = end
    u = rank_sum - len(positives) * (len(positives) + 1) / 2
    return u / (len(positives) * len(negatives))


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """The two-sided p-value of McNemar's exact test for two selections scored on the same sets:
    ``only_first`` sets where only the first picked a right candidate, ``only_second`` where only
    the second did (sets where both or neither did say nothing about which is better). Under
    equal quality each discordant set goes either way with probability 1/2."""
    if min(only_first, only_second) < 0:
        raise ValueError(f"counts must not be negative, got {only_first} and {only_second}")
    discordant = only_first + only_second
    tail = sum(math.comb(discordant, k) for k in range(min(only_first, only_second) + 1))
    return min(1.0, 2 * tail / 2**discordant)


def decisive_step(score: Score, threshold: float | None = None) -> int | None:
    """The step a failed trajectory went wrong at: the first step scored below ``threshold``,
    or, without one, the lowest-scored step (the first of equals). None without step scores."""
    steps = score.steps
    if not score.ok or not steps:
        return None
    if threshold is not None:
        return next((k for k, value in enumerate(steps) if value < threshold), None)
    return min(range(len(steps)), key=lambda k: (steps[k], k))
