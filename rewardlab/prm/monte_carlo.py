"""Monte-Carlo step labels (Math-Shepherd): how likely a solution is to still reach the right
answer after each of its steps, estimated by finishing it many times.

For step k, a policy model continues the solution from its first k steps ``n`` times; a rule
verifier (any `Reward`, e.g. ``math_answer`` against the sample's reference) grades each
finished solution. The **soft** label of step k is the fraction of continuations judged
correct; the **hard** label is whether any was (Math-Shepherd's two estimators). A step whose
prefix can no longer reach the answer is where the solution went wrong: the first hard-0 step
is the first error.

`MonteCarloStepReward` puts the soft labels in ``Score.steps`` (and the hard ones, the first
error and how many continuations of each step stopped at the token limit in ``details``);
`stepwise_rows` turns scored samples into TRL's stepwise-supervision format (``prompt``,
``completions``, ``labels``) for training a PRM; `train_prm` trains on them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import InvalidInput
from rewardlab.llm.backends import BackendConfig, ClientConfig
from rewardlab.prm.continuers import Continuation, ContinuationError, Continuer, checked, continuer_from
from rewardlab.prm.models import EMBEDDED
from rewardlab.prm.trajectory import text_step_spans
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage, message_text
from rewardlab.rewards.options import OptionError, RewardOptions, RewardSpec, takes_options
from rewardlab.rewards.registry import built
from rewardlab.rewards.steps import Aggregate, StepOptions, aggregate_steps

DEFAULT_STEPS = StepOptions()
#: Options only a local policy takes, and only a served one.
_LOCAL_ONLY = ("model", "top_p", "chat_template", "dtype", "device")
_SERVED_ONLY = ("client",)


class ContinuerConfig(BaseModel):
    """The policy that finishes partial solutions: a local model (`LocalContinuer`), or - with a
    ``backend`` - a model a server serves (`BackendContinuer`). Options not given keep the
    continuer's defaults."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    backend: BackendConfig | None = None
    """A backend config: the policy is the model it serves, and it must be able to continue an
    assistant message (its ``continue_final``). Without one the policy runs in this process."""
    client: ClientConfig | None = None
    """How the backend is called (with a ``backend`` only)."""
    model: str = EMBEDDED
    """The local policy: a folder, a GGUF file or ``embedded`` (without a ``backend`` only)."""
    max_tokens: int = Field(default=256, ge=1)
    """Most tokens of one continuation."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus sampling (local policy only)."""
    seed: int = 0
    """Seeds each call, with the prompt and prefix (and the sample number, served), so labels are
    reproducible."""
    chat_template: bool = False
    """Render a text prompt as a user turn and the prefix as the start of the assistant's answer
    (local policy only; a chat prompt always is)."""
    dtype: str = "float32"
    """The local policy's torch dtype."""
    device: str = "cpu"
    """Where the local policy runs."""

    @model_validator(mode="after")
    def _options_of_the_kind(self) -> ContinuerConfig:
        wrong = _LOCAL_ONLY if self.backend is not None else _SERVED_ONLY
        given = sorted(set(wrong) & self.model_fields_set)
        if given:
            kind = "a served policy (with a backend)" if self.backend is not None else "a local policy"
            raise OptionError(given[0], f"is no option of {kind}")
        return self

    def continuer(self) -> Continuer:
        """The continuer these options describe."""
        return continuer_from(self.model_dump(exclude_unset=True))


def _continues(spec: Any) -> Any:
    if not callable(getattr(spec, "continuations", None)):
        raise ValueError(f"should have a continuations(prompt, prefix, n) method, got {type(spec).__name__}")
    return spec


class MonteCarloOptions(RewardOptions):
    """Options of `MonteCarloStepReward`."""

    verifier: RewardSpec
    """The reward that grades a finished solution, e.g. ``{type: math_answer}``; ``value >=
    threshold`` counts as correct."""
    continuer: ContinuerConfig | SkipJsonSchema[Annotated[Any, AfterValidator(_continues)]] | None = None
    """The policy that finishes partial solutions (default: the embedded model, locally); from
    Python, any `Continuer` too."""
    n: int = Field(default=8, ge=1)
    """Continuations per step."""
    threshold: float = 1.0
    """The verifier value that counts as correct."""
    aggregate: Aggregate = "min"
    """How step labels fold into the value."""
    steps: StepOptions = DEFAULT_STEPS
    """Where the steps are (`StepOptions`)."""


@takes_options(MonteCarloOptions)
class MonteCarloStepReward(Reward):
    """Soft Monte-Carlo step labels as step rewards (see the module docstring).

    Options: `MonteCarloOptions` (the verifier, the continuing policy, continuations per step,
    the steps and how they fold).
    """

    name = "monte_carlo_steps"
    io_bound = False

    def __init__(
        self,
        *,
        verifier: Reward | Mapping[str, Any],
        continuer: Continuer | ContinuerConfig | Mapping[str, Any] | None = None,
        n: int = 8,
        threshold: float = 1.0,
        aggregate: Aggregate = "min",
        steps: StepOptions = DEFAULT_STEPS,
        name: str | None = None,
    ):
        self.verifier = built(verifier, "verifier")
        if continuer is None or isinstance(continuer, ContinuerConfig):
            continuer = (continuer or ContinuerConfig()).continuer()
        self.continuer = continuer_from(continuer)
        self.io_bound = bool(getattr(self.continuer, "io_bound", False))
        self.n, self.threshold, self.aggregate = n, threshold, aggregate
        self.steps = steps
        if name is not None:
            self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        if not self.io_bound:
            # A local policy takes its turns anyway, and sampling it while a local verifier
            # seeds the same torch generator would make the labels depend on timing.
            return [await self._score(sample, i) for i, sample in enumerate(samples)]
        session = getattr(self.continuer, "session", contextlib.nullcontext)
        async with session():
            # A served policy answers many continuations at once (its client bounds how many).
            return list(await asyncio.gather(*(self._score(sample, i) for i, sample in enumerate(samples))))

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
            if sample.prompt is None:
                raise InvalidInput("prompt", "the policy continues a solution to a prompt; there is none")
            message_text(sample.prompt, roles=("system", "user", "assistant"), field_name="prompt")
        except InvalidInput as error:
            return Score.failure(Status.INVALID_INPUT, f"{who}: {error}")
        steps = [sample.completion[start:end] for start, end in spans]
        soft, cut, usage = [], [], Usage()
        for k, (_, end) in enumerate(spans, start=1):
            # The policy's own text up to the step's end and the whitespace that ends it; the
            # last step's label is the solution's own correctness, not a continuation's.
            rest = sample.completion[end:]
            prefix = sample.completion[: end + len(rest) - len(rest.lstrip())]
            try:
                finished = (
                    [Continuation("")]
                    if k == len(spans)
                    else checked(await self.continuer.continuations(sample.prompt, prefix, self.n), self.n)
                )
            except ContinuationError as error:
                reason = f"{who}: step {k}: continuing failed: {error}"
                return Score.failure(error.status, reason, usage=usage + error.usage)
            except Exception as error:  # noqa: BLE001 - a failed rollout fails this sample, not the batch
                reason = f"{who}: step {k}: continuing failed: {type(error).__name__}: {error}"
                return Score.failure(Status.ERROR, reason, usage=usage)
            graded = await self.verifier.ascore(
                [
                    Sample(
                        prompt=sample.prompt,
                        completion=(prefix + tail.text) if k < len(spans) else sample.completion,
                        reference=sample.reference,
                        fields=sample.fields,
                    )
                    for tail in finished
                ]
            )
            failed = next((g for g in graded if not g.ok), None)
            if failed is not None and failed.status is not Status.NOT_APPLICABLE:
                reason = f"{who}: step {k}: the verifier failed: {failed.reason}"
                return Score.failure(failed.status, reason, usage=usage)
            correct = [g.ok and (g.value or 0.0) >= self.threshold for g in graded]
            soft.append(sum(correct) / len(correct))
            cut.append(sum(tail.cut for tail in finished))
            usage = sum((g.usage or Usage() for g in graded), usage)
            usage = sum((tail.usage for tail in finished), usage)
        hard = [value > 0 for value in soft]
        first_error = next((k for k, ok in enumerate(hard) if not ok), None)
        return Score(
            value=aggregate_steps(soft, self.aggregate),
            steps=soft,
            usage=usage,
            details={
                "hard_labels": hard,
                "first_error": first_error,
                "steps": steps,
                "n": self.n,
                "cut_continuations": cut,
            },
        )

    def close(self) -> None:
        self.verifier.close()
        close = getattr(self.continuer, "close", None)
        if close is not None:
            close()


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
