"""What every LLM judge shares: a backend behind a `ModelClient`, a prompt template, how the
verdict is asked for and read, and how a failed call or an unreadable verdict becomes a `Score`.

How a verdict is asked for depends on what the backend can do:

- ``reasoning`` (default ``"auto"``): the judge thinks first and ends with a JSON verdict; or,
  with ``reasoning: false``, answers with the verdict alone. ``"auto"`` turns reasoning off for
  backends with guided choice (the local model, vLLM with ``guided_choice``), where the answer is
  then constrained to the valid labels, so even a tiny model gives a verdict that parses.
- ``verdict_from`` (default ``"auto"``): with a backend that returns log-probabilities, the
  score is the expectation over the judge's probabilities for each label at the verdict token
  (G-Eval style) instead of the single label it wrote - a smoother, better-calibrated reward.
  This needs labels that are single tokens, so it is used only when no label is a prefix of
  another (1-5, yes/no, A/B/tie; not 1-10, where "1" starts "10").
- With a backend that honours JSON schemas, the verdict is requested as structured output and
  read strictly; otherwise the tolerant reader in `verdicts.py` applies. Either way the reader's
  policy holds (one verdict, the judge's own, never one the fenced texts state).

Answers are cached only when a verdict was read from them (`ModelClient`'s ``keep``): a
``parse_error`` - an answer cut off at ``max_tokens``, one quoting the completion's verdict - is
asked again next time rather than replayed. Every judge score lists the cache keys of the answers
it was made from in ``details["cache_keys"]``, for `AnswerCache.purge`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import InvalidInput, VerdictError
from rewardlab.judges.prompts import JudgePrompt, transcript
from rewardlab.judges.verdicts import LabelSet, Verdict, label_probabilities, read_label
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse
from rewardlab.llm.backends import BackendOption, ClientConfig, ClientOption, client_options, make_backend
from rewardlab.llm.client import ClientOptions, Completion, ModelClient
from rewardlab.llm.fence import Fence
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage, message_text
from rewardlab.rewards.details import clipped
from rewardlab.rewards.options import PathOption, RewardOptions

Reasoning = bool | Literal["auto"]
VerdictFrom = Literal["auto", "text", "logprobs"]
EmptyCompletion = Literal["minimum", "judge"]

#: Alternatives asked for at each token when verdicts are read from log-probabilities.
TOP_LOGPROBS = 20
#: How much of a judge's answer is kept in `Score.details`.
ANSWER_CHARS = 8000


@dataclass(slots=True)
class Judgement:
    """One judge call and the verdict read from it (or why none could be)."""

    completion: Completion
    verdict: Verdict | None = None
    probabilities: dict[str, float] | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is not None

    @property
    def answer(self) -> str:
        return self.completion.response.text if self.completion.response is not None else ""

    def distribution(self, labels: LabelSet) -> dict[str, float]:
        """The judge's probability for each label: from log-probabilities when there were some,
        else all on the label it wrote."""
        if self.probabilities is not None:
            return self.probabilities
        assert self.verdict is not None
        return {label: float(label == self.verdict.label) for label in labels.labels}

    def failure(self, who: str) -> Score:
        """The score for a call that failed or whose verdict could not be read."""
        return call_failure(self.completion, self.problem, who)

    def details(self) -> dict[str, Any]:
        """What a score keeps about this call: the verdict, how it was read, the probabilities,
        the answer's cache key."""
        assert self.verdict is not None
        details: dict[str, Any] = {
            "verdict": self.verdict.label,
            "verdict_source": "logprobs" if self.probabilities is not None else self.verdict.source,
            "cache_keys": cache_keys([self.completion]),
        }
        if self.probabilities is not None:
            details["probabilities"] = {k: round(v, 6) for k, v in self.probabilities.items()}
        if self.verdict.source != "bare":
            details["judge_answer"] = clipped(self.answer, ANSWER_CHARS)
        return details


@dataclass(slots=True)
class ListJudgement:
    """One judge call whose verdict is a list (scores of G responses, labels of N steps)."""

    completion: Completion
    values: list[Any] | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.values is not None

    def failure(self, who: str) -> Score:
        return call_failure(self.completion, self.problem, who)


def cache_keys(completions: Sequence[Completion]) -> list[str]:
    """The cache keys of ``completions``' answers, in order (sampled calls have none)."""
    return [completion.key for completion in completions if completion.key is not None]


def call_failure(completion: Completion, problem: str | None, who: str) -> Score:
    """The score for a call that failed (its status and reason) or whose verdict could not be
    read (``parse_error``, keeping the judge's answer)."""
    if completion.response is None:
        return Score.failure(completion.status, f"{who}: {completion.reason}", usage=completion.usage)
    return Score.failure(
        Status.PARSE_ERROR,
        f"{who}: could not read the judge's verdict: {problem}",
        usage=completion.usage,
        details={"judge_answer": clipped(completion.response.text, ANSWER_CHARS)},
    )


class JudgeOptions(RewardOptions):
    """The options every LLM judge shares: the model, how it is called, the template, and how
    the verdict is asked for and read."""

    backend: BackendOption = None
    """Which model answers: a backend config (``{type: openai, model: ..., base_url: ...}``, see
    `rewardlab.llm.backends`), or null for the embedded SmolLM2 in this process."""
    client: ClientOption = None
    """Concurrency, retries, deadline, circuit breaker and cache of the judge's calls (keys not
    given keep their defaults)."""
    template: PathOption | None = None
    """A template file of one's own, replacing the judge's built-in one."""
    template_dir: PathOption | None = None
    """A folder searched for templates before the built-ins."""
    reasoning: Reasoning = "auto"
    """Think before the verdict; ``auto`` is off exactly for backends with guided choice, whose
    answer is then constrained to the valid labels."""
    verdict_from: VerdictFrom = "auto"
    """``text``, ``logprobs`` (the expectation under the judge's probabilities at the verdict
    token; fails to build if the backend has none), or ``auto`` (log-probabilities where the
    backend and the labels allow)."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature of judge calls (0: deterministic, and answers are cached; above 0
    they are cached only for requests with a seed)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most tokens per answer; by default 1024 with reasoning (and for list verdicts, which are
    always written out), 8 without."""
    empty_completion: EmptyCompletion = "minimum"
    """``minimum`` gives completions without a letter or digit the lowest value the judge can
    give, without asking it (an empty answer is never worth a call, and a judge may be lenient
    to it); ``judge`` asks anyway."""


class Judge(Reward):
    """Base of the LLM judges (see the module docstring for how verdicts are asked for).

    Options: `JudgeOptions` (backend, client, template, verdict); each judge type adds its own.
    """

    io_bound = True
    #: The built-in template used when none is given.
    default_template = ""
    #: The package whose ``templates/`` folder holds this judge's built-in templates.
    template_package = "rewardlab.judges"

    def __init__(
        self,
        *,
        backend: Backend | Mapping[str, Any] | None = None,
        client: ClientOptions | ClientConfig | Mapping[str, Any] | None = None,
        template: str | Path | None = None,
        template_dir: str | Path | None = None,
        reasoning: Reasoning = "auto",
        verdict_from: VerdictFrom = "auto",
        temperature: float = 0.0,
        max_tokens: int | None = None,
        empty_completion: EmptyCompletion = "minimum",
        name: str | None = None,
    ):
        self.backend = make_backend(backend)
        self.client = ModelClient(self.backend, client_options(client))
        self.template_dir = template_dir
        self.prompt = JudgePrompt(template or self.default_template, template_dir, self.template_package)
        self.reasoning = (not self.backend.supports_choices) if reasoning == "auto" else bool(reasoning)
        if verdict_from == "logprobs" and not self.backend.supports_logprobs:
            raise ValueError(
                "verdict_from='logprobs' needs a backend with log-probabilities; "
                f"{self.backend.name} has none"
            )
        self.verdict_from = verdict_from
        self.temperature = temperature
        self.max_tokens = max_tokens or (1024 if self.reasoning else 8)
        #: For answers that are always written out (lists of verdicts), whatever ``reasoning`` is.
        self.written_max_tokens = max_tokens or 1024
        self.empty_completion = empty_completion
        if name is not None:
            self.name = name

    def prompt_named(self, name: str | Path) -> JudgePrompt:
        """Another of this judge's templates (a user's ``template_dir`` still comes first)."""
        return JudgePrompt(name, self.template_dir, self.template_package)

    def clients(self) -> list[ModelClient]:
        """Every client this judge calls (a judge with a second model adds its own)."""
        return [self.client]

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Make calls through every client for a while (their connections close after it)."""
        async with contextlib.AsyncExitStack() as sessions:
            for client in self.clients():
                await sessions.enter_async_context(client.session())
            yield

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        async with self.session():
            return await self.judge_batch(samples)

    @abc.abstractmethod
    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        """Score a batch (inside a client session, so connections are closed after it)."""

    def check_labels(self, labels: LabelSet) -> None:
        """Refuse, at build time, log-probability verdicts that cannot be read from one token."""
        if self.verdict_from == "logprobs" and not labels.prefix_free:
            raise ValueError(
                f"verdict_from='logprobs' needs labels that are not prefixes of each other; "
                f"{labels.describe()} are not (use a scale within 0-9)"
            )

    def _wants_probabilities(self, labels: LabelSet) -> bool:
        return self.verdict_from != "text" and self.backend.supports_logprobs and labels.prefix_free

    async def ask(
        self,
        values: Mapping[str, Any],
        labels: LabelSet,
        key: str,
        *,
        prompt: JudgePrompt | None = None,
        scale_max: int | None = None,
    ) -> Judgement:
        """Render ``prompt`` (the judge's own by default) with ``values``, call the judge, and read
        the verdict under ``key`` from its answer."""
        prompt = prompt or self.prompt
        guided = not self.reasoning and self.backend.supports_choices
        schema = (
            _verdict_schema(key, labels) if self.reasoning and self.backend.supports_json_schema else None
        )
        messages, fences = prompt.render_with_fences(**values, reasoning=self.reasoning)
        request = ChatRequest.of(
            messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_logprobs=TOP_LOGPROBS if self._wants_probabilities(labels) else None,
            choices=labels.labels if guided else None,
            json_schema=schema,
            fences=fences,
        )

        def read(text: str, answered: Collection[Fence]) -> Verdict:
            return read_label(
                text, labels, key, fences=answered, strict=schema is not None, scale_max=scale_max
            )

        completion = await self.client.complete(request, namespace=prompt.hash, keep=_reads(read))
        response = completion.response
        if response is None:
            return Judgement(completion)
        try:
            verdict = read(response.text, completion.fences)
        except VerdictError as error:
            cut = " (the answer was cut off at max_tokens)" if response.finish_reason == "length" else ""
            return Judgement(completion, problem=f"{error}{cut}")
        probabilities = label_probabilities(response, verdict, labels) if request.top_logprobs else None
        return Judgement(completion, verdict, probabilities)

    async def ask_each(
        self, questions: Sequence[tuple[Mapping[str, Any], LabelSet]], key: str, part: Callable[[int], str]
    ) -> tuple[list[Judgement], Usage, Score | None]:
        """Ask several questions at once (each its values and labels); returns the judgements,
        their total usage, and - when one failed - the failure of the whole, named by
        ``part(index)`` of the first failed question and charged with every call's usage."""
        judgements = list(
            await asyncio.gather(*(self.ask(values, labels, key) for values, labels in questions))
        )
        usage = sum((j.completion.usage for j in judgements), Usage())
        failed = next((k for k, j in enumerate(judgements) if not j.ok), None)
        if failed is None:
            return judgements, usage, None
        failure = judgements[failed].failure(part(failed))
        failure.usage = usage
        return judgements, usage, failure

    async def ask_list(
        self,
        values: Mapping[str, Any],
        read: Callable[[str, Collection[Fence]], list[Any]],
        *,
        prompt: JudgePrompt | None = None,
        client: ModelClient | None = None,
    ) -> ListJudgement:
        """Call the judge for a list verdict, read by ``read(answer, fences)`` (which raises
        `VerdictError`). The judge always writes these out (a list cannot be a guided choice), so
        ``reasoning`` does not apply. Another model's ``client`` may answer."""
        prompt = prompt or self.prompt
        messages, fences = prompt.render_with_fences(**values, reasoning=True)
        request = ChatRequest.of(
            messages, temperature=self.temperature, max_tokens=self.written_max_tokens, fences=fences
        )
        completion = await (client or self.client).complete(request, namespace=prompt.hash, keep=_reads(read))
        response = completion.response
        if response is None:
            return ListJudgement(completion)
        try:
            return ListJudgement(completion, read(response.text, completion.fences))
        except VerdictError as error:
            cut = " (the answer was cut off at max_tokens)" if response.finish_reason == "length" else ""
            return ListJudgement(completion, problem=f"{error}{cut}")

    async def ask_text(
        self,
        values: Mapping[str, Any],
        prompt: JudgePrompt,
        max_tokens: int,
        client: ModelClient | None = None,
    ) -> Completion:
        """A free-text answer (no verdict), e.g. a grading scaffold; from another model's
        ``client`` if given."""
        messages, fences = prompt.render_with_fences(**values)
        request = ChatRequest.of(messages, temperature=self.temperature, max_tokens=max_tokens, fences=fences)
        return await (client or self.client).complete(request, namespace=prompt.hash)

    def is_trivial(self, text: str) -> bool:
        """Whether ``text`` is scored the minimum without a call (see ``empty_completion``)."""
        return self.empty_completion == "minimum" and not any(ch.isalnum() for ch in text)

    def readable(
        self, samples: Sequence[Sample], scores: list[Score | None], minimum: float | None = None
    ) -> dict[int, tuple[str, str]]:
        """Each sample's (prompt, completion) as the judge sees them, by index. A sample that
        cannot be read (its reference included) gets ``invalid_input`` in ``scores``; with
        ``minimum``, a trivial completion gets that minimum there too, and neither is returned."""
        texts: dict[int, tuple[str, str]] = {}
        for index, sample in enumerate(samples):
            try:
                prompt, completion = prompt_for_judge(sample), completion_for_judge(sample)
                reference_for_judge(sample)
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
                continue
            if minimum is not None and self.is_trivial(completion):
                scores[index] = minimum_score(minimum)
                continue
            texts[index] = (prompt, completion)
        return texts

    def close(self) -> None:
        for client in self.clients():
            client.close()


def _reads(
    read: Callable[[str, Collection[Fence]], object],
) -> Callable[[ChatResponse, Collection[Fence]], bool]:
    """The client's ``keep``: an answer is worth caching when ``read`` finds its verdict."""

    def keep(response: ChatResponse, fences: Collection[Fence]) -> bool:
        try:
            read(response.text, fences)
        except VerdictError:
            return False
        return True

    return keep


def sendable(text: str, field_name: str) -> str:
    """``text``, refused (`InvalidInput`) when it holds a lone surrogate: no UTF-8 request can
    carry it, and failing at the backend would fail every sample of the batch."""
    try:
        text.encode()
    except UnicodeEncodeError as error:
        raise InvalidInput(
            field_name, f"holds a lone surrogate (U+{ord(text[error.start]):04X}), which is not text"
        ) from None
    return text


def prompt_for_judge(sample: Sample) -> str:
    """The prompt as the judge sees it: the text, or the conversation with roles."""
    return sendable(transcript(sample.prompt, "prompt"), "prompt")


def completion_for_judge(sample: Sample) -> str:
    """The completion as the judge sees it: the assistant's text, or - when tools took part - the
    whole exchange with roles."""
    value = sample.completion
    if isinstance(value, Sequence) and not isinstance(value, str):
        if all(isinstance(m, Mapping) and m.get("role") == "assistant" for m in value):
            return sendable(message_text(value), "completion")
        return sendable(transcript(value, "completion"), "completion")
    return sendable(message_text(value), "completion")


def reference_for_judge(sample: Sample) -> Any:
    """The reference as the judge is shown it: text checked as `sendable`, anything else (None,
    a number from a dataset) as it is."""
    reference = sample.reference
    return sendable(reference, "reference") if isinstance(reference, str) else reference


def expected_label(distribution: Mapping[str, float]) -> float:
    """The mean of numeric labels under the judge's distribution over them."""
    return sum(int(label) * probability for label, probability in distribution.items())


def graded_score(judgement: Judgement, raw: float, low: float, high: float, normalize: bool) -> Score:
    """The score of a graded verdict: ``raw`` (the grade, or its expectation), mapped from
    ``low..high`` to [0, 1] when normalizing; the raw grade stays in the breakdown."""
    return Score(
        value=(raw - low) / (high - low) if normalize else raw,
        breakdown={"score": raw},
        usage=judgement.completion.usage,
        details=judgement.details(),
    )


def minimum_score(
    value: float, reason: str = "the completion is empty: scored the minimum without a judge call"
) -> Score:
    """The score of a trivial completion."""
    return Score(value=value, reason=reason, details={"judge": "skipped"})


def scored(scores: list[Score | None]) -> list[Score]:
    """The scores of a batch filled in piece by piece, checked to be complete."""
    missing = [index for index, score in enumerate(scores) if score is None]
    if missing:
        raise RuntimeError(f"internal error: samples {missing} were not scored")
    return [score for score in scores if score is not None]


def _verdict_schema(key: str, labels: LabelSet) -> dict[str, Any]:
    numeric = all(label.lstrip("-").isdigit() for label in labels.labels)
    verdict = (
        {"type": "integer", "enum": [int(x) for x in labels.labels]}
        if numeric
        else {"enum": list(labels.labels)}
    )
    return {
        "type": "object",
        "properties": {"reasoning": {"type": "string"}, key: verdict},
        "required": ["reasoning", key],
        "additionalProperties": False,
    }
