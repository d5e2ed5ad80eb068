"""Step rewards from two causal LMs without any step labels: an RL-tuned policy and the reference
it was tuned from.

Both read the same tokens (one forward pass each per prompt's group, the prompt shared - see
`logprobs.py`); each completion token then has ``log pi_RL(token) - log pi_ref(token)``.

- **Progress advantage** (``progress_advantage``): for each step, aggregate each model's token
  log-probabilities over the step's tokens, then subtract: ``beta * (agg pi_RL - agg pi_ref)``.
  With ``token_aggregate: sum`` this is exactly the log-ratio of the step as one action, which the
  method shows recovers the optimal advantage; ``mean`` divides each model's sum by the step's
  length (a length-normalised variant).
- **Implicit PRM** (``implicit_prm``, PRIME / "free process rewards"): token rewards
  ``beta * log(pi_RL / pi_ref)``; a step's reward is their sum over the step (``form: step``), or
  the running sum up to the step's end (``form: cumulative``, the Q-value form).

``Score.steps`` holds the step values; ``aggregate`` folds them into ``Score.value`` by a named
rule (mean, sum, last, min, max, bottom_10; not product: two bad steps, both negative, would
multiply to a good one). ``details`` has the step spans and the whole trajectory's log-ratio. A
completion longer than the models can read is scored on the steps that fit, and says so
(``details.truncated``), never silently.
"""

from __future__ import annotations

import abc
import asyncio
import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import InvalidInput
from rewardlab.prm.logprobs import ScoringBudget, TokenLogprobScorer
from rewardlab.prm.models import EMBEDDED, LoadedModel, ModelOption, check_same_tokenizer, load_model
from rewardlab.prm.trajectory import TokenizedTrajectory, tokenize_sample
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import RewardOptions, takes_options
from rewardlab.rewards.steps import StepOptions, aggregate_steps

ModelSpec = str | Path | LoadedModel
#: The step aggregates that keep their meaning on signed log-ratios (``product`` does not: two
#: bad steps would multiply to a good one).
SignedAggregate = Literal["min", "last", "mean", "sum", "max", "bottom_10"]
DEFAULT_STEPS = StepOptions()


class LogRatioOptions(RewardOptions):
    """Options of the log-ratio step rewards (`ProgressAdvantageReward`, `ImplicitPRMReward`)."""

    policy: ModelOption
    """The RL-tuned model: a folder, a GGUF file, or ``embedded``."""
    reference: ModelOption = EMBEDDED
    """The model it was tuned from."""
    beta: float = Field(default=1.0, gt=0)
    """The scale of the log-ratio (the KL coefficient the policy was trained with, for the
    implicit PRM; 1 gives plain log-ratios)."""
    temperature: float = Field(default=1.0, gt=0)
    """The sampling temperature the policy was tuned at; both models' logits are divided by it.
    TRL's GRPO computes the policy's and the reference's log-probs at its ``temperature``
    (default 1.0; the KL penalty too), so the distributions RL regularised - whose log-ratio the
    methods read as an advantage - are those."""
    aggregate: SignedAggregate = "mean"
    """How step values fold into the value (``product`` is refused: log-ratios are signed)."""
    steps: StepOptions = DEFAULT_STEPS
    """Where the steps are (`StepOptions`)."""
    chat_template: bool = False
    """Render a text prompt as a user message with the tokenizer's chat template (a
    conversation prompt always is)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most prompt + completion tokens read (default: the models' context length)."""
    dtype: str = "float32"
    """The models' torch dtype."""
    device: str = "cpu"
    """Where the models run (``cpu``, ``cuda``, ``cuda:1``...)."""
    batch_tokens: int | None = Field(default=None, ge=1)
    """Most tokens in one forward pass (`ScoringBudget`): by default 8192 on a GPU and one
    completion at a time on a CPU, where batching gains nothing and copying the prompt's cache
    per batch row costs (measured in ``perf/implicit_throughput.py``); one at a time,
    completions that open alike run their shared opening once."""
    chunk_tokens: int = Field(default=1024, ge=1)
    """Most tokens of one completion run through the models at once (`ScoringBudget`)."""
    max_padding: float = Field(default=0.1, ge=0, lt=1)
    """Most of a batch that may be padding (`ScoringBudget`)."""


class LogRatioStepReward(Reward):
    """What progress advantage and the implicit PRM share (see the module docstring).

    Options: `LogRatioOptions` (the two models, the scale and temperature, the steps and how they
    fold, the forward passes' budget).
    """

    io_bound = False

    def __init__(
        self,
        *,
        policy: ModelSpec,
        reference: ModelSpec = EMBEDDED,
        beta: float = 1.0,
        temperature: float = 1.0,
        aggregate: SignedAggregate = "mean",
        steps: StepOptions = DEFAULT_STEPS,
        chat_template: bool = False,
        max_tokens: int | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        batch_tokens: int | None = None,
        chunk_tokens: int = 1024,
        max_padding: float = 0.1,
        name: str | None = None,
    ):
        self.policy_spec, self.reference_spec = policy, reference
        self.beta = float(beta)
        self.temperature = float(temperature)
        self.aggregate = aggregate
        self.steps = steps
        self.chat_template = chat_template
        self.max_tokens = max_tokens
        self.dtype, self.device = dtype, device
        self.uses_gpu = device.startswith("cuda")
        if batch_tokens is None:
            batch_tokens = 1 if device == "cpu" else 8192
        self.budget = ScoringBudget(batch_tokens, chunk_tokens, max_padding=max_padding)
        if name is not None:
            self.name = name
        self._models: tuple[LoadedModel, LoadedModel, TokenLogprobScorer, TokenLogprobScorer] | None = None
        self._loading = threading.Lock()

    @abc.abstractmethod
    def step_values(
        self, policy: list[float], reference: list[float], owners: Sequence[int], steps: int
    ) -> list[float]:
        """The value of each of the first ``steps`` steps from the tokens' log-probabilities."""

    def models(self) -> tuple[LoadedModel, LoadedModel, TokenLogprobScorer, TokenLogprobScorer]:
        """Both models and their scorers, loaded on first use (tokenizers checked to match)."""
        with self._loading:
            if self._models is None:
                policy = load_model(self.policy_spec, dtype=self.dtype, device=self.device)
                reference = load_model(self.reference_spec, dtype=self.dtype, device=self.device)
                check_same_tokenizer(policy, reference)
                self._models = (
                    policy,
                    reference,
                    TokenLogprobScorer(policy.model, self.budget, self.temperature),
                    TokenLogprobScorer(reference.model, self.budget, self.temperature),
                )
            return self._models

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await asyncio.to_thread(self._score_all, samples)

    def _score_all(self, samples: Sequence[Sample]) -> list[Score]:
        policy, reference, policy_scorer, reference_scorer = self.models()
        limits = [
            n for n in (self.max_tokens, _context_length(policy.model), _context_length(reference.model)) if n
        ]
        limit = min(limits) if limits else None
        scores: list[Score | None] = [None] * len(samples)
        groups: dict[tuple[int, ...], list[tuple[int, TokenizedTrajectory]]] = defaultdict(list)
        for index, sample in enumerate(samples):
            try:
                tokenized = tokenize_sample(
                    sample, policy.tokenizer, self.steps, chat_template=self.chat_template
                )
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
                continue
            groups[tokenized.prompt_ids].append((index, tokenized))
        runnable: list[tuple[tuple[int, ...], list[list[int]]]] = []
        for prompt_ids, members in groups.items():
            room = limit - len(prompt_ids) if limit else None
            if room is not None and room < 1:
                for index, _ in members:
                    scores[index] = Score.failure(
                        Status.INVALID_INPUT,
                        f"{samples[index].label(index)}: prompt: {len(prompt_ids)} tokens, more than the "
                        f"{limit} the models read",
                    )
                continue
            completions = [
                list(t.completion_ids[:room] if room is not None else t.completion_ids) for _, t in members
            ]
            runnable.append((prompt_ids, completions))
        policy_lp = policy_scorer.grouped_logprobs(runnable)
        reference_lp = reference_scorer.grouped_logprobs(runnable)
        for (prompt_ids, _), mine, theirs in zip(runnable, policy_lp, reference_lp, strict=True):
            members = groups[prompt_ids]
            if isinstance(mine, Exception) or isinstance(theirs, Exception):
                # a model failure (memory, device) fails its group, not the batch
                failure = mine if isinstance(mine, Exception) else theirs
                for index, _ in members:
                    reason = (
                        f"{samples[index].label(index)}: the models failed: "
                        f"{type(failure).__name__}: {failure}"
                    )
                    scores[index] = Score.failure(Status.ERROR, reason)
                continue
            for (index, tokenized), own, ref in zip(members, mine, theirs, strict=True):
                scores[index] = self._score(samples[index].label(index), tokenized, own, ref)
        return [score for score in scores if score is not None]

    def _score(
        self, who: str, tokenized: TokenizedTrajectory, policy: list[float], reference: list[float]
    ) -> Score:
        read = len(policy)
        owners = tokenized.owners[:read]
        total_steps = len(tokenized.spans)
        # A step is scored only if all its tokens were read: the steps before the first unread
        # token's (owners never decrease; context tokens, -1, say nothing).
        unread = [owner for owner in tokenized.owners[read:] if owner >= 0]
        complete = unread[0] if unread else total_steps
        if complete == 0:
            return Score.failure(
                Status.INVALID_INPUT,
                f"{who}: completion: its first step does not fit in the {read} tokens the models "
                "read after the prompt",
            )
        values = self.step_values(policy, reference, owners, complete)
        details: dict[str, Any] = {
            "step_spans": [list(span) for span in tokenized.spans[:complete]],
            "log_ratio": math.fsum(
                p - r for p, r, o in zip(policy, reference, owners, strict=True) if 0 <= o < complete
            ),
            "tokens": read,
        }
        reason = None
        if complete < total_steps:
            details["truncated"] = {"scored_steps": complete, "total_steps": total_steps}
            reason = f"truncated: {complete} of {total_steps} steps fit in the models' context"
        return Score(
            value=aggregate_steps(values, self.aggregate), steps=values, reason=reason, details=details
        )

    def __getstate__(self) -> dict[str, Any]:
        # Models named by path reload in the receiving process; models given in memory travel.
        state = {**self.__dict__, "_models": None, "_loading": None}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._loading = threading.Lock()


class ProgressAdvantageOptions(LogRatioOptions):
    """Options of `ProgressAdvantageReward`."""

    token_aggregate: Literal["sum", "mean"] = "sum"
    """How each model's token log-probabilities fold over a step: ``sum`` (the step's exact
    log-ratio as one action) or ``mean`` (length-normalised)."""


@takes_options(ProgressAdvantageOptions)
class ProgressAdvantageReward(LogRatioStepReward):
    """Progress advantage: per step, aggregate each model's token log-probabilities, then
    subtract (see the module docstring).

    Options: `ProgressAdvantageOptions` (``token_aggregate``, and those of `LogRatioOptions`).
    """

    name = "progress_advantage"

    def __init__(self, *, token_aggregate: Literal["sum", "mean"] = "sum", **options: Any):
        super().__init__(**options)
        self.token_aggregate = token_aggregate

    def step_values(
        self, policy: list[float], reference: list[float], owners: Sequence[int], steps: int
    ) -> list[float]:
        mine, theirs = _per_step(policy, owners, steps), _per_step(reference, owners, steps)
        fold = math.fsum if self.token_aggregate == "sum" else (lambda xs: math.fsum(xs) / max(1, len(xs)))
        return [self.beta * (fold(a) - fold(b)) for a, b in zip(mine, theirs, strict=True)]


class ImplicitPRMOptions(LogRatioOptions):
    """Options of `ImplicitPRMReward`."""

    form: Literal["step", "cumulative"] = "step"
    """A step's reward: the sum of its token rewards (``step``), or the running sum up to its
    end (``cumulative``, the Q-value form)."""
    aggregate: SignedAggregate | None = None  # type: ignore[assignment]  # widens the base's: None is the default
    """How step values fold into the value. By default the outcome reward the implicit PRM was
    trained as, ``beta * log(pi_RL(y) / pi_ref(y))`` over the whole completion: ``sum`` of the
    ``step`` form, ``last`` of the ``cumulative`` one - whatever the step split. PRIME-RL's
    EurusPRM-Stage2 model card ranks best-of-64 by this accumulated reward; its Stage 1 by the
    minimum over steps (``min``, the weakest step). A ``mean`` would divide the outcome reward by
    the number of steps, so that how a text is split changes its ranking."""


@takes_options(ImplicitPRMOptions)
class ImplicitPRMReward(LogRatioStepReward):
    """The implicit PRM: token rewards ``beta * log(pi_RL / pi_ref)`` summed per step, or
    cumulatively to each step's end (see the module docstring).

    Options: `ImplicitPRMOptions` (``form``, and those of `LogRatioOptions`).
    """

    name = "implicit_prm"

    def __init__(
        self,
        *,
        form: Literal["step", "cumulative"] = "step",
        aggregate: SignedAggregate | None = None,
        **options: Any,
    ):
        outcome: SignedAggregate = "sum" if form == "step" else "last"
        super().__init__(aggregate=aggregate or outcome, **options)
        self.form = form

    def step_values(
        self, policy: list[float], reference: list[float], owners: Sequence[int], steps: int
    ) -> list[float]:
        ratios = [p - r for p, r in zip(policy, reference, strict=True)]
        per_step = [self.beta * math.fsum(values) for values in _per_step(ratios, owners, steps)]
        if self.form == "step":
            return per_step
        running, total = [], 0.0
        for value in per_step:
            total += value
            running.append(total)
        return running


def _per_step(values: Sequence[float], owners: Sequence[int], steps: int) -> list[list[float]]:
    grouped: list[list[float]] = [[] for _ in range(steps)]
    for value, owner in zip(values, owners, strict=True):
        if 0 <= owner < steps:
            grouped[owner].append(value)
    return grouped


def _context_length(model: Any) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)
