"""Step-level rewards: splitting a completion into segments, folding step scores into one value,
and turning a group's step scores into per-step advantages.

Folding is always an explicit, named choice (``min``, ``last``, ``mean``, ``sum``, ``product``,
``max``, ``bottom_10``): they mean different things - ``min`` says "as good as the worst step",
``last`` trusts the final state, ``product`` treats steps as independent chances of being right,
``bottom_10`` is the mean of the lowest tenth of the steps (at least one): the weak spots, less
noisy than the single worst.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from rewardlab.rewards.step_splitting import split_steps

Aggregate = Literal["min", "last", "mean", "sum", "product", "max", "bottom_10"]
AGGREGATES: tuple[str, ...] = ("min", "last", "mean", "sum", "product", "max", "bottom_10")


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
    if how == "max":
        return max(values)
    if how == "bottom_10":
        lowest = sorted(values)[: max(1, math.ceil(len(values) / 10))]
        return math.fsum(lowest) / len(lowest)
    raise ValueError(f"unknown aggregate {how!r}; one of {', '.join(AGGREGATES)}")


def split_segments(text: str, max_segments: int = 12) -> list[tuple[int, int]]:
    """Character spans of the segments (steps) of ``text`` for a judge: paragraphs (a single
    paragraph is split at line breaks), the shortest adjacent pair merged while there are more
    than ``max_segments``. An empty text is one empty segment, so it still gets a verdict."""
    if max_segments < 1:
        raise ValueError("max_segments must be at least 1")
    return split_steps(text, "paragraphs", max_steps=max_segments) or [(0, len(text))]


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
