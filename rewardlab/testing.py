"""A scripted OpenAI-compatible server on 127.0.0.1: answers, faults and latency on demand.

For testing what a judge pipeline does when the backend misbehaves - rate limits with
``Retry-After``, server errors, answers slower than the deadline, malformed JSON, truncated
output, an empty choice list - and for benchmarking the client against a server of known
latency. It runs in a background thread of the calling process and records every request body.

Example:
    >>> with ScriptedServer(Reply(text='{"score": 7}')) as server:  # doctest: +SKIP
    ...     server.script(Reply(status=429, headers={"Retry-After": "1"}))
    ...     ...  # point an OpenAIBackend at server.url
"""

# No `from __future__ import annotations`: FastAPI reads the endpoint's annotations at runtime,
# and ``fastapi.Request`` there names a local import.
import asyncio
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rewardlab.llm.backend import ChatResponse, TokenLogprob
from rewardlab.llm.openai_format import write_response
from rewardlab.optional import require
from rewardlab.rewards.contract import Usage


@dataclass(slots=True)
class Reply:
    """What the server does for one request.

    Attributes:
        text: The answer's content.
        status: HTTP status; anything but 200 sends an OpenAI-style error body.
        headers: Extra response headers (``Retry-After``, say).
        delay_s: Wait this long before answering.
        finish_reason: ``"stop"``, or ``"length"`` for a truncated answer.
        logprobs: Token log-probabilities to return (with ``logprobs: true`` requests).
        raw_body: Send these bytes as the body instead (malformed JSON).
        empty_choices: Answer 200 with an empty choice list.
        usage: Token counts to report.
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


Responder = Reply | Callable[[dict[str, Any]], Reply]


class ScriptedServer:
    """Serves scripted replies: queued ones first, in order, then ``default`` (a `Reply`, or a
    function from the request body to one).

    Args:
        default: The reply when the script is empty.
        latency_s: Added to every reply's delay.
        model: The model name it reports.
    """

    def __init__(self, default: Responder | None = None, *, latency_s: float = 0.0, model: str = "scripted"):
        self.default = default if default is not None else Reply(text='{"score": 5}')
        self.latency_s = latency_s
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.popleft()
        return self.default(body) if callable(self.default) else self.default

    def app(self) -> Any:
        fastapi = require("fastapi", "the scripted server")
        from fastapi.responses import JSONResponse, Response

        app = fastapi.FastAPI()

        @app.post("/v1/chat/completions")
        async def chat_completions(request: fastapi.Request) -> Any:
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
        """Start serving in a background thread; returns the ``/v1`` address."""
        uvicorn = require("uvicorn", "the scripted server")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        config = uvicorn.Config(self.app(), log_level="warning", timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the scripted server failed to start")
            threading.Event().wait(0.01)
        return self.url

    def stop(self) -> None:
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
