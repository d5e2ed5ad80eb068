"""ProcessBench's first-error metric, on its own so that any step benchmark can use it.

Each item's label is the index of its earliest wrong step, or -1 when every step is right. A
model's prediction is scored on the two halves separately - accuracy on the erroneous items
(the exact index found) and on the correct ones (-1 predicted) - and the split's score is
their harmonic mean, so neither "everything is wrong" nor "everything is right" scores.

A step scorer (a PRM) predicts the first step whose score falls below a threshold. The
threshold must be chosen on other data than the data it is scored on (`choose_threshold` on a
validation split), or the figure flatters the scorer.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FirstErrorResult:
    """ProcessBench's figures for one split.

    Attributes:
        error_accuracy: Exact first-error index found, among items with an error.
        correct_accuracy: -1 predicted, among items without one.
        f1: Their harmonic mean (0 when both are 0).
        items: How many items were scored.
    """

    error_accuracy: float
    correct_accuracy: float
    f1: float
    items: int


def first_error_f1(predicted: Sequence[int], gold: Sequence[int]) -> FirstErrorResult:
    """ProcessBench's accuracy on erroneous items, on correct items, and their harmonic mean.
    A half with no items scores 0 (ProcessBench has both halves in every split)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} labels")
    erroneous = [p == g for p, g in zip(predicted, gold, strict=True) if g != -1]
    correct = [p == -1 for p, g in zip(predicted, gold, strict=True) if g == -1]
    error_accuracy = sum(erroneous) / len(erroneous) if erroneous else 0.0
    correct_accuracy = sum(correct) / len(correct) if correct else 0.0
    total = error_accuracy + correct_accuracy
    f1 = 2 * error_accuracy * correct_accuracy / total if total else 0.0
    return FirstErrorResult(error_accuracy, correct_accuracy, f1, len(gold))


def predicted_first_error(step_scores: Sequence[float], threshold: float) -> int:
    """The index of the first step scored below ``threshold``; -1 when none is."""
    return next((index for index, score in enumerate(step_scores) if score < threshold), -1)


def choose_threshold(step_scores: Sequence[Sequence[float]], gold: Sequence[int]) -> float:
    """The threshold that maximises `first_error_f1` on these items (a validation split): every
    distinct score, and one above them all, is tried; the lowest best one wins a tie.

    One sweep, not a rescoring per candidate (ProcessBench has ~10^4 distinct scores): an item
    is right for the thresholds in one interval. With ``m_k`` the lowest of its first ``k + 1``
    scores, an item whose first error is ``g`` is right for ``m_g < t <= m_(g-1)`` (its step
    ``g`` is the first under ``t``), and a correct item for ``t <= m_last`` (none is).
    """
    if len(step_scores) != len(gold):
        raise ValueError(f"{len(step_scores)} items scored for {len(gold)} labels")
    candidates = sorted({score for scores in step_scores for score in scores})
    if not candidates:
        raise ValueError("no step scores to choose a threshold from")
    candidates.append(candidates[-1] + 1.0)  # above every score: every step counts as wrong
    right = {"error": [0] * (len(candidates) + 1), "correct": [0] * (len(candidates) + 1)}
    for scores, first_error in zip(step_scores, gold, strict=True):
        minima = list(itertools.accumulate(scores, min))
        if first_error == -1:
            low, high, half = -math.inf, minima[-1] if minima else math.inf, "correct"
        elif first_error < len(minima):
            low = minima[first_error]
            high = minima[first_error - 1] if first_error > 0 else math.inf
            half = "error"
        else:
            continue  # the labelled step was never scored: no threshold finds it
        # The candidates in (low, high]: a difference array, summed below.
        right[half][bisect.bisect_right(candidates, low)] += 1
        right[half][bisect.bisect_right(candidates, high)] -= 1
    errors = sum(1 for g in gold if g != -1)
    corrects = len(gold) - errors
    best, best_f1 = candidates[0], -1.0
    found = {"error": 0, "correct": 0}
    for index, threshold in enumerate(candidates):
        found = {half: found[half] + right[half][index] for half in found}
        error_accuracy = found["error"] / errors if errors else 0.0
        correct_accuracy = found["correct"] / corrects if corrects else 0.0
        total = error_accuracy + correct_accuracy
        f1 = 2 * error_accuracy * correct_accuracy / total if total else 0.0
        if f1 > best_f1:
            best, best_f1 = threshold, f1
    return best
