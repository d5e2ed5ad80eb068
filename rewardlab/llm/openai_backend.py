"""A backend for any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, TGI, SGLang,
``rewardlab serve-model``) through the official ``openai`` client, on its aiohttp transport.

The client's own retries are off: `ModelClient` retries, with one policy for every backend.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rewardlab.errors import BackendError
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse, continue_final_mode
from rewardlab.llm.backend import choice_field as choice_field_of
from rewardlab.llm.cost import cost_usd
from rewardlab.llm.openai_format import read_response, retry_after_seconds
from rewardlab.optional import require

_RETRYABLE_STATUS = frozenset({408, 409, 429})


class OpenAIBackend(Backend):
    """Chat completions from an OpenAI-compatible HTTP server.

    Args:
        model: Model name the server knows.
        base_url: The server's ``/v1`` address; None for OpenAI itself.
        api_key_env: Environment variable holding the API key (read at call time, never stored
            or pickled); servers that need no key get a placeholder.
        timeout_s: Time limit of one HTTP request.
        logprobs: Whether the server returns token log-probabilities (OpenAI and vLLM do).
        guided_choice: Whether the server can be told to answer with one of given choices (vLLM
            and ``rewardlab serve-model`` can).
        choice_field: How the choices are sent: ``structured_outputs`` (vLLM >= 0.10.2) or
            ``guided_choice`` (older vLLM); see `CHOICE_FIELDS`.
        structured_output: Whether the server honours ``response_format`` JSON schemas.
        continue_final: How the server continues a final assistant message (`Backend`);
            ``auto``: vLLM's request fields for a self-hosted server, none for OpenAI itself.
        cost_model: Name to price calls under in litellm's price list; by default the model name
            when talking to OpenAI itself, and nothing (cost 0) for other servers.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        logprobs: bool = True,
        guided_choice: bool = False,
        choice_field: str = "structured_outputs",
        structured_output: bool = False,
        continue_final: str | None = "auto",
        cost_model: str | None = None,
    ):
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.supports_logprobs = logprobs
        self.supports_choices = guided_choice
        self.choice_field = choice_field_of(choice_field)
        self.supports_json_schema = structured_output
        self.continue_final = continue_final_mode(continue_final, "fields" if base_url else None)
        self.cost_model = cost_model if cost_model is not None or base_url is not None else model
        self.name = f"openai:{base_url or 'api.openai.com'}:{model}"

    def _make_client(self) -> Any:
        openai = require("openai", "the openai judge backend")
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(self.api_key_env) or "no-key-needed",
            timeout=self.timeout_s,
            max_retries=0,
            # The SDK's aiohttp transport costs about 1.4 ms of CPU per call here against 2.2 ms
            # for its default one; at a few hundred calls per second that is the difference
            # between waiting on the server and waiting on ourselves.
            http_client=openai.DefaultAioHttpClient(timeout=self.timeout_s),
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        openai = require("openai", "the openai judge backend")
        arguments = request_arguments(request, self)
        try:
            body = await self.loop_client(self._make_client).chat.completions.create(
                model=self.model, **arguments
            )
        except openai.APIStatusError as error:
            raise status_error(
                error.status_code, str(error), getattr(error.response, "headers", None)
            ) from error
        except openai.APITimeoutError as error:
            raise BackendError(f"request timed out after {self.timeout_s:g} s", retryable=True) from error
        except openai.APIConnectionError as error:
            raise BackendError(f"connection failed: {error}", retryable=True) from error
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as error:
            raise BackendError(f"malformed response: {error}", retryable=True) from error
        response = read_response(body)
        if self.cost_model:
            response.usage.cost_usd = cost_usd(
                self.cost_model, response.usage.prompt_tokens, response.usage.completion_tokens
            )
        return response


def request_arguments(request: ChatRequest, backend: Backend) -> dict[str, Any]:
    """The chat-completion arguments for ``request``, asking only for what ``backend`` supports."""
    arguments: dict[str, Any] = {
        "messages": request.message_dicts(),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.stop:
        arguments["stop"] = list(request.stop)
    if request.seed is not None:
        arguments["seed"] = request.seed
    if request.top_logprobs is not None and backend.supports_logprobs:
        arguments["logprobs"] = True
        arguments["top_logprobs"] = request.top_logprobs
    extra_body: dict[str, Any] = {}
    if request.choices and backend.supports_choices:
        if backend.choice_field == "guided_choice":
            extra_body["guided_choice"] = list(request.choices)
        else:
            extra_body["structured_outputs"] = {"choice": list(request.choices)}
    if request.continue_final:
        if backend.continue_final is None:
            raise BackendError(
                f"{backend.name} cannot continue an assistant message (set its continue_final to "
                "'fields' for a vLLM-compatible server, or 'prefill' for one that continues it itself)",
                retryable=False,
                status_code=400,
            )
        if backend.continue_final == "fields":
            extra_body.update(continue_final_message=True, add_generation_prompt=False)
    if extra_body:
        arguments["extra_body"] = extra_body
    if request.json_schema and backend.supports_json_schema:
        arguments["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": json.loads(request.json_schema), "strict": True},
        }
    return arguments


def status_error(status: int, message: str, headers: Any) -> BackendError:
    """A `BackendError` for an HTTP error status: 408, 409, 429 and 5xx are worth retrying."""
    retryable = status in _RETRYABLE_STATUS or status >= 500
    return BackendError(
        f"HTTP {status}: {message}",
        retryable=retryable,
        status_code=status,
        retry_after=retry_after_seconds(dict(headers)) if headers is not None else None,
    )
