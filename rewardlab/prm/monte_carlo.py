"""Monte-Carlo step labels (Math-Shepherd): how likely a solution is to still reach the right
answer after each of its steps, estimated by finishing it many times.

For step k, a policy model continues the solution from its first k steps ``n`` times; a rule
verifier (any `Reward`, e.g. ``math_answer`` against the sample's reference) grades each
finished solution. The **soft** label of step k is the fraction of continuations judged
correct; the **hard** label is whether any was (Math-Shepherd's two estimators). A step whose
prefix can no longer reach the answer is where the solution went wrong: the first hard-0 step
is the first error.

`MonteCarloStepReward` puts the soft labels in ``Score.steps`` (and the hard ones and the first
error in ``details``); `stepwise_rows` turns scored samples into TRL's stepwise-supervision
format (``prompt``, ``completions``, ``labels``) for training a PRM.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rewardlab.prm.models import EMBEDDED, LoadedModel, load_model, model_lock
from rewardlab.prm.trajectory import StepOptions, text_step_spans
from rewardlab.rewards.contract import InvalidInput, Reward, Sample, Score, Status, Usage
from rewardlab.rewards.registry import build
from rewardlab.rewards.steps import AGGREGATES, Aggregate, aggregate_steps


class Continuer(Protocol):
    """Finishes a partial solution ``n`` times."""

    def continuations(self, prompt: str, prefix: str, n: int) -> list[str]: ...


class LocalContinuer:
    """Continuations sampled from a local causal LM (a folder, a GGUF file or ``embedded``).

    Args:
        model: The policy.
        max_new_tokens: Most tokens of one continuation.
        temperature, top_p: Sampling.
        seed: Seeds each call (from the prompt and prefix too), so labels are reproducible.
        chat_template: Render the prompt as a user turn and the prefix as the start of the
            assistant's answer.
    """

    def __init__(
        self,
        model: str | Path | LoadedModel = EMBEDDED,
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.7,
        top_p: float = 1.0,
        seed: int = 0,
        chat_template: bool = False,
        dtype: str = "float32",
        device: str = "cpu",
    ):
        self.model_spec = model
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_p, self.seed = temperature, top_p, seed
        self.chat_template = chat_template
        self.dtype, self.device = dtype, device

    def continuations(self, prompt: str, prefix: str, n: int) -> list[str]:
        import torch

        loaded = load_model(self.model_spec, dtype=self.dtype, device=self.device)
        tokenizer = loaded.tokenizer
        if self.chat_template:
            head = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            text, special = head + prefix, False
        else:
            text, special = prompt + prefix, True
        ids = torch.tensor([tokenizer(text, add_special_tokens=special)["input_ids"]], device=self.device)
        key = f"{self.seed}\0{prompt}\0{prefix}".encode()
        generator_seed = int.from_bytes(hashlib.sha256(key).digest()[:4], "big")
        devices = [loaded.model.device] if loaded.model.device.type == "cuda" else []
        # The trainer's random state, on every device we touch, is left as it was.
        with model_lock(loaded.model), torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(generator_seed)
            out = loaded.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_new_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id
                if tokenizer.pad_token_id is not None
                else tokenizer.eos_token_id,
            )
        return tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True)


class MonteCarloStepReward(Reward):
    """Soft Monte-Carlo step labels as step rewards (see the module docstring).

    Args:
        verifier: The reward that grades a finished solution (a config or a `Reward`);
            ``value >= threshold`` counts as correct.
        continuer: The policy that finishes partial solutions (a config for `LocalContinuer`:
            ``{model: ..., max_new_tokens: ...}``, or any object with ``continuations``).
        n: Continuations per step.
        threshold: The verifier value that counts as correct.
        aggregate: How step labels fold into one value (``min`` by default).
        how, pattern, max_steps, steps_field: Step finding (`StepOptions`).
    """

    name = "monte_carlo_steps"
    io_bound = False

    def __init__(
        self,
        *,
        verifier: Reward | Mapping[str, Any],
        continuer: Continuer | Mapping[str, Any] | None = None,
        n: int = 8,
        threshold: float = 1.0,
        aggregate: Aggregate = "min",
        how: str = "auto",
        pattern: str | None = None,
        max_steps: int | None = None,
        steps_field: str = "steps",
        name: str | None = None,
    ):
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n!r}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.verifier = verifier if isinstance(verifier, Reward) else build(dict(verifier))
        self.continuer = (
            continuer
            if continuer is not None and not isinstance(continuer, Mapping)
            else LocalContinuer(**dict(continuer or {}))
        )
        self.n, self.threshold, self.aggregate = n, threshold, aggregate
        self.steps = StepOptions(how, pattern, max_steps, steps_field)  # type: ignore[arg-type]
        if name is not None:
            self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return [await self._score(sample, index) for index, sample in enumerate(samples)]

    async def _score(self, sample: Sample, index: int) -> Score:
        who = sample.label(index)
        try:
            if not isinstance(sample.completion, str):
                raise InvalidInput(
                    "completion", "Monte-Carlo labels continue a text solution; got chat messages"
                )
            spans = text_step_spans(sample, self.steps)
            if not spans:
                raise InvalidInput("completion", "no steps: the completion is empty")
            prompt = sample.prompt if isinstance(sample.prompt, str) else sample.prompt_text
        except InvalidInput as error:
            return Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
        steps = [sample.completion[start:end] for start, end in spans]
        soft, usage = [], Usage()
        for k, (_, end) in enumerate(spans, start=1):
            # The policy's own text up to the step's end and the whitespace that ends it; the
            # last step's label is the solution's own correctness, not a continuation's.
            rest = sample.completion[end:]
            prefix = sample.completion[: end + len(rest) - len(rest.lstrip())]
            try:
                finished = (
                    [""]
                    if k == len(spans)
                    else await asyncio.to_thread(self.continuer.continuations, prompt, prefix, self.n)
                )
            except Exception as error:  # noqa: BLE001 - a failed rollout fails this sample, not the batch
                reason = f"{who}: step {k}: continuing failed: {type(error).__name__}: {error}"
                return Score.failure(Status.ERROR, reason)
            graded = await self.verifier.ascore(
                [
                    Sample(
                        prompt=sample.prompt,
                        completion=(prefix + tail) if k < len(spans) else sample.completion,
                        reference=sample.reference,
                        fields=sample.fields,
                    )
                    for tail in finished
                ]
            )
            failed = next((g for g in graded if not g.ok), None)
            if failed is not None and failed.status is not Status.NOT_APPLICABLE:
                return Score.failure(failed.status, f"{who}: step {k}: the verifier failed: {failed.reason}")
            correct = [g.ok and (g.value or 0.0) >= self.threshold for g in graded]
            soft.append(sum(correct) / len(correct))
            usage = usage + sum((g.usage or Usage() for g in graded), Usage())
        hard = [value > 0 for value in soft]
        first_error = next((k for k, ok in enumerate(hard) if not ok), None)
        return Score(
            value=aggregate_steps(soft, self.aggregate),
            steps=soft,
            usage=usage,
            details={"hard_labels": hard, "first_error": first_error, "steps": steps, "n": self.n},
        )

    def close(self) -> None:
        self.verifier.close()


def stepwise_rows(
    samples: Sequence[Sample], scores: Sequence[Score], *, soft: bool = False
) -> list[dict[str, Any]]:
    """TRL's stepwise-supervision rows (``prompt`` as text, ``completions``: the steps,
    ``labels``: one per step) from samples scored by `MonteCarloStepReward`; failed samples are
    left out. Hard labels (booleans) by default - what TRL's PRM training reads; ``soft`` gives
    the fractions, for a trainer that regresses on them."""
    rows = []
    for sample, score in zip(samples, scores, strict=True):
        if not score.ok or score.steps is None:
            continue
        rows.append(
            {
                "prompt": sample.prompt if isinstance(sample.prompt, str) else sample.prompt_text,
                "completions": list(score.details["steps"]),
                "labels": list(score.steps) if soft else list(score.details["hard_labels"]),
            }
        )
    return rows
