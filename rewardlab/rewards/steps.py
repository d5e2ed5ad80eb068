"""Step-level rewards: where a completion's steps are (`StepOptions`, the ``steps`` option of every
step reward), folding step scores into one value, and turning a group's step scores into per-step
advantages.

Folding is always an explicit, named choice (``min``, ``last``, ``mean``, ``sum``, ``product``,
``max``, ``bottom_10``): they mean different things - ``min`` says "as good as the worst step",
``last`` trusts the final state, ``product`` treats steps as independent chances of being right,
``bottom_10`` is the mean of the lowest tenth of the steps (at least one): the weak spots, less
noisy than the single worst.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardlab.errors import InvalidInput, StepSplitError
from rewardlab.rewards.options import OptionError
from rewardlab.rewards.step_splitting import How, Span, given_spans, split_steps

Aggregate = Literal["min", "last", "mean", "sum", "product", "max", "bottom_10"]
AGGREGATES: tuple[str, ...] = ("min", "last", "mean", "sum", "product", "max", "bottom_10")


class StepOptions(BaseModel):
    """Where the steps of a text completion are: the ``steps`` option of every step-level reward
    (``steps: {split: lines, max_steps: 12}``). Keys not given keep the reward's defaults."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    split: How = "auto"
    """How to split a completion into steps (`rewardlab.rewards.step_splitting`):
    ``paragraphs`` (at blank lines; a single paragraph at line breaks), ``lines``, ``markers``
    ("Step 1:", "## Step 2"), ``numbered`` ("1.", "2)"), ``regex`` (at each match of
    ``pattern``), or ``auto`` (markers if there are two or more, else numbered items, else
    paragraphs)."""
    pattern: str | None = None
    """The separator, a regular expression, for ``split: regex`` (and only for it)."""
    max_steps: int | None = Field(default=None, ge=1)
    """Merge the adjacent steps of the shortest combined length while there are more than this,
    so a judge is never asked about hundreds of one-line steps. Steps given in ``field`` are
    kept as given."""
    field: str = "steps"
    """A `Sample.fields` key that may hold the steps as a list of texts; used when present, so
    a dataset's labels (a ProcessBench first error) refer to its own steps."""

    @model_validator(mode="after")
    def _pattern_with_regex(self) -> StepOptions:
        if (self.split == "regex") != (self.pattern is not None):
            raise OptionError("pattern", "goes with split: regex, and only with it")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as error:
                raise OptionError("pattern", f"invalid regular expression: {error}") from None
        return self


def step_spans(text: str, fields: Mapping[str, Any], options: StepOptions) -> list[Span]:
    """The character spans of the steps of ``text``: the steps given in ``fields[options.field]``
    placed in it, else ``text`` split as ``options`` say. `InvalidInput` names the field when the
    given steps are not a list of texts found in order."""
    given = fields.get(options.field)
    if given is None:
        return split_steps(text, options.split, pattern=options.pattern, max_steps=options.max_steps)
    if not isinstance(given, Sequence) or isinstance(given, str):
        raise InvalidInput(options.field, f"must be a list of step texts, got {type(given).__name__}")
    try:
        return given_spans(text, given)
    except StepSplitError as error:
        raise InvalidInput(options.field, str(error)) from None


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
