"""`ServedRewardModel` (``served_reward_model``): a sequence-classification reward model behind
a pooling server - vLLM (``--runner pooling``: ``/pooling`` or ``/classify``), SGLang
(``--is-embedding``: ``/classify``) or Hugging Face TEI (``/predict``) - scored over HTTP
through `rewardlab.llm.pooling`, where each wire format is described with its source.

Why a reward type of its own rather than a ``server:`` option on ``reward_model``: the two share
what happens to the model's outputs (named heads, weights, `rewardlab.reward_models.shaping`) and
nothing of how they are made. The in-process reward's options place, batch and cut a model in
this process (``device``, ``dtype``, ``max_batch_tokens``, ``truncation``, ``trust_remote_code``);
the served one's say where the server is and how it is called (``url``, ``protocol``, retries,
deadlines) - half of one model's options would mean nothing in either mode. As separate types
each options model holds only what applies, and a served reward needs neither torch nor the
model's weights.

How a sample reaches the server (``render``):

- ``messages``: the conversation (a text prompt as a user message, a text completion as an
  assistant message, as ``reward_model`` renders them) goes to vLLM as ``messages``; the server
  renders it with the model's own chat template, without the generation prompt and without
  adding special tokens (vLLM's chat pooling defaults) - what ``reward_model`` feeds the model.
  vLLM takes one conversation per request, so each sample is a request of its own; vLLM batches
  concurrent requests itself.
- ``tokenizer``: rendered here with the tokenizer in ``tokenizer`` (the model's folder), exactly
  as ``reward_model`` renders it (`rewardlab.reward_models.rendering`), and sent as token ids
  (vLLM, SGLang; ``batch_size`` samples a request) or, to TEI, which takes only text, as the
  rendered text (TEI then adds its tokenizer's special tokens; a template that writes its own
  BOS token gets a second one).
- ``text``: ``prompt + completion`` as plain text, for models trained on plain text; the server
  tokenizes it with its special tokens. Chat messages cannot be sent this way.
- ``auto`` (default): ``tokenizer`` when one is given, else ``messages`` for vLLM and ``text``
  for SGLang and TEI.

A sample is never cut to fit: a server that refuses an input (too long, say: HTTP 400) fails
that sample alone with status ``invalid_input`` and the server's message - a batch it refuses is
sent again one sample at a time to find which. A server that stays down, times out or answers
malformed JSON fails the samples of that request with ``backend_error`` or ``timeout`` and the
reason, after the client's retries; never a made-up score.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, InstanceOf, model_validator
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import InvalidInput
from rewardlab.llm.backends import RetryConfig
from rewardlab.llm.client import ClientOptions
from rewardlab.llm.pooling import (
    RENDERS_MESSAGES,
    TAKES_TOKEN_IDS,
    Pooled,
    PoolingBackend,
    PoolingClient,
    PoolingInput,
    PoolingOutcome,
    PoolingProtocol,
)
from rewardlab.prm.models import model_folder
from rewardlab.reward_models.output_options import RewardModelOutputOptions
from rewardlab.reward_models.rendering import (
    conversation,
    conversation_ids,
    has_chat_template,
    render,
    with_eos,
)
from rewardlab.reward_models.shaping import Calibration, OutputShaping, Shaping
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, PathOption, takes_options

ServedRender = Literal["auto", "messages", "tokenizer", "text"]


class ServedRewardModelOptions(RewardModelOutputOptions):
    """Options of `ServedRewardModel`."""

    url: Annotated[str, Field(pattern=r"^https?://")]
    """The server's address, without a path (``http://127.0.0.1:8000``)."""
    protocol: PoolingProtocol = "vllm_pooling"
    """Its wire format: ``vllm_pooling`` (``POST /pooling``), ``vllm_classify`` (``POST
    /classify``), ``sglang`` (``POST /classify``) or ``tei`` (``POST /predict``)."""
    model: str | None = None
    """The model name sent with each request (default: none; vLLM and SGLang answer for the
    model they serve)."""
    render: ServedRender = "auto"
    """How a sample is sent: ``messages`` (vLLM renders the conversation with the model's chat
    template), ``tokenizer`` (rendered here, as ``reward_model`` does), ``text`` (``prompt +
    completion``), or ``auto``: ``tokenizer`` when one is given, else ``messages`` for vLLM and
    ``text`` for SGLang and TEI."""
    tokenizer: PathOption | None = None
    """The model's folder, whose tokenizer (and chat template) renders samples here."""
    append_eos: bool = True
    """With ``render: tokenizer`` and plain text, end the text with the EOS token unless it ends
    with it already, as TRL's RewardTrainer does."""
    batch_size: int = Field(default=32, ge=1)
    """Samples per request (vLLM's ``messages`` requests hold one)."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Time limit of one HTTP request (``client.deadline_s`` bounds a request with its
    retries)."""
    api_key_env: str | None = None
    """The environment variable holding a bearer token, if the server wants one."""
    extra_body: dict[str, Any] | None = None
    """Fields added to every request body (``{"truncate_prompt_tokens": 4096}``; ``{"activation":
    false}`` for vLLM 0.10, which named ``use_activation`` so)."""
    client: RetryConfig | SkipJsonSchema[InstanceOf[ClientOptions]] | None = None
    """How requests are retried, bounded in time and stopped while the server keeps failing
    (options left out keep their defaults)."""

    @model_validator(mode="after")
    def _rendering_consistent(self) -> ServedRewardModelOptions:
        if self.render == "messages" and self.protocol not in RENDERS_MESSAGES:
            raise OptionError(
                "render", f"{self.protocol} does not render chat messages; use tokenizer (or text)"
            )
        if self.render == "tokenizer" and self.tokenizer is None:
            raise OptionError("tokenizer", "render: tokenizer needs the model's folder here")
        return self


@takes_options(ServedRewardModelOptions)
class ServedRewardModel(Reward):
    """A served sequence-classification reward model's score of each completion (see the module
    docstring).

    The value is the model's output (or its heads' weighted sum), shaped; ``details`` has the
    unshaped ``raw`` value and the request's ``attempts`` (and ``last_token_of``, the token count,
    when the server answered one row per token and the last was read; with ``shaping: group`` or
    ``running``, the statistics the value was shaped by).

    Options: `ServedRewardModelOptions` (the server and its protocol, how a sample is rendered,
    the heads, the output's shaping, the requests' size and retries).

    Example:
        >>> reward = ServedRewardModel(url="http://127.0.0.1:8000")  # doctest: +SKIP
        >>> reward.score([Sample(prompt="2+2?", completion="4")])[0].value  # doctest: +SKIP
        3.25
    """

    name = "served_reward_model"
    io_bound = True

    def __init__(
        self,
        *,
        url: str,
        protocol: PoolingProtocol = "vllm_pooling",
        model: str | None = None,
        render: ServedRender = "auto",
        tokenizer: str | Path | None = None,
        append_eos: bool = True,
        heads: dict[str, int] | None = None,
        weights: dict[str, float] | None = None,
        shaping: Shaping = "raw",
        calibration: str | Path | None = None,
        group_field: str = "group_id",
        clip: tuple[float, float] | None = None,
        batch_size: int = 32,
        timeout_s: float = 60.0,
        api_key_env: str | None = None,
        extra_body: dict[str, Any] | None = None,
        client: RetryConfig | ClientOptions | None = None,
        name: str | None = None,
    ):
        self.protocol = protocol
        if render == "auto":
            render = "tokenizer" if tokenizer is not None else "messages"
            if render == "messages" and protocol not in RENDERS_MESSAGES:
                render = "text"
        self.render = render
        self.tokenizer_spec, self.append_eos = tokenizer, append_eos
        self.heads, self.weights = heads, weights
        self.shape = OutputShaping(
            shaping,
            Calibration.read(calibration) if calibration is not None else None,
            clip=clip,
            group_field=group_field,
        )
        self.scores_groups = shaping == "group"
        self.batch_size = batch_size
        backend = PoolingBackend(
            url, protocol, model=model, timeout_s=timeout_s, api_key_env=api_key_env, extra_body=extra_body
        )
        options = client if isinstance(client, ClientOptions) else (client or RetryConfig()).options()
        self.client = PoolingClient(backend, options)
        if name is not None:
            self.name = name
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def tokenizer(self) -> Any:
        """The tokenizer of ``tokenizer``'s folder, loaded on first use."""
        with self._lock:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                assert self.tokenizer_spec is not None
                self._tokenizer = AutoTokenizer.from_pretrained(model_folder(self.tokenizer_spec))
            return self._tokenizer

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        if self.render == "tokenizer":  # loading and tokenizing are CPU work: off the event loop
            ready = await asyncio.to_thread(self._inputs, samples, scores)
        else:
            ready = self._inputs(samples, scores)
        size = 1 if self.render == "messages" else self.batch_size
        requests = [ready[start : start + size] for start in range(0, len(ready), size)]
        async with self.client.session():
            answered = await asyncio.gather(*(self._request(samples, request) for request in requests))
        for request_scores in answered:
            for index, score in request_scores:
                scores[index] = score
        return self.shape.shape_scores(samples, [score for score in scores if score is not None])

    def _inputs(
        self, samples: Sequence[Sample], scores: list[Score | None]
    ) -> list[tuple[int, PoolingInput]]:
        """What each sample is sent as, by position; a sample that cannot be sent gets its
        failure in ``scores``."""
        ready = []
        for index, sample in enumerate(samples):
            try:
                ready.append((index, self._input(sample)))
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
        return ready

    def _input(self, sample: Sample) -> PoolingInput:
        """What the server is sent for ``sample`` (`InvalidInput` for a sample that cannot be)."""
        prompt, completion = conversation(sample)  # checks both fields' shape, naming them
        if self.render == "messages":
            return PoolingInput(messages=tuple([*prompt, *completion]))
        if self.render == "text":
            text = _plain_text(sample, "chat messages need render: messages (vLLM) or a tokenizer")
            if not text:
                raise InvalidInput("completion", "prompt and completion are empty")
            return PoolingInput(text=text)
        tokenizer = self.tokenizer()
        chat = has_chat_template(tokenizer)
        if self.protocol in TAKES_TOKEN_IDS:
            ids = conversation_ids(sample, tokenizer, chat_template=chat, append_eos=self.append_eos)
            if not ids:
                raise InvalidInput("completion", "prompt and completion: no tokens")
            return PoolingInput(token_ids=tuple(ids))
        if chat:
            return PoolingInput(text=render(tokenizer, [*prompt, *completion], "completion"))
        text = _plain_text(
            sample, "chat messages need a tokenizer with a chat template, and this one has none"
        )
        return PoolingInput(text=with_eos(text, tokenizer) if self.append_eos else text)

    async def _request(
        self, samples: Sequence[Sample], request: list[tuple[int, PoolingInput]]
    ) -> list[tuple[int, Score]]:
        """The scores of one request's samples; a refused batch is asked again one by one."""
        outcome = await self.client.score([item for _, item in request])
        if outcome.pooled is None:
            if outcome.refused and len(request) > 1:
                alone = await asyncio.gather(*(self._request(samples, [item]) for item in request))
                return [pair for scores in alone for pair in scores]
            status = Status.INVALID_INPUT if outcome.refused else outcome.status
            why = "the server refused it" if outcome.refused else "no score"
            return [
                (index, Score.failure(status, f"{samples[index].label(index)}: {why}: {outcome.reason}"))
                for index, _ in request
            ]
        return [
            (index, self._score(samples[index].label(index), pooled, outcome, len(request)))
            for (index, _), pooled in zip(request, outcome.pooled, strict=True)
        ]

    def _score(self, who: str, pooled: Pooled, outcome: PoolingOutcome, size: int) -> Score:
        outputs = pooled.outputs
        usage = Usage(
            prompt_tokens=pooled.tokens or (outcome.usage.prompt_tokens if size == 1 else 0),
            latency_s=outcome.usage.latency_s,
            calls=1,
        )
        if not all(math.isfinite(value) for value in outputs):
            reason = f"{who}: the reward model's output is not finite: {list(outputs)}"
            return Score.failure(Status.ERROR, reason, usage=usage)
        if self.heads is None and len(outputs) != 1:
            reason = f"{who}: the server returned {len(outputs)} outputs; name the ones to read with heads"
            return Score.failure(Status.ERROR, reason, usage=usage)
        beyond = sorted(name for name, index in (self.heads or {}).items() if index >= len(outputs))
        if beyond:
            reason = f"{who}: heads {beyond} point past the {len(outputs)} outputs the server returned"
            return Score.failure(Status.ERROR, reason, usage=usage)
        breakdown: dict[str, float] = {}
        if self.heads is None:
            raw = outputs[0]
        else:
            breakdown = {name: outputs[index] for name, index in self.heads.items()}
            if self.weights is None:
                (raw,) = breakdown.values()
            else:
                raw = math.fsum(weight * breakdown[name] for name, weight in self.weights.items())
        details: dict[str, Any] = {"raw": raw, "attempts": outcome.attempts}
        if pooled.last_token_of is not None:
            details["last_token_of"] = pooled.last_token_of
        return Score(raw, breakdown=breakdown, usage=usage, details=details)  # shaped in ascore

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _plain_text(sample: Sample, why_not: str) -> str:
    """``prompt + completion`` of a plain-text sample; `InvalidInput` naming a field that holds
    chat messages, saying ``why_not``."""
    if not isinstance(sample.prompt, str):
        raise InvalidInput("prompt", why_not)
    if not isinstance(sample.completion, str):
        raise InvalidInput("completion", why_not)
    return sample.prompt + sample.completion
