"""``rewardlab serve-model`` over real HTTP, through the openai client and litellm."""

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from rewardlab.llm.backend import ChatRequest
from rewardlab.llm.backends import make_backend


def post(url, body):
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_lists_its_model(local_server):
    with urllib.request.urlopen(f"{local_server}/models", timeout=30) as response:
        listed = json.loads(response.read())
    assert [m["id"] for m in listed["data"]] == ["smollm2"]


def test_chat_completion_with_logprobs_over_raw_http(local_server):
    status, body = post(
        local_server,
        {
            "model": "smollm2",
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 6,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": 3,
        },
    )
    assert status == 200
    choice = body["choices"][0]
    content = choice["logprobs"]["content"]
    assert "".join(t["token"] for t in content) == choice["message"]["content"]
    assert all(len(t["top_logprobs"]) == 3 and bytes(t["bytes"]).decode() == t["token"] for t in content)
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_guided_choice_is_honoured(local_server):
    status, body = post(
        local_server,
        {
            "messages": [{"role": "user", "content": "Pick one."}],
            "guided_choice": ["alpha", "beta"],
            "temperature": 0,
        },
    )
    assert status == 200 and body["choices"][0]["message"]["content"] in ("alpha", "beta")


def test_a_choice_as_vllm_takes_it_since_0_10_2_is_honoured(local_server):
    status, body = post(
        local_server,
        {
            "messages": [{"role": "user", "content": "Pick one."}],
            "structured_outputs": {"choice": ["alpha", "beta"]},
            "temperature": 0,
        },
    )
    assert status == 200 and body["choices"][0]["message"]["content"] in ("alpha", "beta")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"structured_outputs": {"regex": "a+"}}, "only choice is supported, got ['regex']"),
        ({"n": 2}, "n > 1"),
        ({"stream": True}, "streaming"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": []}, "messages"),
        ({"top_logprobs": 50, "logprobs": True}, "top_logprobs"),
        ({"continue_final_message": True}, "continue_final_message needs"),
    ],
)
def test_what_it_cannot_honour_is_refused_with_an_openai_error(local_server, change, problem):
    status, body = post(local_server, {"messages": [{"role": "user", "content": "hi"}], **change})
    assert status == 400
    assert problem in body["error"]["message"] and body["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "openai", "model": "smollm2"},
        {"type": "litellm", "model": "openai/smollm2", "logprobs": True},
        {"type": "http", "model": "smollm2"},
    ],
    ids=["openai", "litellm", "http"],
)
def test_every_http_backend_gets_answers_and_logprobs(local_server, spec):
    key = "api_base" if spec["type"] == "litellm" else "base_url"
    backend = make_backend({**spec, key: local_server})
    request = ChatRequest.of(
        [{"role": "user", "content": "Is 3 odd? Yes or No."}], max_tokens=4, top_logprobs=2
    )

    async def run():
        async with backend.session():
            return await backend.complete(request)

    response = asyncio.run(run())
    assert response.text
    assert response.logprobs and all(len(t.top) == 2 for t in response.logprobs)
    assert response.usage.prompt_tokens > 0
