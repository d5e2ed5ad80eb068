"""Step-level rewards: splitting a completion into segments, folding step scores into one value,
and turning a group's step scores into per-step advantages.

Folding is always an explicit, named choice (``min``, ``last``, ``mean``, ``sum``, ``product``):
they mean different things - ``min`` says "as good as the worst step", ``last`` trusts the final
state, ``product`` treats steps as independent chances of being right.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from typing import Literal

Aggregate = Literal["min", "last", "mean", "sum", "product"]
AGGREGATES: tuple[str, ...] = ("min", "last", "mean", "sum", "product")


def aggregate_steps(values: Sequence[float], how: Aggregate) -> float:
    """One value from step values, by the named rule."""
    if not values:
        raise ValueError("no step values to aggregate")
    if how == "min":
        return min(values)
    if how == "last":
        return values[-1]
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "sum":
        return math.fsum(values)
    if how == "product":
        return math.prod(values)
    raise ValueError(f"unknown aggregate {how!r}; one of {', '.join(AGGREGATES)}")


def split_segments(text: str, max_segments: int = 12) -> list[tuple[int, int]]:
    """Character spans of the segments (steps) of ``text``.

    Segments are paragraphs (split at blank lines); a text with a single paragraph is split at
    line breaks instead. While more than ``max_segments`` remain, the adjacent pair with the
    shortest combined length is merged, so a judge never gets hundreds of one-line steps.
    Whitespace between segments belongs to none.
    """
    if max_segments < 1:
        raise ValueError("max_segments must be at least 1")
    spans = _spans(text, r"\n[ \t]*\n")
    if len(spans) == 1:
        spans = _spans(text, r"\n")
    while len(spans) > max_segments:
        lengths = [spans[i + 1][1] - spans[i][0] for i in range(len(spans) - 1)]
        i = lengths.index(min(lengths))
        spans[i : i + 2] = [(spans[i][0], spans[i + 1][1])]
    return spans


def _spans(text: str, separator: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in [*re.finditer(separator, text), None]:
        end = match.start() if match else len(text)
        piece = text[start:end]
        if piece.strip():
            left = start + len(piece) - len(piece.lstrip())
            right = start + len(piece.rstrip())
            spans.append((left, right))
        if match:
            start = match.end()
    return spans or [(0, len(text))]


def process_advantages(group: Sequence[Sequence[float]]) -> list[list[float]]:
    """Per-step advantages for a group of completions of one prompt, from their step rewards.

    The process-supervision form of GRPO (DeepSeekMath, section 4.1.3), which ExpRL's process
    rewards plug into: every step reward is normalised by the mean and standard deviation of all
    step rewards in the group (the sample standard deviation, as TRL normalises outcome
    rewards), and a step's advantage is the sum of the normalised rewards from
    that step to the end - so a step is credited with what follows from it. A group whose step
    rewards are all equal carries no signal: all advantages are 0.
    """
    rewards = [value for steps in group for value in steps]
    if not rewards:
        return [[] for _ in group]
    mean = statistics.fmean(rewards)
    spread = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    advantages = []
    for steps in group:
        normalised = [(value - mean) / spread if spread > 0 else 0.0 for value in steps]
        to_go, total = [], 0.0
        for value in reversed(normalised):
            total += value
            to_go.append(total)
        advantages.append(to_go[::-1])
    return advantages
