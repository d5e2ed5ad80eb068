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

``python -m rewardlab.testing --latency 0.2`` serves one fixed answer with a fixed latency in a
process of its own, until interrupted (for benchmarks of a client).
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint's annotations at run time,
# and ``Request`` there names an import inside `ScriptedServer.app`.
import asyncio
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.llm.backend import ChatResponse, TokenLogprob
from rewardlab.llm.openai_format import write_response
from rewardlab.optional import require
from rewardlab.rewards.contract import Usage

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI


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


class ScriptedServer:
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
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

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

    def start(self) -> str:
        """Start serving on a free port in a background thread, and return once it accepts
        requests.

        Returns:
            The ``/v1`` address (also `url`), e.g. ``http://127.0.0.1:40123/v1``.

        Raises:
            MissingDependency: FastAPI or uvicorn is not installed (the ``judges`` extra).
            RuntimeError: The server thread ended before it started serving.
        """
        require("uvicorn", "the scripted server")
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
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
        The requests received stay in `requests`."""
        if self._server is not None:
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> "ScriptedServer":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


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
