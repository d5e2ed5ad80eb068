"""A lean backend for OpenAI-compatible servers: chat completions as plain JSON over one aiohttp
session per event loop.

Why a third HTTP backend beside ``openai`` and ``litellm``: against a fast self-hosted judge
(vLLM on the next node) the client's own CPU time per call becomes the limit. Measured here
(`perf/judge_throughput.py`, 2 cores), the official SDK spends about 2.5 ms of CPU per call and
litellm more, while a bare aiohttp request costs about 0.3 ms; 1,000 calls at 200 ms latency and
concurrency 64 then finish within a few percent of the ideal instead of 25% over it. It speaks
only what judging needs (the request fields of `request_arguments`, the response fields of
`read_response`); use ``openai`` or ``litellm`` for anything else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from rewardlab.errors import BackendError
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse, continue_final_mode
from rewardlab.llm.backend import choice_field as choice_field_of
from rewardlab.llm.cost import cost_usd
from rewardlab.llm.openai_backend import request_arguments, status_error
from rewardlab.llm.openai_format import read_response
from rewardlab.optional import require


class HTTPBackend(Backend):
    """Chat completions from an OpenAI-compatible server over aiohttp.

    Args:
        model: Model name the server knows.
        base_url: The server's ``/v1`` address.
        api_key_env: Environment variable holding a bearer token, if the server wants one (read
            at call time, never stored or pickled).
        timeout_s: Time limit of one HTTP request.
        logprobs: Whether the server returns token log-probabilities.
        guided_choice: Whether the server can be told to answer with one of given choices.
        choice_field: How the choices are sent: ``structured_outputs`` (vLLM >= 0.10.2) or
            ``guided_choice`` (older vLLM); see `CHOICE_FIELDS`.
        structured_output: Whether the server honours ``response_format`` JSON schemas.
        continue_final: How the server continues a final assistant message (`Backend`;
            default: vLLM's request fields).
        cost_model: Name to price calls under in litellm's price list (default: none, cost 0).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        logprobs: bool = True,
        guided_choice: bool = False,
        choice_field: str = "structured_outputs",
        structured_output: bool = False,
        continue_final: str | None = "fields",
        cost_model: str | None = None,
    ):
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.supports_logprobs = logprobs
        self.supports_choices = guided_choice
        self.choice_field = choice_field_of(choice_field)
        self.supports_json_schema = structured_output
        self.continue_final = continue_final_mode(continue_final, "fields")
        self.cost_model = cost_model
        self.name = f"http:{base_url}:{model}"

    def _make_session(self) -> Any:
        return json_session("the http judge backend", self.api_key_env, self.timeout_s)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        body = request_arguments(request, self)
        body.update(body.pop("extra_body", {}))  # the SDKs' extra_body is top-level JSON on the wire
        session = self.loop_client(self._make_session)
        decoded = await json_reply(
            session.post(self.url, data=json.dumps({"model": self.model, **body})), self.timeout_s
        )
        response = read_response(decoded)
        if self.cost_model:
            usage = response.usage
            usage.cost_usd = cost_usd(self.cost_model, usage.prompt_tokens, usage.completion_tokens)
        return response


async def json_reply(request: Any, timeout_s: float) -> Any:
    """The decoded JSON body of an aiohttp request (a ``session.post(...)`` or ``get``), or a
    `BackendError`: a non-200 status with the server's message (`status_error`), a timeout, a
    connection failure or a body that is not JSON (the last three retryable)."""
    aiohttp = require("aiohttp", "HTTP model backends")
    try:
        async with request as reply:
            payload = await reply.read()
            if reply.status != 200:
                raise status_error(reply.status, _error_message(payload), reply.headers)
    except TimeoutError as error:
        raise BackendError(f"request timed out after {timeout_s:g} s", retryable=True) from error
    except aiohttp.ClientError as error:
        raise BackendError(f"connection failed: {error}", retryable=True) from error
    try:
        return json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BackendError(f"malformed response: {error}", retryable=True) from error


def _error_message(payload: bytes) -> str:
    """The message of an error body (OpenAI-style ``error.message``, TEI's ``error``, FastAPI's
    ``detail``), or the start of whatever came back."""
    try:
        body = json.loads(payload)
    except ValueError:
        return payload[:200].decode(errors="replace")
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and "message" in error:
            return str(error["message"])
        for key in ("error", "message", "detail"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return payload[:200].decode(errors="replace")


def json_session(purpose: str, api_key_env: str | None, timeout_s: float) -> Any:
    """An aiohttp session for JSON requests, with the bearer token from ``api_key_env`` when it
    is set and a time limit per request. Its connections are unlimited: the client in front of
    it (`ModelClient`, `PoolingClient`) bounds concurrency."""
    aiohttp = require("aiohttp", purpose)
    headers = {"content-type": "application/json"}
    key = os.environ.get(api_key_env) if api_key_env else None
    if key:
        headers["authorization"] = f"Bearer {key}"
    return aiohttp.ClientSession(
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        connector=aiohttp.TCPConnector(limit=0),
    )
