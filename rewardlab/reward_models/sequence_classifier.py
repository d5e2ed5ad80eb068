"""`SequenceClassifierReward` (``reward_model``): the outcome reward model RLHF runs on - a
transformers ``AutoModelForSequenceClassification`` read at the conversation's last token.

What it follows:

- TRL's `RewardTrainer` (trl/trainer/reward_trainer.py): a Bradley-Terry model trained with
  ``-log sigmoid(r_chosen - r_rejected)`` on the logit a one-label sequence classifier gives the
  last token of the conversation, rendered and tokenized as ``_prepare_dataset`` does (see
  `rewardlab.reward_models.rendering`); right padding with an attention mask, as its collator
  pads.
- reward-bench's ``scripts/run_rm.py`` and ``rewardbench/models/pipeline.py``: the raw logit
  (``function_to_apply: none``) of the rendered conversation, the pad token falling back to the
  EOS token (in the tokenizer and in the model's config, which the model reads to find each
  row's last token), inputs cut to ``max_length`` from the left (``truncation_side = "left"``).
  rewardlab refuses an over-long sample by default instead (``truncation: refuse``, status
  ``invalid_input`` with the token counts): a cut conversation is a different conversation, and
  TRL's trainer drops such pairs rather than train on them. ``left`` and ``right`` score the cut
  and say so in ``details``.
- Multi-objective models (ArmoRM, reward-bench's ``rewardbench/models/armorm.py``): several
  outputs, read as named ``heads`` and combined by ``weights``; a model with its own code
  (``auto_map`` in its config) runs only with ``trust_remote_code: true``, from its folder, and
  ``output_field`` names the output it returns them in (ArmoRM's ``rewards`` are its objectives,
  its ``logits`` the gated score).

Samples are batched by length under ``max_batch_tokens`` (`length_batches`), the model is loaded
once per process and run under its lock (`model_lock`) in ``torch.inference_mode``, on the GPU
in bfloat16 when there is one (`placement`). The value is the raw output by default - for GRPO,
group normalisation removes the model's arbitrary offset and scale - or its sigmoid, or its
calibrated z-score, optionally clipped (`rewardlab.reward_models.shaping` says when each fits).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import InvalidInput
from rewardlab.prm.batching import length_batches
from rewardlab.prm.models import LoadedModel, ModelOption, has_custom_code, load_model, model_lock
from rewardlab.reward_models.output_options import RewardModelOutputOptions
from rewardlab.reward_models.placement import Dtype, placement
from rewardlab.reward_models.rendering import (
    Cut,
    Truncation,
    conversation_ids,
    has_chat_template,
    too_long,
)
from rewardlab.reward_models.shaping import Calibration, OutputShaping, Shaping
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import takes_options

Render = Literal["auto", "chat_template", "text"]


class SequenceClassifierOptions(RewardModelOutputOptions):
    """Options of `SequenceClassifierReward`."""

    model: ModelOption
    """The reward model's folder (or a GGUF file): weights, config and tokenizer."""
    output_field: str = "logits"
    """The output of the model's forward pass read as its scores (``rewards`` for ArmoRM's
    objectives, from its own code; ``logits`` for every transformers classifier)."""
    render: Render = "auto"
    """How a sample becomes the model's input: ``chat_template`` (the conversation through the
    tokenizer's chat template; a text prompt is a user message, a text completion an assistant
    message), ``text`` (``prompt + completion`` as plain text, as TRL trains on standard-format
    data), or ``auto``: the chat template when the tokenizer has one, else text."""
    append_eos: bool = True
    """With plain text, end it with the tokenizer's EOS token unless it ends with it already,
    as TRL's RewardTrainer does (the model was trained to score there)."""
    max_length: int | None = Field(default=None, ge=1)
    """Most tokens the model reads (default: its context length)."""
    truncation: Truncation = "refuse"
    """A longer input is ``refuse``d (status ``invalid_input``, with its token count), or cut:
    ``left`` drops its opening tokens (the end, where the score is read, stays; as reward-bench
    cuts), ``right`` its closing ones. A cut is scored with ``details.truncated: true``."""
    max_batch_tokens: int = Field(default=16384, ge=1)
    """Most tokens (longest x batch size) in one forward pass."""
    max_padding: float = Field(default=0.1, ge=0, lt=1)
    """Most of a batch that may be padding (`length_batches`)."""
    trust_remote_code: bool = False
    """Run the model's own code from its folder, when its config names some (``auto_map``);
    refused otherwise."""
    device: str | None = None
    """Where the model runs (``cpu``, ``cuda``, ``cuda:1``...); default: the GPU when there is
    one, else the CPU."""
    dtype: Dtype | None = None
    """The model's torch dtype; default: bfloat16 on a GPU, float32 on a CPU."""


@takes_options(SequenceClassifierOptions)
class SequenceClassifierReward(Reward):
    """A sequence-classification reward model's score of each completion (see the module
    docstring).

    The value is the model's output (or its heads' weighted sum), shaped; ``details`` has the
    unshaped ``raw`` value, the ``tokens`` read and whether the input was ``truncated``.

    Options: `SequenceClassifierOptions` (the model and its heads, how a sample is rendered and
    cut, the forward passes' budget, the output's shaping, where the model runs).

    Example:
        >>> reward = SequenceClassifierReward(model="path/to/rm")  # doctest: +SKIP
        >>> reward.score([Sample(prompt="2+2?", completion="4")])[0].value  # doctest: +SKIP
        3.25
    """

    name = "reward_model"
    io_bound = False

    def __init__(
        self,
        *,
        model: str | Path | LoadedModel,
        heads: dict[str, int] | None = None,
        weights: dict[str, float] | None = None,
        output_field: str = "logits",
        render: Render = "auto",
        append_eos: bool = True,
        max_length: int | None = None,
        truncation: Truncation = "refuse",
        max_batch_tokens: int = 16384,
        max_padding: float = 0.1,
        shaping: Shaping = "raw",
        calibration: str | Path | None = None,
        clip: tuple[float, float] | None = None,
        trust_remote_code: bool = False,
        device: str | None = None,
        dtype: Dtype | None = None,
        name: str | None = None,
    ):
        self.model_spec = model
        self.heads, self.weights = heads, weights
        self.output_field = output_field
        self.render, self.append_eos = render, append_eos
        self.max_length, self.truncation = max_length, truncation
        self.max_batch_tokens, self.max_padding = max_batch_tokens, max_padding
        self.shape = OutputShaping(
            shaping, Calibration.read(calibration) if calibration is not None else None, clip
        )
        self.trust_remote_code = trust_remote_code
        self.device, self.dtype = device, dtype
        if name is not None:
            self.name = name
        self._loaded: LoadedModel | None = None
        self._lock = threading.Lock()

    def loaded(self) -> LoadedModel:
        """The model, loaded on first use and checked against the options."""
        with self._lock:
            if self._loaded is None:
                kind = "sequence_classification"
                if has_custom_code(self.model_spec):
                    if not self.trust_remote_code:
                        raise ValueError(
                            f"model {self.model_spec}: its config names its own code (auto_map); "
                            "set trust_remote_code: true to run that code from the model's folder"
                        )
                    kind = "custom_sequence_classification"
                device, dtype = placement(self.device, self.dtype)
                loaded = load_model(self.model_spec, kind=kind, dtype=dtype, device=device)
                self._check(loaded)
                self._loaded = loaded
            return self._loaded

    def _check(self, loaded: LoadedModel) -> None:
        """Refuse a model the options cannot read; give it the pad token its batches need.
        (The outputs of a model with its own code are checked at its first forward pass.)"""
        tokenizer, config = loaded.tokenizer, loaded.model.config
        own_code = not type(loaded.model).__module__.startswith("transformers.")
        if self.render == "chat_template" and not has_chat_template(tokenizer):
            raise ValueError(
                f"model {loaded.name}: render: chat_template, but its tokenizer has no chat template"
            )
        if not own_code and self.output_field == "logits" and hasattr(config, "num_labels"):
            self._check_outputs(loaded.name, config.num_labels)
        pad = _pad_id(tokenizer)
        if pad is None:
            raise ValueError(f"model {loaded.name}: its tokenizer has neither a pad nor an EOS token")
        text_config = _text_config(config)
        with model_lock(loaded.model):
            if getattr(text_config, "pad_token_id", None) is None:
                # The classifier finds each row's last token by the pad id (reward-bench does the same).
                text_config.pad_token_id = pad

    def _check_outputs(self, model_name: str, outputs: int) -> None:
        if self.heads is None and outputs != 1:
            raise ValueError(
                f"model {model_name}: {outputs} outputs; name the ones to read with heads: {{name: index}}"
            )
        beyond = sorted(name for name, index in (self.heads or {}).items() if index >= outputs)
        if beyond:
            raise ValueError(f"model {model_name}: heads {beyond} point past its {outputs} outputs")

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await asyncio.to_thread(self._score_all, samples)

    def _score_all(self, samples: Sequence[Sample]) -> list[Score]:
        loaded = self.loaded()
        tokenizer = loaded.tokenizer
        chat_template = self.render == "chat_template" or (
            self.render == "auto" and has_chat_template(tokenizer)
        )
        limit = self.max_length or getattr(loaded.model.config, "max_position_embeddings", None)
        scores: list[Score | None] = [None] * len(samples)
        sequences: dict[int, list[int]] = {}
        cuts: dict[int, Cut] = {}
        for index, sample in enumerate(samples):
            who = sample.label(index)
            try:
                ids = conversation_ids(
                    sample, tokenizer, chat_template=chat_template, append_eos=self.append_eos
                )
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
                continue
            if not ids:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT, f"{who}: prompt and completion: no tokens"
                )
                continue
            if limit is not None and len(ids) > limit:
                if self.truncation == "refuse":
                    scores[index] = Score.failure(
                        Status.INVALID_INPUT,
                        too_long(who, len(ids), limit),
                        details={"tokens": len(ids), "max_length": limit},
                    )
                    continue
                cuts[index] = Cut(len(ids), limit, self.truncation)
                ids = ids[-limit:] if self.truncation == "left" else ids[:limit]
            else:
                cuts[index] = Cut(len(ids), len(ids), self.truncation)
            sequences[index] = ids
        lengths = {index: len(ids) for index, ids in sequences.items()}
        for batch in length_batches(lengths, self.max_batch_tokens, self.max_padding):
            try:
                out = self._forward(loaded, [sequences[index] for index in batch])
            except Exception as error:  # noqa: BLE001 - a model failure (memory, device) fails its batch only
                for index in batch:
                    who = samples[index].label(index)
                    reason = f"{who}: the reward model failed: {type(error).__name__}: {error}"
                    scores[index] = Score.failure(Status.ERROR, reason)
                continue
            rows = self._outputs(loaded.name, out).tolist()
            for index, row in zip(batch, rows, strict=True):
                scores[index] = self._score(samples[index].label(index), row, cuts[index])
        return [score for score in scores if score is not None]

    def _forward(self, loaded: LoadedModel, rows: list[list[int]]) -> Any:
        """The model's output for one right-padded batch."""
        import torch

        model = loaded.model
        device = next(model.parameters()).device
        pad = _text_config(model.config).pad_token_id  # what the model takes for padding
        longest = max(len(row) for row in rows)
        ids = torch.tensor([row + [pad] * (longest - len(row)) for row in rows], device=device)
        mask = torch.tensor([[1] * len(row) + [0] * (longest - len(row)) for row in rows], device=device)
        with model_lock(model), torch.inference_mode():
            return model(input_ids=ids, attention_mask=mask)

    def _outputs(self, model_name: str, out: Any) -> Any:
        """The named output as a ``batch x outputs`` float32 tensor on the CPU, checked
        against the heads (a `ValueError`: the options do not fit the model)."""
        values = getattr(out, self.output_field, None)
        if values is None and isinstance(out, tuple) and self.output_field == "logits":
            values = out[0]  # a model's own code may return a plain tuple
        if values is None:
            raise ValueError(f"model {model_name}: its output has no {self.output_field!r}")
        if values.dim() == 1:
            values = values.unsqueeze(-1)
        if values.dim() != 2:
            raise ValueError(
                f"model {model_name}: {self.output_field!r} has shape {tuple(values.shape)}, "
                "not batch x outputs"
            )
        self._check_outputs(model_name, values.shape[1])
        return values.float().cpu()

    def _score(self, who: str, row: list[float], cut: Cut) -> Score:
        if not all(math.isfinite(value) for value in row):
            return Score.failure(Status.ERROR, f"{who}: the reward model's output is not finite: {row}")
        breakdown: dict[str, float] = {}
        if self.heads is None:
            raw = row[0]
        else:
            breakdown = {name: row[index] for name, index in self.heads.items()}
            if self.weights is None:
                (raw,) = breakdown.values()
            else:
                raw = math.fsum(weight * breakdown[name] for name, weight in self.weights.items())
        details: dict[str, Any] = {"raw": raw, "tokens": cut.read, **cut.details()}
        reason = None
        if cut.truncated:
            reason = f"truncated ({cut.side}): read {cut.read} of {cut.total} tokens"
        return Score(self.shape(raw), breakdown=breakdown, reason=reason, details=details)

    def __getstate__(self) -> dict[str, Any]:
        # A model named by path reloads in the receiving process; one given in memory travels.
        return {**self.__dict__, "_loaded": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _pad_id(tokenizer: Any) -> int | None:
    pad: int | None = tokenizer.pad_token_id
    return pad if pad is not None else tokenizer.eos_token_id


def _text_config(config: Any) -> Any:
    """The config that holds the pad token id (a multimodal model's text config)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config
