"""Reward models behind pooling servers: the wire formats of vLLM's pooling runner, SGLang's
reward route and Hugging Face TEI, and `PoolingClient`, which calls them as dependably as
`ModelClient` calls a chat server (the same retry loop, deadline and circuit breaker:
`rewardlab.llm.retrying`).

The protocols (``protocol``), and where their shapes come from:

- ``vllm_pooling``: vLLM's ``POST /pooling`` (``vllm serve RM --runner pooling``). Request
  ``{"model", "input": str | [str] | [int] | [[int]]}`` or, for one conversation the server
  renders with the model's chat template, ``{"model", "messages": [...]}``
  (``PoolingCompletionRequest`` / ``PoolingChatRequest`` in
  vllm/entrypoints/pooling/pooling/protocol.py); response
  ``{"id", "object": "list", "created", "model", "data": [{"index", "object": "pooling",
  "data": [float] | [[float]]}], "usage": {"prompt_tokens", "total_tokens"}}``
  (``PoolingResponse``). A sequence classifier's ``data`` is its vector of outputs; a per-token
  task (``token_classify``, the older ``reward`` task with ``ALL`` pooling) returns one row per
  token, and the sequence's score is read from the last row, where a sequence classifier reads
  it.
- ``vllm_classify``: vLLM's ``POST /classify``, the same requests
  (``ClassificationCompletionRequest`` / ``ClassificationChatRequest``,
  vllm/entrypoints/pooling/classify/protocol.py); response ``data: [{"index", "label", "probs",
  "num_classes"}]`` (``ClassificationData``, filled in classify/serving.py).
- ``sglang``: SGLang's native ``POST /classify`` for reward models (``--is-embedding``; the
  "Classify (reward model)" section of SGLang's native API docs, docs/basic_usage/native_api):
  request ``{"model", "text": [str]}`` - the client renders the chat template - or
  ``{"model", "input_ids": [[int]]}`` (``EmbeddingReqInput``); response one
  ``{"embedding": [float], "meta_info": {"prompt_tokens", ...}}`` per input. SGLang's
  ``/v1/classify`` is not used: it mirrors vLLM 0.7's classify and returns softmax
  probabilities, which for a one-label reward model are always 1.0.
- ``tei``: Text Embeddings Inference's ``POST /predict`` (docs/openapi.json, ``PredictRequest``
  / ``PredictResponse``): request ``{"inputs": [[str], ...], "raw_scores": true, "truncate":
  false}``; response one list of ``{"label", "score"}`` per input, sorted by score, highest
  first (router/src/grpc/server.rs reverse-sorts them) - so outputs are put back in index order
  by label, through ``GET /info``'s ``id2label`` when labels are not ``LABEL_<i>``. TEI takes
  text only and adds its tokenizer's special tokens.

What comes back is the model's raw output. vLLM's pooler applies an activation by default
(sigmoid for one label, softmax for several: ``PoolerClassify`` in
vllm/model_executor/layers/pooler), so every vLLM request says ``"use_activation": false``
(vLLM >= 0.11.1, which renamed ``activation`` and ``softmax`` to it: vLLM PR #25524; on older
servers send ``{"activation": false}`` through ``extra_body``); TEI gets ``"raw_scores":
true``; SGLang's ``/classify`` returns the classifier's output as it is.

A request that fails returns a status, never a made-up score: `PoolingClient.score` returns a
`PoolingOutcome` with ``backend_error``, ``timeout`` or ``error`` and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rewardlab.errors import BackendError
from rewardlab.llm.backend import LoopClients
from rewardlab.llm.breaker import CircuitBreaker
from rewardlab.llm.client import ClientOptions
from rewardlab.llm.http_backend import json_reply, json_session
from rewardlab.llm.retrying import call_with_retries
from rewardlab.rewards.contract import Status, Usage

PoolingProtocol = Literal["vllm_pooling", "vllm_classify", "sglang", "tei"]
PROTOCOLS: tuple[PoolingProtocol, ...] = ("vllm_pooling", "vllm_classify", "sglang", "tei")
#: The protocols whose server renders a conversation with the model's own chat template.
RENDERS_MESSAGES = frozenset({"vllm_pooling", "vllm_classify"})
#: The protocols that take token ids.
TAKES_TOKEN_IDS = frozenset({"vllm_pooling", "vllm_classify", "sglang"})
_ROUTES = {"vllm_pooling": "/pooling", "vllm_classify": "/classify", "sglang": "/classify", "tei": "/predict"}
_DEFAULT_LABEL = re.compile(r"LABEL_(\d+)")
#: The statuses with which a server refuses what it was sent, not who sent it: vLLM's 400 (too
#: long, unrenderable), TEI's 413 (too many inputs) and 422 (tokenization). A 401, 403 or 404 (a
#: key, a model name) is the same for every input.
REFUSED_INPUT = frozenset({400, 413, 422})


@dataclass(frozen=True, slots=True)
class PoolingInput:
    """One sequence for the server to score: exactly one of chat ``messages`` (the server
    renders them), ``text``, or ``token_ids``."""

    messages: tuple[Mapping[str, Any], ...] | None = None
    text: str | None = None
    token_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        given = [value is not None for value in (self.messages, self.text, self.token_ids)]
        if sum(given) != 1:
            raise ValueError("a pooling input is exactly one of messages, text or token_ids")

    @property
    def kind(self) -> str:
        return "messages" if self.messages is not None else "text" if self.text is not None else "token_ids"


@dataclass(frozen=True, slots=True)
class Pooled:
    """What the server returned for one input: its outputs (index order), whether they were the
    last token's row of a per-token answer, and the input's token count when the server says."""

    outputs: tuple[float, ...]
    last_token_of: int | None = None
    tokens: int | None = None


class PoolingBackend(LoopClients):
    """One pooling server, spoken to in one `PoolingProtocol` over aiohttp (see the module
    docstring for each wire format).

    Args:
        url: The server's address, without a path (``http://127.0.0.1:8000``).
        protocol: Its wire format.
        model: The model name to send (vLLM and SGLang answer for the model they serve when it
            is left out; TEI serves one model and takes none).
        timeout_s: Time limit of one HTTP request.
        api_key_env: Environment variable holding a bearer token, if the server wants one (read
            at call time, never stored or pickled).
        extra_body: Fields added to every request body (``{"truncate_prompt_tokens": 4096}``,
            or ``{"activation": false}`` for vLLM 0.10).
    """

    def __init__(
        self,
        url: str,
        protocol: PoolingProtocol,
        *,
        model: str | None = None,
        timeout_s: float = 60.0,
        api_key_env: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        self.url = url.rstrip("/")
        self.protocol = protocol
        self.model = model
        self.timeout_s = timeout_s
        self.api_key_env = api_key_env
        self.extra_body = dict(extra_body or {})
        self.name = f"{protocol}:{self.url}" + (f":{model}" if model else "")
        self._label_ids: dict[str, int] | None = None

    def _make_session(self) -> Any:
        return json_session("served reward models", self.api_key_env, self.timeout_s)

    def request_body(self, inputs: Sequence[PoolingInput]) -> dict[str, Any]:
        """The JSON body that asks for ``inputs`` (all of one kind; messages one at a time:
        vLLM's chat requests hold one conversation)."""
        kinds = {item.kind for item in inputs}
        if len(kinds) != 1:
            raise ValueError("one request holds inputs of one kind")
        (kind,) = kinds
        if kind == "messages" and (self.protocol not in RENDERS_MESSAGES or len(inputs) != 1):
            raise ValueError(f"{self.protocol} takes chat messages only as one vLLM conversation")
        if kind == "token_ids" and self.protocol not in TAKES_TOKEN_IDS:
            raise ValueError(f"{self.protocol} takes text, not token ids")
        body: dict[str, Any] = {"model": self.model} if self.model and self.protocol != "tei" else {}
        if self.protocol == "tei":
            body.update(inputs=[[item.text] for item in inputs], raw_scores=True, truncate=False)
        elif self.protocol == "sglang":
            if kind == "text":
                body["text"] = [item.text for item in inputs]
            else:
                body["input_ids"] = [list(item.token_ids or ()) for item in inputs]
        else:
            if kind == "messages":
                body["messages"] = [dict(message) for message in inputs[0].messages or ()]
            elif kind == "text":
                body["input"] = [item.text for item in inputs]
            else:
                body["input"] = [list(item.token_ids or ()) for item in inputs]
            body["use_activation"] = False
        body.update(self.extra_body)
        return body

    async def score(self, inputs: Sequence[PoolingInput]) -> tuple[list[Pooled], int]:
        """The outputs for ``inputs``, in order, and the prompt tokens the server counted (0
        where it does not say). Raises `BackendError`: retryable for 429, 5xx, a lost connection
        or a malformed answer; not for a refusal (other 4xx)."""
        payload = await self._post(_ROUTES[self.protocol], self.request_body(inputs))
        try:
            pooled, tokens = self._read(payload, len(inputs))
            if self.protocol == "tei" and None in pooled:  # named labels: their order is in /info
                pooled, tokens = self._read(payload, len(inputs), await self._tei_labels())
        except BackendError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            raise BackendError(
                f"malformed response: {type(error).__name__}: {error}", retryable=True
            ) from None
        return [item for item in pooled if item is not None], tokens

    async def _post(self, path: str, body: Mapping[str, Any] | None) -> Any:
        session = self.loop_client(self._make_session)
        request = (
            session.post(self.url + path, data=json.dumps(body))
            if body is not None
            else session.get(self.url + path)
        )
        return await json_reply(request, self.timeout_s)

    async def _tei_labels(self) -> dict[str, int]:
        """TEI's ``label -> index`` from ``GET /info`` (``model_type.classifier.id2label``)."""
        if self._label_ids is None:
            info = await self._post("/info", None)
            kinds = info.get("model_type") if isinstance(info, Mapping) else None
            classifier = (kinds or {}).get("classifier") or (kinds or {}).get("reranker") or {}
            id2label = classifier.get("id2label") if isinstance(classifier, Mapping) else None
            if not isinstance(id2label, Mapping):
                raise BackendError("malformed response: GET /info has no classifier id2label", retryable=True)
            self._label_ids = {str(label): int(index) for index, label in id2label.items()}
        return self._label_ids

    def _read(
        self, payload: Any, count: int, labels: Mapping[str, int] | None = None
    ) -> tuple[list[Pooled | None], int]:
        """The outputs in a response body for ``count`` inputs; None for a TEI answer whose
        labels need ``labels`` (`_tei_labels`)."""
        if self.protocol in ("vllm_pooling", "vllm_classify"):
            if not isinstance(payload, Mapping) or not isinstance(payload.get("data"), list):
                raise BackendError("malformed response: expected an object with a data list", retryable=True)
            items = sorted(payload["data"], key=lambda item: int(item["index"]))
            _check_count(len(items), count)
            usage = payload.get("usage") or {}
            key = "data" if self.protocol == "vllm_pooling" else "probs"
            return [_pooled(item[key]) for item in items], int(usage.get("prompt_tokens") or 0)
        if not isinstance(payload, list):
            raise BackendError("malformed response: expected a list, one entry per input", retryable=True)
        _check_count(len(payload), count)
        if self.protocol == "sglang":
            pooled = []
            for item in payload:
                tokens = (item.get("meta_info") or {}).get("prompt_tokens")
                values = _pooled(item["embedding"])
                pooled.append(Pooled(values.outputs, values.last_token_of, int(tokens) if tokens else None))
            return list(pooled), sum(item.tokens or 0 for item in pooled)
        return [_tei_pooled(predictions, labels) for predictions in payload], 0


def _check_count(got: int, expected: int) -> None:
    if got != expected:
        raise BackendError(f"malformed response: {got} results for {expected} inputs", retryable=True)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _pooled(data: Any) -> Pooled:
    """A vector of outputs, or a matrix of per-token rows read at its last row."""
    if not isinstance(data, list) or not data:
        raise TypeError(f"expected a non-empty list of numbers, got {json.dumps(data)[:80]}")
    if isinstance(data[0], list):
        rows = [[_number(value) for value in row] for row in data]
        if not rows[-1]:
            raise ValueError("the last token's row is empty")
        return Pooled(tuple(rows[-1]), last_token_of=len(rows))
    return Pooled(tuple(_number(value) for value in data))


def _tei_pooled(predictions: Any, labels: Mapping[str, int] | None) -> Pooled | None:
    if not isinstance(predictions, list) or not predictions:
        raise TypeError("expected a non-empty list of predictions per input")
    if len(predictions) == 1:
        return Pooled((_number(predictions[0]["score"]),))
    indexed: dict[int, float] = {}
    for prediction in predictions:
        label = str(prediction["label"])
        default = _DEFAULT_LABEL.fullmatch(label)
        if labels is not None and label in labels:
            index = labels[label]
        elif default is not None and labels is None:
            index = int(default.group(1))
        elif labels is None:
            return None  # a named label: its index is in GET /info
        else:
            raise ValueError(f"label {label!r} is not in the model's id2label")
        indexed[index] = _number(prediction["score"])
    if sorted(indexed) != list(range(len(predictions))):
        raise ValueError(f"labels do not cover outputs 0..{len(predictions) - 1}: {sorted(indexed)}")
    return Pooled(tuple(indexed[index] for index in range(len(predictions))))


@dataclass(slots=True)
class PoolingOutcome:
    """One request's outcome: the outputs per input, or a status and reason saying why there
    are none (``refused``: the server turned down what it was sent, `REFUSED_INPUT`)."""

    pooled: list[Pooled] | None
    status: Status = Status.OK
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    refused: bool = False


class PoolingClient:
    """Calls a `PoolingBackend` the dependable way: at most ``max_concurrency`` requests in
    flight per event loop, each retried with backoff within its deadline, behind a circuit
    breaker (`ClientOptions`; a pooling client keeps no cache: a reward model's scores are cheap
    to ask again and rarely asked twice)."""

    def __init__(self, backend: PoolingBackend, options: ClientOptions | None = None):
        self.backend = backend
        self.options = options or ClientOptions(cache=None)
        self.breaker = CircuitBreaker(self.options.breaker_threshold, self.options.breaker_cooldown_s)
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores[loop] = asyncio.Semaphore(self.options.max_concurrency)
        return self._semaphores[loop]

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Make requests for a while on the running loop; connections close when it ends."""
        async with self.backend.session():
            yield

    async def score(self, inputs: Sequence[PoolingInput]) -> PoolingOutcome:
        """One request for ``inputs``; never raises for a server failure."""
        async with self._semaphore():
            outcome = await call_with_retries(
                lambda: self.backend.score(inputs), self.options.policy(), self.breaker
            )
        if outcome.value is None:
            refused = outcome.status_code in REFUSED_INPUT
            return PoolingOutcome(
                None,
                outcome.status,
                f"{self.backend.name}: {outcome.reason}",
                Usage(latency_s=outcome.latency_s, calls=1),
                outcome.attempts,
                refused,
            )
        pooled, tokens = outcome.value
        usage = Usage(prompt_tokens=tokens, latency_s=outcome.latency_s, calls=1)
        return PoolingOutcome(pooled, usage=usage, attempts=outcome.attempts)

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self.backend, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        PoolingClient.__init__(self, state["backend"], state["options"])
