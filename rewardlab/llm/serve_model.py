"""``rewardlab serve-model``: a small OpenAI-compatible HTTP server over any `Backend` (by
default a local transformers model), for users without vLLM and for the judge tests.

It speaks the subset of the chat-completions API that judging needs: ``messages``,
``temperature``, ``max_tokens`` / ``max_completion_tokens``, ``stop``, ``seed``, ``logprobs`` with
``top_logprobs``, and a choice among given answers as vLLM takes it: ``structured_outputs:
{"choice": [...]}`` (vLLM >= 0.10.2) or the older ``guided_choice``. What it cannot honour (``n`` >
1, streaming, JSON schemas, other structured outputs) is refused with a 400 rather than silently
ignored. Errors use OpenAI's error body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rewardlab.errors import BackendError
from rewardlab.llm.backend import Backend, ChatRequest
from rewardlab.llm.openai_format import write_response
from rewardlab.optional import require
from rewardlab.sockets import http_address, listening_socket

DEFAULT_MAX_TOKENS = 512


class _TextPart(BaseModel):
    type: str = "text"
    text: str


class _Message(BaseModel):
    role: str
    content: str | list[_TextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class _StructuredOutputs(BaseModel):
    """vLLM's ``structured_outputs`` (``StructuredOutputsParams``); only ``choice`` is served."""

    model_config = ConfigDict(extra="allow")

    choice: list[str] | None = Field(default=None, min_length=1)


class ChatCompletionBody(BaseModel):
    """A chat-completion request as the server accepts it (unknown fields are ignored, as
    OpenAI-compatible servers do)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[_Message] = Field(min_length=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    guided_choice: list[str] | None = Field(default=None, min_length=1)
    structured_outputs: _StructuredOutputs | None = None
    n: int = 1
    stream: bool = False
    response_format: dict[str, Any] | None = None
    continue_final_message: bool = False
    add_generation_prompt: bool = True

    def refusal(self) -> str | None:
        """Why this request cannot be served as asked, if it cannot."""
        if self.n != 1:
            return "n > 1 is not supported; send separate requests"
        if self.stream:
            return "streaming is not supported"
        if self.response_format and self.response_format.get("type") not in (None, "text"):
            return "response_format JSON modes are not supported; use a choice or parse the text"
        if self.structured_outputs is not None:
            others = sorted(
                key for key, value in (self.structured_outputs.model_extra or {}).items() if value
            )
            if others or self.structured_outputs.choice is None:
                return f"structured_outputs: only choice is supported, got {others or 'no choice'}"
        final_role = self.messages[-1].role
        if self.continue_final_message and (self.add_generation_prompt or final_role != "assistant"):
            return "continue_final_message needs add_generation_prompt false and a final assistant message"
        return None

    def to_request(self) -> ChatRequest:
        stop = [self.stop] if isinstance(self.stop, str) else (self.stop or [])
        return ChatRequest(
            messages=tuple((m.role, m.text()) for m in self.messages),
            temperature=self.temperature,
            max_tokens=self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS,
            top_logprobs=(self.top_logprobs or 0) if self.logprobs else None,
            choices=self._choices(),
            stop=tuple(stop),
            seed=self.seed,
            continue_final=self.continue_final_message,
        )

    def _choices(self) -> tuple[str, ...] | None:
        if self.structured_outputs is not None and self.structured_outputs.choice:
            return tuple(self.structured_outputs.choice)
        return tuple(self.guided_choice) if self.guided_choice else None


def _error(status: int, message: str, kind: str) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(
        status_code=status, content={"error": {"message": message, "type": kind, "code": status}}
    )


def create_app(backend: Backend, model_name: str) -> Any:
    """The FastAPI application serving ``backend`` under the model name ``model_name``."""
    fastapi = require("fastapi", "rewardlab serve-model")
    from fastapi.exceptions import RequestValidationError

    app = fastapi.FastAPI(title="rewardlab serve-model", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Any, error: RequestValidationError) -> Any:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}" for e in error.errors()
        )
        return _error(400, problems, "invalid_request_error")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "rewardlab"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionBody) -> Any:
        refusal = body.refusal()
        if refusal:
            return _error(400, refusal, "invalid_request_error")
        try:
            response = await backend.complete(body.to_request())
        except BackendError as error:
            status = error.status_code or (503 if error.retryable else 500)
            return _error(status, str(error), "invalid_request_error" if status < 500 else "server_error")
        return write_response(response, model_name)

    return app


def serve(
    backend: Backend,
    *,
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted. Port 0 takes a free port; ``on_ready`` gets the ``/v1`` address
    once the socket is bound (so a caller can start the server and read where it listens)."""

    def announce(address: str) -> None:
        if on_ready is not None:
            on_ready(f"{address}/v1")

    serve_app(create_app(backend, model_name), host=host, port=port, on_ready=announce)


def serve_app(
    app: Any, *, host: str = "127.0.0.1", port: int = 8000, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve an ASGI ``app`` until interrupted; ``on_ready`` gets ``http://host:port`` once the
    socket listens."""
    uvicorn = require("uvicorn", "rewardlab serve-model")
    sock = listening_socket(host, port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    if on_ready is not None:
        on_ready(http_address(host, sock))
    server.run(sockets=[sock])
