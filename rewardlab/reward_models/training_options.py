"""What `rewardlab.reward_models.training` is told (`TrainingOptions`, every field a keyword of
`train_reward_model` and a ``rewardlab train-rm`` option) and what it reports after each epoch
(`EpochMetrics`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewardlab.prm.models import EMBEDDED
from rewardlab.reward_models.pair_accuracy import describe

Mode = Literal["head", "full", "lora"]


class TrainingOptions(BaseModel):
    """How `train_reward_model` trains (every field a keyword of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = "head"
    """``head`` (fit the score head on cached features of the frozen backbone), ``full`` or
    ``lora`` (through TRL's ``RewardTrainer``)."""
    base_model: str | Path = EMBEDDED
    """The starting model: a causal LM or a one-output sequence classifier (a folder, a GGUF
    file, or ``embedded``: SmolLM2-135M-Instruct)."""
    epochs: int = Field(default=3, ge=1)
    """Passes over the training pairs."""
    learning_rate: float | None = Field(default=None, gt=0)
    """Default: 1e-2 in head mode (a linear head on scaled features); ``RewardConfig``'s 1e-4
    otherwise."""
    batch_size: int | None = Field(default=None, ge=1)
    """Pairs per optimizer step. Default: 32 in head mode; ``RewardConfig``'s 8 otherwise."""
    max_length: int | None = Field(default=1024, ge=1)
    """Most tokens of one answer with its prompt; longer pairs are left out (and counted).
    ``None``: the model's context length."""
    margin_column: str | None = "margin"
    """The column read as each pair's margin, when the data has it: the loss then asks the chosen
    reward to exceed the rejected one by it, as ``RewardTrainer`` reads a ``margin`` column.
    ``None`` reads no margin."""
    center_rewards_coefficient: float | None = Field(default=None, ge=0)
    """Adds ``coefficient * mean((r_chosen + r_rejected) ** 2)`` to the loss, pulling rewards
    towards mean zero (``RewardConfig.center_rewards_coefficient``; TRL suggests 0.01)."""
    weight_decay: float = Field(default=0.0, ge=0)
    """AdamW's decoupled weight decay."""
    lora_r: int = Field(default=16, ge=1)
    """LoRA rank (mode ``lora``)."""
    lora_alpha: int = Field(default=32, ge=1)
    """LoRA scaling numerator (mode ``lora``)."""
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    """Dropout on the LoRA path (mode ``lora``)."""
    lora_target_modules: str | list[str] = "all-linear"
    """Layers that get adapters (mode ``lora``): peft's ``all-linear``, or module names."""
    save_steps: int | None = Field(default=None, ge=1)
    """A checkpoint every this many steps; default: one per epoch (modes ``full`` and ``lora``)."""
    save_total_limit: int | None = Field(default=None, ge=1)
    """Most checkpoints kept (the oldest go first); default: all."""
    resume: bool | str = False
    """Continue from the last checkpoint in the output folder (``True``) or from the checkpoint
    folder named; the epochs before it stay in the metrics (modes ``full`` and ``lora``)."""
    overwrite: bool = False
    """Train into an output folder that is not empty (its checkpoints are removed first, so that
    a later resume cannot pick one of them)."""
    feature_cache: Path | None = None
    """Where head mode keeps the features, keyed by the model's weights and the token ids;
    default: ``reward-model-features`` in rewardlab's cache folder."""
    inference_batch_size: int = Field(default=16, ge=1)
    """Sequences per forward pass when computing features or dev rewards."""
    device: str | None = None
    """``cpu``, ``cuda``, ...; default: the GPU when there is one (``use_cpu`` otherwise)."""
    seed: int = 0
    """Seeds the fresh head, the shuffling and the trainer."""
    trainer_options: dict[str, Any] = Field(default_factory=dict)
    """More ``trl.RewardConfig`` fields (e.g. ``gradient_checkpointing``, ``warmup_ratio``);
    they override the values set here (modes ``full`` and ``lora``)."""

    @model_validator(mode="after")
    def _consistent(self) -> TrainingOptions:
        if self.mode == "head" and self.resume:
            raise ValueError(
                "resume: head mode keeps no checkpoints; its features are cached, so a new run "
                "refits the head in seconds"
            )
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite exclude each other")
        return self


@dataclass(frozen=True, slots=True)
class EpochMetrics:
    """What one epoch ended with: the mean train loss; the train accuracy (in head mode, of the
    head at the epoch's end; in modes ``full`` and ``lora``, ``RewardTrainer``'s running
    accuracy over the epoch); and the dev loss and accuracies when there is a dev set."""

    epoch: int
    train_loss: float
    train_accuracy: float | None = None
    dev: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "train_loss": self.train_loss,
            "train_accuracy": self.train_accuracy,
            "dev": self.dev,
        }

    def line(self) -> str:
        """e.g. ``epoch 2: train loss 0.4121, dev accuracy 0.812 (similar length ...)``."""
        text = f"epoch {self.epoch}: train loss {self.train_loss:.4f}"
        if self.dev is not None:
            text += f", dev accuracy {describe(self.dev)}"
        return text


OnEpoch = Callable[[EpochMetrics], None]
