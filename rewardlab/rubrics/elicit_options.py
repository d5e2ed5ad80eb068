"""The knobs of online rubric elicitation, apart from the machinery (the command line reads
their defaults without loading the judge layer)."""

from dataclasses import dataclass


@dataclass(slots=True)
class ElicitationOptions:
    """Knobs of `RubricElicitor`.

    Attributes:
        pairs_per_prompt: Policy-vs-reference comparisons per prompt per step.
        max_new_per_pair: Criteria a comparison may propose.
        max_active: Most active criteria per prompt.
        similarity: Word-set Jaccard overlap at or above which a proposal merges.
        retire_after: Steps in a row without variance before a criterion retires.
        retire_hand_written: Whether hand-written criteria may retire too.
    """

    pairs_per_prompt: int = 2
    max_new_per_pair: int = 3
    max_active: int = 12
    similarity: float = 0.6
    retire_after: int = 2
    retire_hand_written: bool = False
