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
        similarity: Word-set Jaccard overlap at or above which a proposal merges into an
            existing criterion (unless their numbers or negations differ).
        retire_after: The prompt's steps in a row without variance before a criterion retires.
        flat_tolerance: Verdicts that spread no more than this count as the same.
        retire_only_elicited: Retire only criteria that elicitation added; hand-written and
            generated ones (often saturated on purpose: the essentials) stay.
    """

    pairs_per_prompt: int = 2
    max_new_per_pair: int = 3
    max_active: int = 12
    similarity: float = 0.6
    retire_after: int = 2
    flat_tolerance: float = 0.05
    retire_only_elicited: bool = True

    def __post_init__(self) -> None:
        for name in ("pairs_per_prompt", "max_new_per_pair", "max_active", "retire_after"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0.0 < self.similarity <= 1.0:
            raise ValueError(f"similarity must be in (0, 1], got {self.similarity!r}")
        if not 0.0 <= self.flat_tolerance < 1.0:
            raise ValueError(f"flat_tolerance must be in [0, 1), got {self.flat_tolerance!r}")
