"""A backend for any provider litellm supports (OpenAI, Anthropic, Gemini, Bedrock, Together,
vLLM, Ollama, ...), named the litellm way: ``"anthropic/claude-..."``, ``"openai/<model>"`` with
``api_base`` for an OpenAI-compatible server.

litellm's own retries are off: `ModelClient` retries, with one policy for every backend.
"""

from __future__ import annotations

import json
import os

from rewardlab.errors import BackendError
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse, continue_final_mode
from rewardlab.llm.backend import choice_field as choice_field_of
from rewardlab.llm.cost import cost_usd, import_litellm
from rewardlab.llm.openai_backend import request_arguments, status_error
from rewardlab.llm.openai_format import read_response


class LiteLLMBackend(Backend):
    """Chat completions through ``litellm.acompletion``.

    Args:
        model: litellm model name, provider first (``"openai/gpt-4o-mini"``).
        api_base: Server address, for self-hosted or OpenAI-compatible servers.
        api_key_env: Environment variable holding the API key (read at call time, never stored
            or pickled); None lets litellm find the provider's usual variable (or, with
            ``api_base``, sends a placeholder: self-hosted servers rarely need a key).
        timeout_s: Time limit of one request.
        logprobs: Whether the provider returns token log-probabilities.
        guided_choice: Whether the server can be told to answer with one of given choices.
        choice_field: How the choices are sent: ``structured_outputs`` (vLLM >= 0.10.2) or
            ``guided_choice`` (older vLLM); see `CHOICE_FIELDS`.
        structured_output: Whether the provider honours ``response_format`` JSON schemas.
        continue_final: How the provider continues a final assistant message (`Backend`);
            ``auto``: prefill for Anthropic models, vLLM's request fields with an ``api_base``,
            otherwise none.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        logprobs: bool = False,
        guided_choice: bool = False,
        choice_field: str = "structured_outputs",
        structured_output: bool = False,
        continue_final: str | None = "auto",
    ):
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.supports_logprobs = logprobs
        self.supports_choices = guided_choice
        self.choice_field = choice_field_of(choice_field)
        self.supports_json_schema = structured_output
        default = "prefill" if model.startswith("anthropic/") else "fields" if api_base else None
        self.continue_final = continue_final_mode(continue_final, default)
        self.name = f"litellm:{api_base + ':' if api_base else ''}{model}"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        litellm = import_litellm()
        arguments = request_arguments(request, self)
        if self.api_base:
            arguments["api_base"] = self.api_base
        if self.api_key_env:
            arguments["api_key"] = os.environ.get(self.api_key_env)
        elif self.api_base:
            # Self-hosted servers usually need no key, but litellm's OpenAI route insists on one.
            arguments["api_key"] = "no-key-needed"
        try:
            body = await litellm.acompletion(
                model=self.model, timeout=self.timeout_s, num_retries=0, **arguments
            )
        except litellm.Timeout as error:
            raise BackendError(f"request timed out after {self.timeout_s:g} s", retryable=True) from error
        except Exception as error:
            raise _classified(error) from error
        response = read_response(body)
        response.usage.cost_usd = cost_usd(
            self.model, response.usage.prompt_tokens, response.usage.completion_tokens
        )
        return response


def _classified(error: Exception) -> BackendError:
    """A `BackendError` from whatever litellm raised: by HTTP status where it has one (litellm's
    exceptions carry the provider's), else by kind."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and status >= 400:
        headers = getattr(error, "litellm_response_headers", None) or getattr(
            getattr(error, "response", None), "headers", None
        )
        return status_error(status, str(error), headers)
    if isinstance(error, json.JSONDecodeError | ValueError):
        return BackendError(f"malformed response: {error}", retryable=True)
    return BackendError(f"{type(error).__name__}: {error}", retryable=True)
