"""`DiscriminativePRMReward`: step scores from a trained process reward model.

The completion is split into steps (`StepOptions`, or a ``steps`` field), laid out the way the
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
from typing import Any

from rewardlab.errors import FormatError, InvalidInput
from rewardlab.prm.batching import check_max_padding, length_batches
from rewardlab.prm.formats import FAMILIES, PRMFormat, PRMInput
from rewardlab.prm.models import LoadedModel, has_custom_code, load_model, load_value_head, model_lock
from rewardlab.prm.trajectory import StepOptions, step_texts
from rewardlab.rewards.contract import Reward, Sample, Score, Status, message_text
from rewardlab.rewards.steps import AGGREGATES, Aggregate, aggregate_steps

MODEL_KINDS = {
    "qwen_prm": "token_classification",
    "math_shepherd": "causal_lm",
    "skywork": "base",
    "token_classification": "token_classification",
}


class DiscriminativePRMReward(Reward):
    """Scores each step of a completion with a PRM (see the module docstring).

    Args:
        model: A model folder (or a `LoadedModel`).
        trust_remote_code: Run the model's own code from its folder, when its config names some
            (Qwen2.5-Math-PRM ships that way); refused otherwise.
        family: ``qwen_prm``, ``math_shepherd``, ``skywork`` or ``token_classification``.
        marker: The family's step marker, when the model was trained with another.
        aggregate: How step scores fold into one value (``min``, ``last``, ``mean``, ``product``...).
        how, pattern, max_steps, steps_field: Step finding (`StepOptions`; for ``skywork``,
            ``auto`` means lines, as Skywork splits).
        max_length: Most tokens the model reads (default: its context length).
        batch_tokens: Most tokens (longest x batch size) in one forward pass.
        max_padding: Most of a batch that may be padding (`length_batches`).
        dtype, device: Where the model runs.
    """

    name = "prm"
    io_bound = False

    def __init__(
        self,
        *,
        model: str | Path | LoadedModel,
        family: str,
        marker: str | None = None,
        aggregate: Aggregate = "min",
        how: str = "auto",
        pattern: str | None = None,
        max_steps: int | None = None,
        steps_field: str = "steps",
        max_length: int | None = None,
        batch_tokens: int = 16384,
        max_padding: float = 0.1,
        trust_remote_code: bool = False,
        dtype: str = "float32",
        device: str = "cpu",
        name: str | None = None,
    ):
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.model_spec = model
        self.format = PRMFormat.named(family, marker)
        self.aggregate = aggregate
        if family == "skywork" and how == "auto":
            how = "lines"  # Skywork's steps are lines: it splits the response at its step token
        self.steps = StepOptions(how, pattern, max_steps, steps_field)  # type: ignore[arg-type]
        self.max_length = max_length
        self.batch_tokens, self.max_padding = batch_tokens, check_max_padding(max_padding)
        self.trust_remote_code = trust_remote_code
        self.dtype, self.device = dtype, device
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
