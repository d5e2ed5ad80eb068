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
- Multi-objective models: several outputs, read as named ``heads`` and combined by
  ``weights``. A model with its own code (``auto_map`` in its config) runs only with
  ``trust_remote_code: true``, from its folder, loaded through the auto class its config maps
  (``AutoModelForSequenceClassification``, else ``AutoModel``), and ``output_field`` names the
  output its forward pass returns them in. ArmoRM (RLHFlow/ArmoRM-Llama3-8B-v0.1,
  ``modeling_custom.py``, ``LlamaForRewardModelWithGating``) returns its 19 objectives as
  ``rewards``, its gating network's weights over them as ``gating_output``, and the gated
  preference score - those weights times the objectives after its ``reward_transform_matrix`` -
  as ``score`` and again as ``logits`` (reward-bench's ``rewardbench/models/armorm.py`` reads
  ``logits``; its legacy pipeline read ``score``). When the output has a ``gating_output`` of
  one row per sample, the row is kept in ``details["gating"]``, by objective index.
- Models that score through a method of their own rather than their forward pass
  (``score_method``): InternLM2-Reward (internlm/internlm2-7b-reward, ``modeling_internlm2.py``,
  ``InternLM2ForRewardModel``; its config maps it to ``AutoModel`` only, as XTuner's
  xtuner/model/reward.py writes the ``auto_map`` of the reward models it saves) takes conversations in
  ``get_scores(tokenizer, conversations)``, renders each with its chat template, appends its
  reward token (``[UNUSED_TOKEN_130]``, id 92527: XTuner's docs/en/reward_model/
  modify_settings.md) and reads its value head at that last token; its forward pass asserts the
  token is there, so it cannot be read as a plain classifier. Such a method gets each sample's
  conversation (a text prompt as a user message, a text completion as an assistant message, as
  everywhere here), a batch at a time under the same lock and ``torch.inference_mode``; it
  returns one score per conversation: a flat list, as InternLM2's model card
  (InternLM/InternLM, model_cards/internlm2_reward.md) shows, one-number rows, a tensor of
  either, or for a batch of one a bare number (what a squeezed tensor of one gives). The
  batches are formed, and over-long conversations refused, by the token count of the
  conversation under the tokenizer's chat template (the method's own additions, such as the
  reward token, come on top); a method cannot be handed a cut conversation, so it is never cut.

Samples are batched by length under ``max_batch_tokens`` (`length_batches`), the model is loaded
once per process and run under its lock (`model_lock`) in ``torch.inference_mode``, on the GPU
in bfloat16 when there is one (`placement`). The value is the raw output by default - for GRPO,
group normalisation removes the model's arbitrary offset and scale - or its sigmoid, its
calibrated z-score, its z-score within its group in the call or by the running statistics of
every score seen, optionally clipped (`rewardlab.reward_models.shaping` says when each fits).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from rewardlab.errors import InvalidInput
from rewardlab.prm.batching import length_batches
from rewardlab.prm.models import (
    LoadedModel,
    ModelOption,
    custom_auto_classes,
    has_custom_code,
    load_model,
    model_lock,
)
from rewardlab.reward_models.output_options import RewardModelOutputOptions
from rewardlab.reward_models.placement import Dtype, placement
from rewardlab.reward_models.rendering import (
    Cut,
    Truncation,
    conversation,
    conversation_ids,
    has_chat_template,
    too_long,
)
from rewardlab.reward_models.shaping import Calibration, OutputShaping, Shaping
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import OptionError, takes_options

Render = Literal["auto", "chat_template", "text"]


class SequenceClassifierOptions(RewardModelOutputOptions):
    """Options of `SequenceClassifierReward`."""

    model: ModelOption
    """The reward model's folder (or a GGUF file): weights, config and tokenizer."""
    output_field: str = "logits"
    """The output of the model's forward pass read as its scores: ``logits`` for every
    transformers classifier; from a model's own code, whichever output holds them (ArmoRM:
    ``score`` or ``logits``, its gated score; ``rewards``, its objectives)."""
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
    score_method: str | None = Field(default=None, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    """The name of the model's own batch scoring method, called instead of its forward pass as
    ``method(tokenizer, conversations)`` with each sample's chat messages, one score per
    conversation back (InternLM2-Reward: ``get_scores``). Needs ``trust_remote_code: true``;
    the method renders the conversations itself, so ``render``, ``append_eos``,
    ``output_field`` and ``heads`` do not apply, and a conversation over ``max_length`` is
    refused, never cut."""
    device: str | None = None
    """Where the model runs (``cpu``, ``cuda``, ``cuda:1``...); default: the GPU when there is
    one, else the CPU."""
    dtype: Dtype | None = None
    """The model's torch dtype; default: bfloat16 on a GPU, float32 on a CPU."""

    @model_validator(mode="after")
    def _score_method_consistent(self) -> Self:
        if self.score_method is None:
            return self
        if not self.trust_remote_code:
            raise OptionError("score_method", "calls the model's own code: set trust_remote_code: true")
        unread = {
            "output_field": self.output_field != "logits",
            "heads": self.heads is not None,
            "render": self.render != "auto",
            "append_eos": not self.append_eos,
        }
        why = "the model's method renders each conversation and returns one score for it"
        for option, given in unread.items():
            if given:
                raise OptionError(option, f"is not read with score_method: {why}")
        if self.truncation != "refuse":
            why = "the model's method takes whole conversations: one too long is refused, never cut"
            raise OptionError("truncation", f"should be refuse with score_method: {why}")
        return self


@takes_options(SequenceClassifierOptions)
class SequenceClassifierReward(Reward):
    """A sequence-classification reward model's score of each completion (see the module
    docstring).

    The value is the model's output (or its heads' weighted sum, or what its ``score_method``
    returned), shaped; ``details`` has the unshaped ``raw`` value, the ``tokens`` read and
    whether the input was ``truncated`` (and the ``gating`` weights of a model that returns
    them; with ``shaping: group`` or ``running``, the statistics the value was shaped by).

    Options: `SequenceClassifierOptions` (the model and its heads or scoring method, how a
    sample is rendered and cut, the forward passes' budget, the output's shaping, where the
    model runs).

    Example:
        >>> reward = SequenceClassifierReward(model="path/to/rm")  # doctest: +SKIP
        >>> reward.score([Sample(prompt="2+2?", completion="4")])[0].value  # doctest: +SKIP
        3.25
    """

    name = "reward_model"
    io_bound = False
    uses_gpu = True

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
        group_field: str = "group_id",
        clip: tuple[float, float] | None = None,
        trust_remote_code: bool = False,
        score_method: str | None = None,
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
            shaping,
            Calibration.read(calibration) if calibration is not None else None,
            clip=clip,
            group_field=group_field,
        )
        self.scores_groups = shaping == "group"
        self.trust_remote_code, self.score_method = trust_remote_code, score_method
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
                    # ArmoRM maps its class to AutoModelForSequenceClassification; InternLM2-Reward
                    # maps its own to AutoModel only, which the classifier auto class refuses.
                    classes = custom_auto_classes(self.model_spec)
                    bare = "AutoModel" in classes and "AutoModelForSequenceClassification" not in classes
                    kind = "custom" if bare else "custom_sequence_classification"
                device, dtype = placement(self.device, self.dtype)
                loaded = load_model(self.model_spec, kind=kind, dtype=dtype, device=device)
                self._check(loaded)
                self._loaded = loaded
            return self._loaded

    def _check(self, loaded: LoadedModel) -> None:
        """Refuse a model the options cannot read; give it the pad token its batches need.
        (The outputs of a model with its own code are checked at its first forward pass; its
        ``score_method``, here, for existing.)"""
        tokenizer, config = loaded.tokenizer, loaded.model.config
        own_code = not type(loaded.model).__module__.startswith("transformers.")
        if self.score_method is not None:
            if not callable(getattr(loaded.model, self.score_method, None)):
                raise ValueError(
                    f"model {loaded.name}: its class {type(loaded.model).__name__} has no method "
                    f"{self.score_method!r} (score_method)"
                )
            if not has_chat_template(tokenizer):
                raise ValueError(
                    f"model {loaded.name}: score_method hands the model chat messages, rendered by "
                    "the tokenizer's chat template, and its tokenizer has none"
                )
            return
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
        scores = self._by_method(loaded, samples) if self.score_method else self._by_forward(loaded, samples)
        return self.shape.shape_scores(samples, scores)

    def _by_forward(self, loaded: LoadedModel, samples: Sequence[Sample]) -> list[Score]:
        """Unshaped scores from the model's forward pass at each conversation's last token."""
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
                _fail_batch(samples, batch, error, scores)
                continue
            rows = self._outputs(loaded.name, out).tolist()
            gates = _gating(out, len(batch))
            for position, (index, row) in enumerate(zip(batch, rows, strict=True)):
                gating = None if gates is None else gates[position]
                scores[index] = self._score(samples[index].label(index), row, cuts[index], gating)
        return [score for score in scores if score is not None]

    def _by_method(self, loaded: LoadedModel, samples: Sequence[Sample]) -> list[Score]:
        """Unshaped scores from the model's own ``score_method``, handed each sample's
        conversation a batch at a time (see the module docstring)."""
        import torch

        assert self.score_method is not None
        model, tokenizer = loaded.model, loaded.tokenizer
        method = getattr(model, self.score_method)
        limit = self.max_length or getattr(model.config, "max_position_embeddings", None)
        scores: list[Score | None] = [None] * len(samples)
        conversations: dict[int, list[dict[str, Any]]] = {}
        lengths: dict[int, int] = {}
        for index, sample in enumerate(samples):
            who = sample.label(index)
            try:
                prompt, completion = conversation(sample)
                tokens = len(conversation_ids(sample, tokenizer, chat_template=True, append_eos=False))
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
                continue
            if limit is not None and tokens > limit:
                reason = (
                    f"{who}: prompt and completion: {tokens} tokens, more than the {limit} the model "
                    f"reads ({self.score_method} takes whole conversations: none is cut)"
                )
                details = {"tokens": tokens, "max_length": limit}
                scores[index] = Score.failure(Status.INVALID_INPUT, reason, details=details)
                continue
            conversations[index], lengths[index] = [*prompt, *completion], tokens
        for batch in length_batches(lengths, self.max_batch_tokens, self.max_padding):
            try:
                with model_lock(model), torch.inference_mode():
                    returned = method(tokenizer, [conversations[index] for index in batch])
            except Exception as error:  # noqa: BLE001 - a model failure (memory, device) fails its batch only
                _fail_batch(samples, batch, error, scores)
                continue
            values = _method_scores(loaded.name, self.score_method, returned, len(batch))
            for index, value in zip(batch, values, strict=True):
                cut = Cut(lengths[index], lengths[index], self.truncation)
                scores[index] = self._score(samples[index].label(index), [value], cut, None)
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

    def _score(self, who: str, row: list[float], cut: Cut, gating: list[float] | None) -> Score:
        """The unshaped score of one sample's outputs (shaped with the whole call's scores)."""
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
        if gating is not None:
            details["gating"] = gating
        reason = None
        if cut.truncated:
            reason = f"truncated ({cut.side}): read {cut.read} of {cut.total} tokens"
        return Score(raw, breakdown=breakdown, reason=reason, details=details)

    def __getstate__(self) -> dict[str, Any]:
        # A model named by path reloads in the receiving process; one given in memory travels.
        return {**self.__dict__, "_loaded": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _fail_batch(
    samples: Sequence[Sample], batch: Sequence[int], error: Exception, scores: list[Score | None]
) -> None:
    """Fail the samples of a batch the model could not score, each with the error."""
    for index in batch:
        reason = f"{samples[index].label(index)}: the reward model failed: {type(error).__name__}: {error}"
        scores[index] = Score.failure(Status.ERROR, reason)


def _gating(out: Any, size: int) -> list[list[float]] | None:
    """Each sample's gating weights, when the model's output has them as one row per sample
    (ArmoRM's ``gating_output``)."""
    import torch

    gating = getattr(out, "gating_output", None)
    if not isinstance(gating, torch.Tensor) or gating.dim() != 2 or gating.shape[0] != size:
        return None
    rows: list[list[float]] = gating.float().cpu().tolist()
    return rows


def _method_scores(model_name: str, method: str, returned: Any, size: int) -> list[float]:
    """The scores a model's own scoring method returned for ``size`` conversations: a tensor or
    a list of one number (or one-number row) each, or one bare number for one conversation; a
    `ValueError` for anything else (the option names a method that does not score)."""
    values = returned.tolist() if hasattr(returned, "tolist") else returned
    if _is_number(values):
        values = [values]
    if isinstance(values, list | tuple):
        flat = [
            value[0] if isinstance(value, list | tuple) and len(value) == 1 else value for value in values
        ]
        if len(flat) == size and all(_is_number(value) for value in flat):
            return [float(value) for value in flat]
    raise ValueError(
        f"model {model_name}: {method} returned {returned!r:.200} for {size} conversations, "
        "not one score each"
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _pad_id(tokenizer: Any) -> int | None:
    pad: int | None = tokenizer.pad_token_id
    return pad if pad is not None else tokenizer.eos_token_id


def _text_config(config: Any) -> Any:
    """The config that holds the pad token id (a multimodal model's text config)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config
