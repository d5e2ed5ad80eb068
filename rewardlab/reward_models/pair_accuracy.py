"""How often a reward model prefers the chosen answer: overall, and where length cannot explain it.

Preference data rewards length: in the AlpacaEval pairs of ``shared/data/preferences`` the longer
answer is the chosen one 88% of the time, so a model that learnt "longer is better" looks good
on raw accuracy. Two subsets take length out of the picture:

- ``similar_length``: pairs whose answers differ in length by less than 10% of the longer one;
- ``chosen_shorter``: pairs whose chosen answer is strictly shorter than the rejected one (a
  length-only ranker gets every one of them wrong).

Lengths are characters of the answer's text (`PreferencePair.answer_length`): the measure the
88% figure is stated in, and one that does not depend on the model's tokenizer. A pair counts as
correct when the chosen answer's reward is strictly greater, as TRL's ``RewardTrainer`` counts
its accuracy (``rewards_chosen > rewards_rejected`` in ``compute_loss``); a tie is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SIMILAR_WITHIN = 0.1


@dataclass(frozen=True, slots=True)
class Accuracy:
    """``correct`` of ``pairs``; ``value`` is None for no pairs."""

    correct: int
    pairs: int

    @property
    def value(self) -> float | None:
        return self.correct / self.pairs if self.pairs else None

    def to_dict(self) -> dict[str, Any]:
        return {"accuracy": self.value, "pairs": self.pairs}


@dataclass(frozen=True, slots=True)
class PairAccuracy:
    """Accuracy on every pair and on the two length-controlled subsets (see the module)."""

    overall: Accuracy
    similar_length: Accuracy
    chosen_shorter: Accuracy

    def to_dict(self) -> dict[str, Any]:
        """``{"accuracy", "pairs", "similar_length": {...}, "chosen_shorter": {...}}``."""
        return {
            **self.overall.to_dict(),
            "similar_length": self.similar_length.to_dict(),
            "chosen_shorter": self.chosen_shorter.to_dict(),
        }


def describe(record: Mapping[str, Any]) -> str:
    """`PairAccuracy.to_dict` in one line: ``0.812 (similar length 0.700 of 40, chosen shorter
    0.550 of 20)``."""

    def shown(part: Mapping[str, Any]) -> str:
        return "-" if part["accuracy"] is None else f"{part['accuracy']:.3f}"

    similar, shorter = record["similar_length"], record["chosen_shorter"]
    return (
        f"{shown(record)} (similar length {shown(similar)} of {similar['pairs']}, "
        f"chosen shorter {shown(shorter)} of {shorter['pairs']})"
    )


def similar_length(first: int, second: int, within: float = SIMILAR_WITHIN) -> bool:
    """Whether two lengths differ by less than ``within`` of the longer (two empty answers do)."""
    return abs(first - second) < within * max(first, second) or first == second


def pair_accuracy(
    chosen_rewards: Sequence[float],
    rejected_rewards: Sequence[float],
    chosen_lengths: Sequence[int],
    rejected_lengths: Sequence[int],
    *,
    within: float = SIMILAR_WITHIN,
) -> PairAccuracy:
    """The accuracy of rewards given to the two answers of each pair, overall and on the
    length-controlled subsets.

    Example:
        >>> pair_accuracy([1.0, 0.0], [0.0, 1.0], [100, 50], [95, 80]).to_dict()["similar_length"]
        {'accuracy': 1.0, 'pairs': 1}
    """
    count = len(chosen_rewards)
    if not len(rejected_rewards) == len(chosen_lengths) == len(rejected_lengths) == count:
        raise ValueError("one reward and one length per answer of each pair")
    right = [c > r for c, r in zip(chosen_rewards, rejected_rewards, strict=True)]
    similar = [similar_length(c, r, within) for c, r in zip(chosen_lengths, rejected_lengths, strict=True)]
    shorter = [c < r for c, r in zip(chosen_lengths, rejected_lengths, strict=True)]

    def among(selected: Sequence[bool]) -> Accuracy:
        return Accuracy(sum(r for r, s in zip(right, selected, strict=True) if s), sum(selected))

    return PairAccuracy(Accuracy(sum(right), count), among(similar), among(shorter))
