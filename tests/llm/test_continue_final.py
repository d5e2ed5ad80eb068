"""Continuing a final assistant message: which backends can, what each sends, and cache keys
that stay what they were for every request that does not ask for it."""

import hashlib
import json

import pytest

from rewardlab.errors import BackendError
from rewardlab.llm.backend import ChatRequest
from rewardlab.llm.http_backend import HTTPBackend
from rewardlab.llm.litellm_backend import LiteLLMBackend
from rewardlab.llm.openai_backend import OpenAIBackend, request_arguments

MESSAGES = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "First, 2 + 2"}]


def test_older_cache_keys_stay_valid():
    request = ChatRequest.of(MESSAGES[:1], max_tokens=7)
    # The key as it was computed before continue_final existed.
    before = {
        "backend": "b", "namespace": "n", "messages": [["user", "2 + 2?"]], "temperature": 0.0,
        "max_tokens": 7, "top_logprobs": None, "choices": None, "json_schema": None, "stop": [], "seed": None,
    }  # fmt: skip
    expected = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert request.fingerprint("b", "n") == expected
    continued = ChatRequest.of(MESSAGES, max_tokens=7, continue_final=True)
    assert continued.fingerprint("b", "n") != ChatRequest.of(MESSAGES, max_tokens=7).fingerprint("b", "n")


@pytest.mark.parametrize(
    ("backend", "sends_fields"),
    [
        (OpenAIBackend("m", base_url="http://127.0.0.1:1/v1"), True),
        (HTTPBackend("m", base_url="http://127.0.0.1:1/v1"), True),
        (LiteLLMBackend("hosted_vllm/m", api_base="http://127.0.0.1:1/v1"), True),
        (LiteLLMBackend("anthropic/claude-x"), False),  # Anthropic continues a trailing message itself
        (OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", continue_final="prefill"), False),
    ],
    ids=["openai-server", "http", "litellm-vllm", "litellm-anthropic", "prefill"],
)
def test_what_each_backend_sends(backend, sends_fields):
    arguments = request_arguments(ChatRequest.of(MESSAGES, continue_final=True), backend)
    assert arguments["messages"][-1] == MESSAGES[-1]
    extra = arguments.get("extra_body", {})
    if sends_fields:
        assert extra == {"continue_final_message": True, "add_generation_prompt": False}
    else:
        assert "continue_final_message" not in extra
    assert "extra_body" not in request_arguments(ChatRequest.of(MESSAGES), backend)


@pytest.mark.parametrize(
    "backend",
    [OpenAIBackend("gpt-4o-mini"), LiteLLMBackend("openai/gpt-4o-mini")],
    ids=["openai", "litellm-openai"],
)
def test_a_backend_that_cannot_continue_refuses(backend):
    assert backend.continue_final is None
    with pytest.raises(BackendError, match="cannot continue an assistant message") as error:
        request_arguments(ChatRequest.of(MESSAGES, continue_final=True), backend)
    assert not error.value.retryable


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="continue_final must be"):
        OpenAIBackend("m", continue_final="yes")
