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

from rewardlab.prm.formats import FAMILIES, FormatError, PRMFormat, PRMInput
from rewardlab.prm.models import LoadedModel, has_custom_code, load_model, load_value_head
from rewardlab.prm.trajectory import StepOptions, step_texts
from rewardlab.rewards.contract import InvalidInput, Reward, Sample, Score, Status, message_text
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
        model: A model folder (or a `LoadedModel`). A folder whose config names its own code
            (Qwen2.5-Math-PRM) loads that code from the folder.
        family: ``qwen_prm``, ``math_shepherd``, ``skywork`` or ``token_classification``.
        marker: The family's step marker, when the model was trained with another.
        aggregate: How step scores fold into one value (``min``, ``last``, ``mean``, ``product``...).
        how, pattern, max_steps, steps_field: Step finding (`StepOptions`; for ``skywork``,
            ``auto`` means lines, as Skywork splits).
        max_length: Most tokens the model reads (default: its context length).
        batch_tokens: Most tokens (longest x batch size) in one forward pass.
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
        self.batch_tokens = batch_tokens
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
                if self.format.family == "qwen_prm" and has_custom_code(self.model_spec):
                    kind = "custom"
                loaded = load_model(self.model_spec, kind=kind, dtype=self.dtype, device=self.device)
                head = None
                if self.format.family == "skywork":
                    head = getattr(loaded.model, "v_head", None) or load_value_head(
                        self.model_spec, self.dtype, self.device
                    )
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
                where = "" if isinstance(error, InvalidInput) else "completion: "
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {where}{error}")
        outputs = self._run(
            loaded, head, {i: x.input_ids[:limit] if limit else x.input_ids for i, x in inputs.items()}
        )
        for index, prm_input in inputs.items():
            scores[index] = self._score(
                samples[index].label(index), prm_input, outputs[index], loaded.tokenizer
            )
        return [score for score in scores if score is not None]

    def _run(self, loaded: LoadedModel, head: Any, sequences: dict[int, list[int]]) -> dict[int, Any]:
        """Each sequence's per-position outputs, in length-sorted batches under the budget."""
        import torch

        pad = loaded.tokenizer.pad_token_id
        pad = pad if pad is not None else (loaded.tokenizer.eos_token_id or 0)
        ordered = sorted(sequences, key=lambda i: len(sequences[i]), reverse=True)
        results: dict[int, Any] = {}
        position = 0
        with torch.inference_mode():
            while position < len(ordered):
                longest = len(sequences[ordered[position]])
                size = max(1, self.batch_tokens // max(1, longest))
                batch = ordered[position : position + size]
                position += len(batch)
                ids = torch.tensor(
                    [sequences[i] + [pad] * (longest - len(sequences[i])) for i in batch], device=self.device
                )
                mask = torch.tensor(
                    [[1] * len(sequences[i]) + [0] * (longest - len(sequences[i])) for i in batch],
                    device=self.device,
                )
                out = loaded.model(input_ids=ids, attention_mask=mask)
                if head is not None:
                    values = head(out.last_hidden_state)
                else:
                    values = out.logits if hasattr(out, "logits") else out[0]
                for row, index in enumerate(batch):
                    results[index] = values[row, : len(sequences[index])]
        return results

    def _score(self, who: str, prm_input: PRMInput, outputs: Any, tokenizer: Any) -> Score:
        read = outputs.shape[0]
        visible = [p for p in prm_input.positions if p < read]
        if not visible:
            return Score.failure(
                Status.INVALID_INPUT,
                f"{who}: completion: no step fits in the {read} tokens the model reads",
            )
        steps = self.format.scores(outputs, visible, tokenizer)
        details: dict[str, Any] = {"family": self.format.family, "tokens": read}
        reason = None
        if len(visible) < len(prm_input.positions):
            total = len(prm_input.positions)
            details["truncated"] = {"scored_steps": len(visible), "total_steps": total}
            reason = f"truncated: {len(visible)} of {total} steps fit in {read} tokens"
        return Score(
            value=aggregate_steps(steps, self.aggregate), steps=steps, reason=reason, details=details
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
