"""Folding per-criterion verdicts into one reward.

Each criterion's verdict is its satisfaction ``s`` in [0, 1]: 1 if met, 0 if not, a choice's
value for ordinal criteria, or the judge's probability of "yes". For a pitfall (negative weight)
"met" means the mistake was made. The rules:

- ``points`` (HealthBench): the weights of met criteria, pitfalls included (so they subtract),
  over the total positive weight: sum(w * s) / sum(w > 0). Not clipped - HealthBench clips only
  the mean over a whole evaluation - so it can fall below 0. Undefined without positive weight.
- ``weighted_sum``: sum(w * s), raw, for RL (the scale is the rubric's own).
- ``all_or_nothing`` (RIFL): 1 only if every positive criterion is met and no pitfall is; with
  probabilities, the probability of exactly that (the product, treating verdicts as independent).
- ``fraction`` (Compute-as-Teacher): the share of criteria satisfied, a pitfall counting as
  satisfied when avoided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from rewardlab.errors import RubricError
from rewardlab.rubrics.model import Rubric

Aggregation = Literal["points", "weighted_sum", "all_or_nothing", "fraction"]
AGGREGATIONS: tuple[str, ...] = ("points", "weighted_sum", "all_or_nothing", "fraction")


def aggregate(rubric: Rubric, satisfaction: Sequence[float], how: Aggregation) -> float:
    """One value from the satisfaction of each of ``rubric``'s criteria, by rule ``how``."""
    if len(satisfaction) != len(rubric.criteria):
        raise ValueError(f"{len(satisfaction)} verdicts for {len(rubric.criteria)} criteria")
    if any(not 0.0 <= s <= 1.0 for s in satisfaction):
        raise ValueError("satisfaction values must lie in [0, 1]")
    weights = [c.weight for c in rubric.criteria]
    if how == "points":
        total = rubric.positive_weight
        if total <= 0:
            raise RubricError(
                "the points rule needs at least one positive criterion (HealthBench's score is undefined)"
            )
        return math.fsum(w * s for w, s in zip(weights, satisfaction, strict=True)) / total
    if how == "weighted_sum":
        return math.fsum(w * s for w, s in zip(weights, satisfaction, strict=True))
    if how == "all_or_nothing":
        return math.prod(s if w > 0 else 1.0 - s for w, s in zip(weights, satisfaction, strict=True))
    if how == "fraction":
        kept = [s if w > 0 else 1.0 - s for w, s in zip(weights, satisfaction, strict=True)]
        return math.fsum(kept) / len(kept)
    raise ValueError(f"unknown aggregation {how!r}; one of {', '.join(AGGREGATIONS)}")
