"""`DiscriminativePRMReward`: step scores from a trained process reward model.

The completion is split into steps (the ``steps`` option, `StepOptions`), laid out the way the
model's family was trained (`formats.py`), and run in batches of similar length under a token
budget (right-padded, with an attention mask). Each step's score is in ``Score.steps`` (a
probability that the step is correct, for every family); ``aggregate`` folds them (``min`` by
default: a solution is as good as its worst step). An input longer than ``max_length`` is cut,
its unread steps left unscored and reported in ``details.truncated`` - never silently.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import FormatError, InvalidInput
from rewardlab.prm.batching import length_batches
from rewardlab.prm.formats import PRMFormat, PRMInput
from rewardlab.prm.models import (
    LoadedModel,
    ModelOption,
    has_custom_code,
    load_model,
    load_value_head,
    model_lock,
)
from rewardlab.prm.trajectory import step_texts
from rewardlab.rewards.contract import Reward, Sample, Score, Status, message_text
from rewardlab.rewards.options import RewardOptions, takes_options
from rewardlab.rewards.steps import Aggregate, StepOptions, aggregate_steps

MODEL_KINDS = {
    "qwen_prm": "token_classification",
    "math_shepherd": "causal_lm",
    "skywork": "base",
    "token_classification": "token_classification",
}


Family = Literal["qwen_prm", "math_shepherd", "skywork", "token_classification"]
DEFAULT_STEPS = StepOptions()


class DiscriminativePRMOptions(RewardOptions):
    """Options of `DiscriminativePRMReward`."""

    model: ModelOption
    """A model folder."""
    family: Family
    """How the model was trained to read steps and give their scores: ``qwen_prm``,
    ``math_shepherd``, ``skywork`` or ``token_classification`` (see `rewardlab.prm.formats`)."""
    marker: str | None = None
    """The family's step marker, when the model was trained with another."""
    aggregate: Aggregate = "min"
    """How step scores fold into the value (``min``: a solution is as good as its worst step)."""
    steps: StepOptions = DEFAULT_STEPS
    """Where the steps are (`StepOptions`); for ``skywork``, ``split: auto`` means lines, as
    Skywork splits."""
    max_length: int | None = Field(default=None, ge=1)
    """Most tokens the model reads (default: its context length)."""
    batch_tokens: int = Field(default=16384, ge=1)
    """Most tokens (longest x batch size) in one forward pass."""
    max_padding: float = Field(default=0.1, ge=0, lt=1)
    """Most of a batch that may be padding (`length_batches`)."""
    trust_remote_code: bool = False
    """Run the model's own code from its folder, when its config names some (Qwen2.5-Math-PRM
    ships that way); refused otherwise."""
    dtype: str = "float32"
    """The model's torch dtype."""
    device: str = "cpu"
    """Where the model runs (``cpu``, ``cuda``, ``cuda:1``...)."""


@takes_options(DiscriminativePRMOptions)
class DiscriminativePRMReward(Reward):
    """Scores each step of a completion with a PRM (see the module docstring).

    Options: `DiscriminativePRMOptions` (the model and its family, the steps and how they fold,
    the forward passes' budget).
    """

    name = "prm"
    io_bound = False

    def __init__(
        self,
        *,
        model: str | Path | LoadedModel,
        family: Family,
        marker: str | None = None,
        aggregate: Aggregate = "min",
        steps: StepOptions = DEFAULT_STEPS,
        max_length: int | None = None,
        batch_tokens: int = 16384,
        max_padding: float = 0.1,
        trust_remote_code: bool = False,
        dtype: str = "float32",
        device: str = "cpu",
        name: str | None = None,
    ):
        self.model_spec = model
        self.format = PRMFormat.named(family, marker)
        self.aggregate = aggregate
        if family == "skywork" and steps.split == "auto":
            # Skywork's steps are lines: it splits the response at its step token.
            steps = steps.model_copy(update={"split": "lines"})
        self.steps = steps
        self.max_length = max_length
        self.batch_tokens, self.max_padding = batch_tokens, max_padding
        self.trust_remote_code = trust_remote_code
        self.dtype, self.device = dtype, device
        self.uses_gpu = device.startswith("cuda")
        if name is not None:
            self.name = name
        self._loaded: tuple[LoadedModel, Any] | None = None
        self._lock = threading.Lock()

    def loaded(self) -> tuple[LoadedModel, Any]:
        """The model and, for a value-head family, its head (loaded on first use)."""
        with self._lock:
            if self._loaded is None:
                kind = MODEL_KINDS[self.format.family]
                if has_custom_code(self.model_spec):
                    if not self.trust_remote_code:
                        raise ValueError(
                            f"model {self.model_spec}: its config names its own code (auto_map); "
                            "set trust_remote_code: true to run that code from the model's folder"
                        )
                    kind = "custom"
                loaded = load_model(self.model_spec, kind=kind, dtype=self.dtype, device=self.device)
                head = None
                if self.format.family == "skywork":
                    head = getattr(loaded.model, "v_head", None)
                    if head is None and isinstance(self.model_spec, LoadedModel):
                        raise ValueError(
                            f"model {self.model_spec.name}: a skywork PRM in memory needs a v_head"
                        )
                    if head is None:
                        assert not isinstance(self.model_spec, LoadedModel)  # refused just above
                        head = load_value_head(self.model_spec, self.dtype, self.device)
                self._loaded = (loaded, head)
            return self._loaded

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await asyncio.to_thread(self._score_all, samples)

    def _score_all(self, samples: Sequence[Sample]) -> list[Score]:
        loaded, head = self.loaded()
        limit = self.max_length or getattr(loaded.model.config, "max_position_embeddings", None)
        scores: list[Score | None] = [None] * len(samples)
        inputs: dict[int, PRMInput] = {}
        for index, sample in enumerate(samples):
            try:
                question = message_text(sample.prompt, roles=("user",), field_name="prompt")
                inputs[index] = self.format.build(question, step_texts(sample, self.steps), loaded.tokenizer)
            except (InvalidInput, FormatError) as error:
                where = "" if isinstance(error, InvalidInput) else "prompt and completion: "
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {where}{error}")
        sequences = {i: x.input_ids[:limit] if limit else x.input_ids for i, x in inputs.items()}
        lengths = {i: len(ids) for i, ids in sequences.items()}
        for batch in length_batches(lengths, self.batch_tokens, self.max_padding):
            try:
                outputs = self._run(loaded, head, sequences, batch, {i: inputs[i].positions for i in batch})
            except Exception as error:  # noqa: BLE001 - a model failure (memory, device) fails its batch only
                for index in batch:
                    reason = f"{samples[index].label(index)}: the PRM failed: {type(error).__name__}: {error}"
                    scores[index] = Score.failure(Status.ERROR, reason)
                continue
            for index in batch:
                read = len(sequences[index])
                scores[index] = self._score(samples[index].label(index), inputs[index], read, outputs[index])
        return [score for score in scores if score is not None]

    def _run(
        self,
        loaded: LoadedModel,
        head: Any,
        sequences: dict[int, list[int]],
        batch: list[int],
        positions: dict[int, list[int]],
    ) -> dict[int, list[float]]:
        """Each sequence's step scores from one right-padded batch; only the outputs at the step
        markers are kept (a batch's full logits would otherwise stay alive until the end)."""
        import torch

        pad = loaded.tokenizer.pad_token_id
        pad = pad if pad is not None else (loaded.tokenizer.eos_token_id or 0)
        longest = len(sequences[batch[0]])
        ids = torch.tensor(
            [sequences[i] + [pad] * (longest - len(sequences[i])) for i in batch], device=self.device
        )
        mask = torch.tensor(
            [[1] * len(sequences[i]) + [0] * (longest - len(sequences[i])) for i in batch], device=self.device
        )
        with model_lock(loaded.model), torch.inference_mode():
            out = loaded.model(input_ids=ids, attention_mask=mask, use_cache=False)
            values = (
                head(out.last_hidden_state)
                if head is not None
                else (out.logits if hasattr(out, "logits") else out[0])
            )
            results = {}
            for row, index in enumerate(batch):
                visible = [p for p in positions[index] if p < len(sequences[index])]
                results[index] = self.format.scores(values[row], visible, loaded.tokenizer) if visible else []
        return results

    def _score(self, who: str, prm_input: PRMInput, read: int, steps: list[float]) -> Score:
        if not steps:
            return Score.failure(
                Status.INVALID_INPUT,
                f"{who}: completion: no step fits in the {read} tokens the model reads",
            )
        details: dict[str, Any] = {"family": self.format.family, "tokens": read}
        reason = None
        if len(steps) < len(prm_input.positions):
            total = len(prm_input.positions)
            details["truncated"] = {"scored_steps": len(steps), "total_steps": total}
            reason = f"truncated: {len(steps)} of {total} steps fit in {read} tokens"
        return Score(
            value=aggregate_steps(steps, self.aggregate), steps=steps, reason=reason, details=details
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
