"""`DPOImplicitReward` (``dpo_implicit``): the reward a DPO-trained model defines implicitly,
``beta * (log pi(y|x) - log pi_ref(y|x))`` over the completion's tokens, and its
reference-free variant ``beta * log pi(y|x)``.

What it follows: reward-bench's DPO inference (``rewardbench/dpo.py``, `DPOInference`;
``scripts/run_dpo.py``): the policy's and the reference's log-probabilities of the completion's
tokens, summed, then subtracted (``inference_step``); without a reference model, the policy's
alone, folded by ``--ref_free_type`` (``get_batch_logps``): ``sum``, ``avg`` (the per-token
mean; reward-bench's default for the reference-free run) or ``norm`` (the negative L2 norm of
the token log-probabilities). Here ``aggregate`` names the fold: ``sum`` (DPO's reward), ``mean``
(length-normalised: the sum divided by the completion's token count) and, reference-free only,
``norm``. With a reference, ``mean`` divides the summed log-ratio by the token count.

Where rewardlab departs from it:

- The value is multiplied by ``beta`` (1 by default: the plain log-ratio reward-bench reports,
  which only ranks); set it to the ``beta`` the model was trained with for DPO's reward scale.
- Tokenization follows TRL's `DPOTrainer` (see `rewardlab.reward_models.rendering`), the way the
  model was trained: the completion is what follows the prompt. reward-bench's ``tokenize_row``
  appends its ``text_chosen`` - the whole rendered conversation - to the rendered prompt, so the
  tokens it scores as the response include the prompt a second time.
- reward-bench cuts a long prompt to its last 128 tokens and the response to fit 2048; rewardlab
  refuses an input longer than ``max_length`` by default (``truncation: refuse``), or cuts it as
  ``truncation`` says and reports it in ``details``.

The log-probabilities come from `TokenLogprobScorer` (`rewardlab.prm.logprobs`): each prompt
runs once for all its completions, in batches of similar length.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.errors import InvalidInput
from rewardlab.prm.logprobs import ScoringBudget, TokenLogprobScorer
from rewardlab.prm.models import LoadedModel, ModelOption, check_same_tokenizer, load_model
from rewardlab.reward_models.placement import Dtype, placement
from rewardlab.reward_models.rendering import Cut, Truncation, prompt_and_completion_ids, too_long
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import OptionError, RewardOptions, takes_options

ModelSpec = str | Path | LoadedModel
DPOAggregate = Literal["sum", "mean", "norm"]


class DPOImplicitOptions(RewardOptions):
    """Options of `DPOImplicitReward`."""

    policy: ModelOption
    """The DPO-trained model: a folder, a GGUF file, or ``embedded``."""
    reference: ModelOption | None
    """The model it was trained from; ``null`` for the reference-free reward ``beta * log pi``."""
    beta: float = Field(default=1.0, gt=0)
    """The scale of the reward: DPO's ``beta`` (the one the model was trained with), or 1 for
    the plain log-ratio."""
    aggregate: DPOAggregate = "sum"
    """How the completion's token values fold: ``sum`` (DPO's reward), ``mean`` (divided by the
    token count: length-normalised), or ``norm`` (reference-free only: minus the L2 norm of the
    token log-probabilities, as reward-bench's ``--ref_free_type norm``)."""
    chat_template: bool = False
    """Render a text prompt as a user message with the tokenizer's chat template (a
    conversation always is), for a model trained on conversations."""
    append_eos: bool = True
    """With plain text, end the completion with the EOS token unless it ends with it already,
    as TRL's DPOTrainer and reward-bench do (its probability is part of the reward)."""
    max_length: int | None = Field(default=None, ge=1)
    """Most prompt + completion tokens read (default: the models' context length)."""
    truncation: Truncation = "refuse"
    """A longer input is ``refuse``d (status ``invalid_input`` with its token count), or cut:
    ``left`` drops the prompt's opening tokens (the completion stays whole), ``right`` the
    completion's closing ones. A cut is scored with ``details.truncated: true``."""
    batch_tokens: int | None = Field(default=None, ge=1)
    """Most completion tokens in one forward pass (`ScoringBudget`): by default 8192 on a GPU
    and one completion at a time on a CPU, where batching gains nothing."""
    chunk_tokens: int = Field(default=1024, ge=1)
    """Most tokens of one completion run through the models at once (`ScoringBudget`)."""
    max_padding: float = Field(default=0.1, ge=0, lt=1)
    """Most of a batch that may be padding (`ScoringBudget`)."""
    device: str | None = None
    """Where the models run; default: the GPU when there is one, else the CPU."""
    dtype: Dtype | None = None
    """The models' torch dtype; default: bfloat16 on a GPU, float32 on a CPU."""

    @model_validator(mode="after")
    def _norm_is_reference_free(self) -> DPOImplicitOptions:
        if self.aggregate == "norm" and self.reference is not None:
            raise OptionError(
                "aggregate", "norm is for the reference-free reward (reference: null); use sum or mean"
            )
        return self


@takes_options(DPOImplicitOptions)
class DPOImplicitReward(Reward):
    """The implicit reward of a DPO-trained model (see the module docstring).

    ``details`` has the completion's summed log-probability under the policy
    (``policy_logprob``) and the reference (``reference_logprob``), the ``tokens`` scored and
    whether the input was ``truncated``.

    Options: `DPOImplicitOptions` (the two models, the scale and the fold, the rendering and
    the cut, the forward passes' budget, where the models run).

    Example:
        >>> reward = DPOImplicitReward(policy="path/to/dpo", reference="path/to/sft")  # doctest: +SKIP
        >>> reward.score([Sample(prompt="2+2?", completion="4")])[0].value  # doctest: +SKIP
        1.7
    """

    name = "dpo_implicit"
    io_bound = False
    uses_gpu = True

    def __init__(
        self,
        *,
        policy: ModelSpec,
        reference: ModelSpec | None,
        beta: float = 1.0,
        aggregate: DPOAggregate = "sum",
        chat_template: bool = False,
        append_eos: bool = True,
        max_length: int | None = None,
        truncation: Truncation = "refuse",
        batch_tokens: int | None = None,
        chunk_tokens: int = 1024,
        max_padding: float = 0.1,
        device: str | None = None,
        dtype: Dtype | None = None,
        name: str | None = None,
    ):
        self.policy_spec, self.reference_spec = policy, reference
        self.beta = float(beta)
        self.aggregate = aggregate
        self.chat_template, self.append_eos = chat_template, append_eos
        self.max_length, self.truncation = max_length, truncation
        self.batch_tokens, self.chunk_tokens, self.max_padding = batch_tokens, chunk_tokens, max_padding
        self.device, self.dtype = device, dtype
        if name is not None:
            self.name = name
        self._models: tuple[LoadedModel, TokenLogprobScorer, TokenLogprobScorer | None, int | None] | None = (
            None
        )
        self._loading = threading.Lock()

    def models(self) -> tuple[LoadedModel, TokenLogprobScorer, TokenLogprobScorer | None, int | None]:
        """The policy, its scorer, the reference's scorer (None reference-free) and the most
        tokens both read; loaded on first use, the tokenizers checked to match."""
        with self._loading:
            if self._models is None:
                device, dtype = placement(self.device, self.dtype)
                batch_tokens = self.batch_tokens or (1 if device == "cpu" else 8192)
                budget = ScoringBudget(batch_tokens, self.chunk_tokens, max_padding=self.max_padding)
                policy = load_model(self.policy_spec, dtype=dtype, device=device)
                loaded = [policy]
                reference_scorer = None
                if self.reference_spec is not None:
                    reference = load_model(self.reference_spec, dtype=dtype, device=device)
                    check_same_tokenizer(policy, reference)
                    loaded.append(reference)
                    reference_scorer = TokenLogprobScorer(reference.model, budget)
                limits = [self.max_length, *(_context_length(model.model) for model in loaded)]
                limit = min((n for n in limits if n), default=None)
                self._models = (policy, TokenLogprobScorer(policy.model, budget), reference_scorer, limit)
            return self._models

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await asyncio.to_thread(self._score_all, samples)

    def _score_all(self, samples: Sequence[Sample]) -> list[Score]:
        policy, policy_scorer, reference_scorer, limit = self.models()
        scores: list[Score | None] = [None] * len(samples)
        groups: dict[tuple[int, ...], list[tuple[int, list[int], Cut]]] = defaultdict(list)
        for index, sample in enumerate(samples):
            who = sample.label(index)
            try:
                prompt_ids, completion_ids = prompt_and_completion_ids(
                    sample, policy.tokenizer, chat_template=self.chat_template, append_eos=self.append_eos
                )
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
                continue
            fitted = self._fit(who, prompt_ids, completion_ids, limit)
            if isinstance(fitted, Score):
                scores[index] = fitted
                continue
            prompt_ids, completion_ids, cut = fitted
            groups[tuple(prompt_ids)].append((index, completion_ids, cut))
        runnable = [(prompt, [ids for _, ids, _ in members]) for prompt, members in groups.items()]
        mine = policy_scorer.grouped_logprobs(runnable)
        theirs = reference_scorer.grouped_logprobs(runnable) if reference_scorer else [None] * len(runnable)
        for (prompt, _), own, ref in zip(runnable, mine, theirs, strict=True):
            failure = next((result for result in (own, ref) if isinstance(result, Exception)), None)
            for position, (index, _, cut) in enumerate(groups[prompt]):
                who = samples[index].label(index)
                if failure is not None:  # a model failure (memory, device) fails its group, not the batch
                    reason = f"{who}: the models failed: {type(failure).__name__}: {failure}"
                    scores[index] = Score.failure(Status.ERROR, reason)
                    continue
                assert not isinstance(own, Exception) and not isinstance(ref, Exception)
                reference_values = None if ref is None else ref[position]
                scores[index] = self._score(who, own[position], reference_values, len(prompt), cut)
        return [score for score in scores if score is not None]

    def _fit(
        self, who: str, prompt_ids: list[int], completion_ids: list[int], limit: int | None
    ) -> tuple[list[int], list[int], Cut] | Score:
        """The prompt and completion cut to ``limit`` tokens as ``truncation`` says, or the
        failure of a sample that cannot be."""
        total = len(prompt_ids) + len(completion_ids)
        if limit is None or total <= limit:
            return prompt_ids, completion_ids, Cut(total, total, self.truncation)
        refused = Score.failure(
            Status.INVALID_INPUT,
            too_long(who, total, limit),
            details={
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(completion_ids),
                "max_length": limit,
            },
        )
        if self.truncation == "left":
            kept = limit - len(completion_ids)
            if kept < 1:  # the completion alone does not fit with one token of context
                return refused
            return prompt_ids[-kept:], completion_ids, Cut(total, limit, "left")
        if self.truncation == "right":
            room = limit - len(prompt_ids)
            if room < 1:  # the prompt alone fills the context
                return refused
            return prompt_ids, completion_ids[:room], Cut(total, limit, "right")
        return refused

    def _score(
        self, who: str, policy: list[float], reference: list[float] | None, prompt_tokens: int, cut: Cut
    ) -> Score:
        values = policy if reference is None else [p - r for p, r in zip(policy, reference, strict=True)]
        if not all(math.isfinite(value) for value in values):
            return Score.failure(Status.ERROR, f"{who}: a token's log-probability is not finite")
        if self.aggregate == "sum":
            folded = math.fsum(values)
        elif self.aggregate == "mean":
            folded = math.fsum(values) / len(values)
        else:
            folded = -math.sqrt(math.fsum(value * value for value in values))
        details: dict[str, Any] = {
            "policy_logprob": math.fsum(policy),
            "tokens": len(values),
            "prompt_tokens": prompt_tokens,
            **cut.details(),
        }
        if reference is not None:
            details["reference_logprob"] = math.fsum(reference)
        reason = f"truncated ({cut.side}): read {cut.read} of {cut.total} tokens" if cut.truncated else None
        return Score(self.beta * folded, reason=reason, details=details)

    def __getstate__(self) -> dict[str, Any]:
        # Models named by path reload in the receiving process; models given in memory travel.
        return {**self.__dict__, "_models": None, "_loading": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._loading = threading.Lock()


def _context_length(model: Any) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)
