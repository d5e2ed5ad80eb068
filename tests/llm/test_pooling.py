"""`PoolingClient` against scripted pooling servers over real HTTP, one per protocol (vLLM's
/pooling and /classify, SGLang's /classify, TEI's /predict): the request bodies each protocol
documents, reading their answers, and failures as statuses - malformed answers, 5xx then
success, timeouts, a server that stays down, refusals, the circuit breaker."""

import asyncio
import socket
import time

import pytest

from rewardlab.llm.client import ClientOptions
from rewardlab.llm.pooling import PoolingBackend, PoolingClient, PoolingInput
from rewardlab.rewards.contract import Status
from rewardlab.testing import PoolingReply, ScriptedPoolingServer

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "cache": None}
TEXTS = [PoolingInput(text="abcd"), PoolingInput(text="abcdefgh")]
CHAT = PoolingInput(messages=({"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}))


def client_for(url, protocol, *, timeout_s=5.0, extra_body=None, model=None, **options):
    backend = PoolingBackend(url, protocol, timeout_s=timeout_s, extra_body=extra_body, model=model)
    return PoolingClient(backend, ClientOptions(**{**FAST, **options}))


def call(client, inputs):
    async def run():
        async with client.session():
            return await client.score(inputs)

    return asyncio.run(run())


def outputs(outcome):
    return [list(item.outputs) for item in outcome.pooled]


@pytest.fixture
def vllm():
    with ScriptedPoolingServer("vllm") as server:
        yield server


def test_vllm_pooling_sends_texts_as_one_batch_and_asks_for_raw_outputs(vllm):
    outcome = call(client_for(vllm.url, "vllm_pooling", model="rm"), TEXTS)
    assert outcome.status is Status.OK and outputs(outcome) == [[0.4], [0.8]]
    assert vllm.paths == ["/pooling"]
    assert vllm.requests == [{"model": "rm", "input": ["abcd", "abcdefgh"], "use_activation": False}]
    assert outcome.usage.prompt_tokens == 12 and outcome.attempts == 1


def test_vllm_messages_go_as_one_conversation_the_server_renders(vllm):
    outcome = call(client_for(vllm.url, "vllm_pooling"), [CHAT])
    assert outputs(outcome) == [[0.5]]
    assert vllm.requests[0]["messages"] == [dict(message) for message in CHAT.messages]


def test_vllm_token_ids_and_the_classify_route(vllm):
    ids = [PoolingInput(token_ids=(1, 2, 3)), PoolingInput(token_ids=(4, 5))]
    outcome = call(client_for(vllm.url, "vllm_classify"), ids)
    assert outputs(outcome) == [[pytest.approx(0.3)], [pytest.approx(0.2)]]
    assert vllm.paths == ["/classify"] and vllm.requests[0]["input"] == [[1, 2, 3], [4, 5]]


def test_without_use_activation_vllm_would_answer_a_sigmoid(vllm):
    """Why the client says ``use_activation: false``: the scripted server, like vLLM, applies
    the default activation otherwise."""
    raw = call(client_for(vllm.url, "vllm_pooling"), [PoolingInput(text="a" * 30)])
    squashed = call(client_for(vllm.url, "vllm_pooling", extra_body={"use_activation": True}), TEXTS[:1])
    assert outputs(raw) == [[3.0]]
    assert outputs(squashed) == [[pytest.approx(1 / (1 + 2.718281828459045**-0.4))]]


def test_a_per_token_answer_is_read_at_its_last_row(vllm):
    vllm.script(PoolingReply(outputs=[[1.5, -2.0]], per_token=True))
    outcome = call(client_for(vllm.url, "vllm_pooling"), TEXTS[:1])
    assert outputs(outcome) == [[1.5, -2.0]] and outcome.pooled[0].last_token_of == 2


def test_vllm_answers_out_of_order_are_put_back_by_index(vllm):
    body = (
        '{"object": "list", "data": [{"index": 1, "object": "pooling", "data": [2.0]},'
        ' {"index": 0, "object": "pooling", "data": [1.0]}], "usage": {"prompt_tokens": 3}}'
    )
    vllm.script(PoolingReply(raw_body=body))
    assert outputs(call(client_for(vllm.url, "vllm_pooling"), TEXTS)) == [[1.0], [2.0]]


def test_sglang_takes_texts_or_token_ids_and_answers_embeddings():
    with ScriptedPoolingServer("sglang", lambda item: [len(item), -1.0]) as server:
        texts = call(client_for(server.url, "sglang", model="rm"), TEXTS)
        ids = call(client_for(server.url, "sglang"), [PoolingInput(token_ids=(7, 8, 9))])
    assert outputs(texts) == [[4.0, -1.0], [8.0, -1.0]] and outputs(ids) == [[3.0, -1.0]]
    assert server.paths == ["/classify", "/classify"]
    assert server.requests == [{"model": "rm", "text": ["abcd", "abcdefgh"]}, {"input_ids": [[7, 8, 9]]}]
    assert [item.tokens for item in texts.pooled] == [4, 8] and texts.usage.prompt_tokens == 12


def test_tei_predictions_come_sorted_by_score_and_are_put_back_in_label_order():
    with ScriptedPoolingServer("tei", lambda item: [-1.0, 2.0, 0.5]) as server:
        outcome = call(client_for(server.url, "tei", model="ignored"), TEXTS)
    assert outputs(outcome) == [[-1.0, 2.0, 0.5]] * 2
    assert server.requests == [{"inputs": [["abcd"], ["abcdefgh"]], "raw_scores": True, "truncate": False}]


def test_tei_named_labels_are_ordered_by_the_servers_id2label():
    labels = ["helpfulness", "correctness"]
    with ScriptedPoolingServer("tei", lambda item: [0.25, 0.75], labels=labels) as server:
        outcome = call(client_for(server.url, "tei"), TEXTS[:1])
    assert outputs(outcome) == [[0.25, 0.75]]
    assert server.paths == ["/predict"]  # GET /info is not recorded as a scored request


def test_tei_takes_no_token_ids_or_messages():
    backend = PoolingBackend("http://127.0.0.1:9", "tei")
    with pytest.raises(ValueError, match="takes text"):
        backend.request_body([PoolingInput(token_ids=(1,))])
    with pytest.raises(ValueError, match="messages"):
        backend.request_body([CHAT])


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (PoolingReply(raw_body="{not json"), "malformed response"),
        (PoolingReply(raw_body='{"data": "none"}'), "malformed response"),
        (PoolingReply(outputs=[[1.0]]), "1 results for 2 inputs"),
        (PoolingReply(outputs=[["high"], [1.0]]), "expected a number"),
        (PoolingReply(outputs=[[], [1.0]]), "non-empty list"),
    ],
    ids=["not-json", "wrong-shape", "wrong-count", "not-a-number", "empty"],
)
def test_a_malformed_answer_is_retried_then_reported(vllm, reply, problem):
    vllm.script(reply, reply)
    outcome = call(client_for(vllm.url, "vllm_pooling", max_attempts=2), TEXTS)
    assert outcome.pooled is None and outcome.status is Status.BACKEND_ERROR
    assert problem in outcome.reason and "gave up after 2 attempts" in outcome.reason
    vllm.script(reply)
    recovered = call(client_for(vllm.url, "vllm_pooling", max_attempts=2), TEXTS)
    assert recovered.status is Status.OK and recovered.attempts == 2


@pytest.mark.parametrize("protocol", ["vllm", "sglang", "tei"])
def test_5xx_then_success(protocol):
    name = {"vllm": "vllm_pooling", "sglang": "sglang", "tei": "tei"}[protocol]
    with ScriptedPoolingServer(protocol) as server:
        server.script(PoolingReply(status=500), PoolingReply(status=503, headers={"Retry-After": "0"}))
        outcome = call(client_for(server.url, name), TEXTS)
    assert outcome.status is Status.OK and outcome.attempts == 3 and outputs(outcome) == [[0.4], [0.8]]


def test_a_slow_answer_times_out_and_is_retried(vllm):
    vllm.script(PoolingReply(delay_s=2.0))
    started = time.monotonic()
    outcome = call(client_for(vllm.url, "vllm_pooling", timeout_s=0.3), TEXTS)
    assert outcome.status is Status.OK and outcome.attempts == 2
    assert time.monotonic() - started < 1.9


def test_the_deadline_bounds_a_call_with_its_retries(vllm):
    vllm.script(*[PoolingReply(delay_s=1.0)] * 3)
    outcome = call(client_for(vllm.url, "vllm_pooling", deadline_s=0.4), TEXTS)
    assert outcome.status is Status.TIMEOUT and "0.4 s deadline" in outcome.reason


def test_a_server_that_stays_down_is_a_backend_error_with_its_reason():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    outcome = call(client_for(url, "vllm_pooling", max_attempts=3), TEXTS)
    assert outcome.pooled is None and outcome.status is Status.BACKEND_ERROR and not outcome.refused
    assert "connection failed" in outcome.reason and "gave up after 3 attempts" in outcome.reason
    assert outcome.reason.startswith(f"vllm_pooling:{url}:")


def test_a_refusal_is_not_retried_and_says_so(vllm):
    vllm.script(PoolingReply(status=400))
    outcome = call(client_for(vllm.url, "vllm_pooling"), TEXTS)
    assert outcome.refused and outcome.attempts == 1 and "HTTP 400: scripted 400" in outcome.reason


def test_the_circuit_opens_after_failures_in_a_row(vllm):
    vllm.script(*[PoolingReply(status=500)] * 4)
    client = client_for(vllm.url, "vllm_pooling", max_attempts=2, breaker_threshold=4, breaker_cooldown_s=60)
    first, second, third = (call(client, TEXTS) for _ in range(3))
    assert first.status is second.status is Status.BACKEND_ERROR
    assert "circuit open" in third.reason and len(vllm.requests) == 4


def test_the_client_pickles_without_its_connections(vllm):
    import pickle

    client = client_for(vllm.url, "vllm_pooling")
    call(client, TEXTS)
    copy = pickle.loads(pickle.dumps(client))
    assert outputs(call(copy, TEXTS)) == [[0.4], [0.8]]
