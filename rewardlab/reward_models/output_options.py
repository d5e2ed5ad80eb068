"""The options every reward-model reward shares, in-process or served: which outputs are read
(``heads``), how they combine (``weights``), and how the value is shaped (``shaping``,
``calibration``, ``group_field``, ``clip``), checked together once."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from rewardlab.reward_models.shaping import Calibration, Shaping
from rewardlab.rewards.options import OptionError, PathOption, RewardOptions


class RewardModelOutputOptions(RewardOptions):
    """The outputs a reward model's value is made of, and its shaping."""

    heads: dict[str, Annotated[int, Field(ge=0)]] | None = None
    """Named outputs of a multi-objective model, ``{name: index}``; each one's value goes in
    ``Score.breakdown``. Default: the model's one output (a Bradley-Terry score)."""
    weights: dict[str, float] | None = None
    """How the heads combine into the value: ``sum(weight * head)`` over the heads named here
    (a head left out weighs 0). Needed with several heads; with one, its value is the value."""
    shaping: Shaping = "raw"
    """What the value is: the ``raw`` output (right for GRPO: group normalisation removes any
    offset and scale), its ``sigmoid``, ``normalized`` by a calibration file, ``group``: the
    z-score within the sample's group in the same call, or ``running``: the z-score by the mean
    and standard deviation of every score this reward has seen in this process (see
    `rewardlab.reward_models.shaping`)."""
    calibration: PathOption | None = None
    """A JSON file ``{"mean": ..., "std": ...}`` of the model's raw scores on reference data;
    needed by ``shaping: normalized`` and read only then."""
    group_field: str = "group_id"
    """With ``shaping: group``, the `Sample.fields` key naming a sample's group; samples
    without it are grouped by prompt."""
    clip: tuple[float, float] | None = None
    """``[lo, hi]``: the value is bounded to it, after shaping."""

    @model_validator(mode="after")
    def _outputs_consistent(self) -> Self:
        if self.heads is not None and not self.heads:
            raise OptionError("heads", "name at least one head, or leave heads out")
        if self.weights is not None:
            if self.heads is None:
                raise OptionError("weights", "weights combine named heads: set heads too")
            unknown = sorted(set(self.weights) - set(self.heads))
            if unknown:
                raise OptionError("weights", f"no head named {unknown}; heads: {sorted(self.heads)}")
        elif self.heads is not None and len(self.heads) > 1:
            raise OptionError("weights", "several heads need weights saying how they combine into the value")
        if self.shaping == "normalized":
            if self.calibration is None:
                raise OptionError("calibration", 'shaping: normalized needs a file {"mean": ..., "std": ...}')
            try:
                Calibration.read(self.calibration)
            except ValueError as error:
                raise OptionError("calibration", str(error)) from None
        elif self.calibration is not None:
            raise OptionError("calibration", "is read only with shaping: normalized")
        if self.group_field != "group_id" and self.shaping != "group":
            raise OptionError("group_field", "is read only with shaping: group")
        if self.clip is not None and not self.clip[0] < self.clip[1]:
            raise OptionError("clip", f"should be [lo, hi] with lo < hi, got {list(self.clip)}")
        return self
