"""A scripted OpenAI-compatible server for your own tests of judges, rubrics and step judges.

`ScriptedServer` is a real HTTP server on 127.0.0.1, in a background thread of the calling
process, that answers ``POST /v1/chat/completions`` the way a test scripts it: a verdict, an
HTTP error (a 500, a 429 with ``Retry-After``), a slow answer, malformed JSON, a truncated
answer, an empty choice list. It keeps every request body it received (`ScriptedServer.requests`).

Why a server and not a mocked client: a judge built against it (``"base_url": server.url``)
runs everything it runs in production - the HTTP backend, the wire format, retries and their
backoff, deadlines, the circuit breaker, verdict parsing - and those are the parts that fail
when a real model misbehaves. No model, API key or network is needed, and a test takes
milliseconds.

Each request gets the next scripted `Reply` (`ScriptedServer.script`), in order, and once the
script is empty the server's ``default``: a `Reply`, or a function from the request body to one.

Example:
    A pointwise judge on a 1-5 scale whose model answers 4, after a server error that the judge's
    client retries:

    >>> from rewardlab import Sample, build
    >>> from rewardlab.testing import Reply, ScriptedServer
    >>> with ScriptedServer(Reply(text='Right, but terse. {"score": 4}')) as server:
    ...     judge = build({
    ...         "type": "pointwise_judge",
    ...         "scale": [1, 5],
    ...         "backend": {"type": "http", "base_url": server.url, "model": "scripted"},
    ...         "client": {"cache": None, "backoff_base_s": 0.01},
    ...     })
    ...     server.script(Reply(status=500))
    ...     [score] = judge.score([Sample(prompt="What is 2 + 2?", completion="4")])
    ...     judge.close()
    >>> score.status.value, score.value, score.breakdown
    ('ok', 0.75, {'score': 4.0})
    >>> len(server.requests), server.requests[0]["model"]
    (2, 'scripted')

In pytest, a fixture gives each test a server of its own, so scripts never leak between tests:

```python
import pytest

from rewardlab.testing import ScriptedServer


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server
```

`ScriptedPoolingServer` does the same for served reward models: it speaks vLLM's pooling
protocol (``/pooling``, ``/classify``), SGLang's ``/classify`` or TEI's ``/predict`` in their
documented shapes, with scores from a function of each input and scripted faults
(`PoolingReply`), for tests of ``served_reward_model``.

``python -m rewardlab.testing --latency 0.2`` serves one fixed answer with a fixed latency in a
process of its own, until interrupted (for benchmarks of a client).
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint's annotations at run time,
# and ``Request`` there names an import inside `ScriptedServer.app`.
import asyncio
import math
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from rewardlab.llm.backend import ChatResponse, TokenLogprob
from rewardlab.llm.openai_format import write_response
from rewardlab.optional import require
from rewardlab.rewards.contract import Usage

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI


class _LocalServer:
    """A FastAPI app (`app`) served on 127.0.0.1 from a background thread of this process."""

    url = ""

    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def app(self) -> "FastAPI":
        raise NotImplementedError

    def _address(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def start(self) -> str:
        """Start serving on a free port in a background thread, and return once it accepts
        requests.

        Returns:
            The server's address (also `url`).

        Raises:
            MissingDependency: FastAPI or uvicorn is not installed (the ``judges`` extra).
            RuntimeError: The server thread ended before it started serving.
        """
        require("uvicorn", "the scripted server")
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = self._address(sock.getsockname()[1])
        config = uvicorn.Config(self.app(), log_level="warning", timeout_keep_alive=30)
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the scripted server failed to start")
            threading.Event().wait(0.01)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait (up to 10 s) for the thread to end; a no-op when not started.
        The requests received stay in ``requests``."""
        if self._server is not None:
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(slots=True)
class Reply:
    """What the server does for one request; by default a 200 with an empty answer.

    Attributes:
        text: The answer's content (default ``""``).
        status: HTTP status (default 200); anything else sends an OpenAI-style error body, which
            a judge's client retries (429, 5xx) or reports at once (other 4xx).
        headers: Extra response headers (``{"Retry-After": "1"}``, say).
        delay_s: Wait this long before answering (default 0; the server's ``latency_s`` adds to it).
        finish_reason: ``"stop"`` (default), or ``"length"`` for a truncated answer.
        logprobs: Token log-probabilities to return, when the request asks for them
            (``logprobs: true``); default None.
        raw_body: Send this text as the body instead, with the status (malformed JSON, say).
        empty_choices: Answer 200 with an empty choice list.
        usage: Token counts to report (default 10 prompt tokens and 5 completion tokens).
    """

    text: str = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    logprobs: list[TokenLogprob] | None = None
    raw_body: str | None = None
    empty_choices: bool = False
    usage: Usage = field(default_factory=lambda: Usage(prompt_tokens=10, completion_tokens=5))


#: What the server answers once its script is empty: a `Reply`, or a function from the request
#: body (the JSON the client sent, as a dict) to one.
Responder = Reply | Callable[[dict[str, Any]], Reply]


class ScriptedServer(_LocalServer):
    """An OpenAI-compatible chat server on 127.0.0.1 that answers as scripted (see the module's
    docstring). Use it as a context manager, or call `start` and `stop`. It needs the ``judges``
    extra (FastAPI and uvicorn).

    Args:
        default: The reply once the script is empty; by default ``Reply(text='{"score": 5}')``.
            ``default`` may be changed at any time, for the requests that follow.
        latency_s: Added to every reply's delay (default 0).
        model: The model name it reports in its answers (default ``"scripted"``).

    Attributes:
        url: The ``/v1`` address, for a backend's ``base_url``; ``""`` until `start`.
        requests: Every request body received, in order of arrival.
    """

    def __init__(self, default: Responder | None = None, *, latency_s: float = 0.0, model: str = "scripted"):
        self.default = default if default is not None else Reply(text='{"score": 5}')
        self.latency_s = latency_s
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__()

    def script(self, *replies: Reply) -> None:
        """Queue ``replies`` for the next requests, one each, in order (after any still queued).

        >>> server = ScriptedServer()
        >>> server.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(text='{"score": 9}'))
        """
        with self._lock:
            self._script.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.popleft()
        return self.default(body) if callable(self.default) else self.default

    def app(self) -> "FastAPI":
        """The FastAPI application that answers (`start` serves it; mount it elsewhere at will)."""
        require("fastapi", "the scripted server")
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, Response

        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            body = await request.json()
            reply = self._next(body)
            delay = reply.delay_s + self.latency_s
            if delay:
                await asyncio.sleep(delay)
            headers = dict(reply.headers)
            if reply.raw_body is not None:
                return Response(
                    reply.raw_body, status_code=reply.status, media_type="application/json", headers=headers
                )
            if reply.status != 200:
                error = {
                    "error": {"message": f"scripted {reply.status}", "type": "scripted", "code": reply.status}
                }
                return JSONResponse(error, status_code=reply.status, headers=headers)
            response = ChatResponse(
                text=reply.text,
                finish_reason=reply.finish_reason,
                logprobs=reply.logprobs if body.get("logprobs") else None,
                usage=reply.usage,
            )
            payload = write_response(response, self.model)
            if reply.empty_choices:
                payload["choices"] = []
            return JSONResponse(payload, headers=headers)

        return app

    def _address(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/v1"


@dataclass(slots=True)
class PoolingReply:
    """What a `ScriptedPoolingServer` does for one request; by default it answers with its
    scorer's outputs in the protocol's documented shape.

    Attributes:
        outputs: The raw outputs per input of the request, instead of the scorer's.
        status: HTTP status (default 200); anything else sends the protocol's error body.
        headers: Extra response headers (``{"Retry-After": "1"}``, say).
        delay_s: Wait this long before answering.
        raw_body: Send this text as the body instead, with the status (malformed JSON, say).
        per_token: vLLM ``/pooling`` only: answer one row per token (a per-token task), the
            outputs in the last row.
    """

    outputs: list[list[float]] | None = None
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    per_token: bool = False


#: A scripted reward model: the raw outputs for one input as the server received it - a text,
#: a list of token ids, or a list of chat messages.
Scorer = Callable[[Any], list[float]]


def length_scorer(item: Any) -> list[float]:
    """The default scorer: one output, a tenth of the input's length (characters of a text or of
    the messages' contents, or token ids)."""
    if isinstance(item, str):
        return [len(item) / 10]
    if item and isinstance(item[0], Mapping):
        return [sum(len(str(message.get("content") or "")) for message in item) / 10]
    return [len(item) / 10]


class ScriptedPoolingServer(_LocalServer):
    """A reward model server on 127.0.0.1 that speaks one pooling protocol and answers in its
    documented shapes (see `rewardlab.llm.pooling` for each, and where it is documented), with
    scores from ``scorer`` or scripted faults (`PoolingReply`).

    - ``vllm``: ``POST /pooling`` and ``POST /classify`` (``input`` texts or token ids, or one
      conversation in ``messages``), ``GET /v1/models``, ``GET /health``; the activation vLLM
      applies by default (sigmoid for one output, softmax for several) unless the request says
      ``"use_activation": false``.
    - ``sglang``: ``POST /classify`` (``text`` or ``input_ids``), raw outputs, ``GET /health``.
    - ``tei``: ``POST /predict`` (``inputs``), predictions sorted by score, the activation unless
      ``"raw_scores": true``; ``GET /info`` with the labels, ``GET /health``.

    Args:
        protocol: ``vllm``, ``sglang`` or ``tei``.
        scorer: Raw outputs for one input (default `length_scorer`).
        labels: The outputs' labels (default ``LABEL_0``, ``LABEL_1``, ...).
        model: The model name it reports.

    Attributes:
        url: The server's address (no path), for a served reward model's ``url``.
        requests: Every request body received, in order of arrival; ``paths`` their paths.

    Example:
        >>> from rewardlab import Sample, build
        >>> with ScriptedPoolingServer("vllm") as server:
        ...     reward = build({"type": "served_reward_model", "url": server.url})
        ...     server.script(PoolingReply(status=503))
        ...     [score] = reward.score([Sample(prompt="2+2?", completion="4")])
        >>> score.value, score.details["attempts"]
        (0.5, 2)
        >>> server.paths, server.requests[1]["messages"][1]
        (['/pooling', '/pooling'], {'role': 'assistant', 'content': '4'})
    """

    def __init__(
        self,
        protocol: str = "vllm",
        scorer: Scorer | None = None,
        *,
        labels: list[str] | None = None,
        model: str = "scripted-rm",
    ):
        if protocol not in ("vllm", "sglang", "tei"):
            raise ValueError(f"protocol must be vllm, sglang or tei, got {protocol!r}")
        self.protocol = protocol
        self.scorer = scorer or length_scorer
        self.labels = labels
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._script: deque[PoolingReply] = deque()
        self._lock = threading.Lock()
        super().__init__()

    def script(self, *replies: PoolingReply) -> None:
        """Queue ``replies`` for the next requests, one each, in order."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, path: str, body: dict[str, Any]) -> PoolingReply:
        with self._lock:
            self.requests.append(body)
            self.paths.append(path)
            return self._script.popleft() if self._script else PoolingReply()

    def _label(self, index: int) -> str:
        return self.labels[index] if self.labels else f"LABEL_{index}"

    def app(self) -> "FastAPI":
        """The FastAPI application that answers."""
        require("fastapi", "the scripted server")
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, Response

        app = FastAPI()

        async def answer(path: str, request: Request) -> Response:
            body = await request.json()
            reply = self._next(path, body)
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            headers = dict(reply.headers)
            if reply.raw_body is not None:
                return Response(
                    reply.raw_body, status_code=reply.status, media_type="application/json", headers=headers
                )
            if reply.status != 200:
                return JSONResponse(self._error(reply.status), status_code=reply.status, headers=headers)
            items = self._inputs(body)
            outputs = reply.outputs if reply.outputs is not None else [self.scorer(item) for item in items]
            return JSONResponse(self._answer(path, body, items, outputs, reply), headers=headers)

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {}

        if self.protocol == "vllm":

            @app.post("/pooling")
            async def pooling(request: Request) -> Response:
                return await answer("/pooling", request)

            @app.get("/v1/models")
            async def models() -> dict[str, Any]:
                return {"object": "list", "data": [{"id": self.model, "object": "model"}]}

        if self.protocol in ("vllm", "sglang"):

            @app.post("/classify")
            async def classify(request: Request) -> Response:
                return await answer("/classify", request)

        if self.protocol == "tei":

            @app.post("/predict")
            async def predict(request: Request) -> Response:
                return await answer("/predict", request)

            @app.get("/info")
            async def info() -> dict[str, Any]:
                outputs = len(self.labels or ["LABEL_0"])
                id2label = {str(index): self._label(index) for index in range(outputs)}
                label2id = {label: int(index) for index, label in id2label.items()}
                classifier = {"id2label": id2label, "label2id": label2id}
                return {"model_id": self.model, "model_type": {"classifier": classifier}}

        return app

    def _inputs(self, body: dict[str, Any]) -> list[Any]:
        if self.protocol == "tei":
            inputs = body["inputs"]
            return [item[0] if isinstance(item, list) else item for item in inputs]
        if self.protocol == "sglang":
            return list(body["text"] if "text" in body else body["input_ids"])
        if "messages" in body:
            return [body["messages"]]
        given = body["input"]
        return [given] if isinstance(given, str) or (given and isinstance(given[0], int)) else list(given)

    def _error(self, status: int) -> dict[str, Any]:
        message = f"scripted {status}"
        if self.protocol == "tei":
            return {"error": message, "error_type": "backend"}
        return {"error": {"message": message, "type": "scripted", "code": status}}

    def _answer(
        self,
        path: str,
        body: dict[str, Any],
        items: list[Any],
        outputs: list[list[float]],
        reply: PoolingReply,
    ) -> Any:
        tokens = [round(length_scorer(item)[0] * 10) for item in items]  # characters or token ids
        if self.protocol == "sglang":
            return [
                {"embedding": values, "meta_info": {"id": uuid.uuid4().hex, "prompt_tokens": count}}
                for values, count in zip(outputs, tokens, strict=True)
            ]
        if self.protocol == "tei":
            raw = body.get("raw_scores", False)
            predictions = []
            for values in outputs:
                shown = values if raw else _activation(values)
                ranked = sorted(enumerate(shown), key=lambda pair: pair[1], reverse=True)
                predictions.append([{"score": value, "label": self._label(index)} for index, value in ranked])
            return predictions
        raw = body.get("use_activation") is False
        data: list[dict[str, Any]] = []
        for index, values in enumerate(outputs):
            shown = values if raw else _activation(values)
            if path == "/classify":
                best = max(range(len(shown)), key=shown.__getitem__)
                data.append(
                    {"index": index, "label": self._label(best), "probs": shown, "num_classes": len(shown)}
                )
            else:
                pooled: Any = [[0.0] * len(shown), shown] if reply.per_token else shown
                data.append({"index": index, "object": "pooling", "data": pooled})
        usage = {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens), "completion_tokens": 0}
        prefix = "classify" if path == "/classify" else "pool"
        return {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "object": "list",
            "created": int(time.time()),
            "model": self.model,
            "data": data,
            "usage": {**usage, "prompt_tokens_details": None},
        }


def _activation(values: list[float]) -> list[float]:
    """vLLM's and TEI's default: sigmoid for one output, softmax for several."""
    if len(values) == 1:
        return [1 / (1 + math.exp(-values[0]))]
    top = max(values)
    exps = [math.exp(value - top) for value in values]
    return [value / sum(exps) for value in exps]


def main() -> None:
    """``python -m rewardlab.testing --latency 0.2``: serve a fixed answer with a
    fixed latency until interrupted (for benchmarks in a separate process)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--text", default='{"score": 7}', help="the answer")
    args = parser.parse_args()
    server = ScriptedServer(Reply(text=args.text), latency_s=args.latency)
    print(server.start(), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
