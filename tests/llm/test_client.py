"""ModelClient against a scripted server over real HTTP, through each HTTP backend (the openai
SDK, litellm, and the lean aiohttp one): retries, deadlines, the circuit breaker,
deduplication, caching and usage."""

import asyncio
import json
import time

import pytest

from rewardlab.llm.backend import ChatRequest
from rewardlab.llm.backends import make_backend
from rewardlab.llm.client import ClientOptions, ModelClient
from rewardlab.rewards.contract import Status, Usage
from rewardlab.testing import Reply

REQUEST = ChatRequest.of([{"role": "user", "content": "grade this"}], max_tokens=16)
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 2.0, "cache": None}


def backend_for(kind, url, **extra):
    if kind in ("openai", "http"):
        return make_backend({"type": kind, "base_url": url, "model": "scripted", "timeout_s": 5, **extra})
    return make_backend(
        {"type": "litellm", "model": "openai/scripted", "api_base": url, "timeout_s": 5, **extra}
    )


@pytest.fixture(params=["openai", "litellm", "http"])
def kind(request):
    return request.param


def client_for(kind, server, **options):
    return ModelClient(backend_for(kind, server.url), ClientOptions(**{**FAST, **options}))


def call(client, request=REQUEST):
    """One call on a fresh event loop, inside a client session as judges make them."""

    async def run():
        async with client.session():
            return await client.complete(request)

    return asyncio.run(run())


def test_answer_and_usage(kind, scripted):
    scripted.script(Reply(text="Score: 7", usage=Usage(prompt_tokens=31, completion_tokens=4)))
    outcome = call(client_for(kind, scripted))
    assert outcome.ok and outcome.response.text == "Score: 7"
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (31, 4)
    assert (outcome.usage.calls, outcome.usage.cached_calls, outcome.attempts) == (1, 0, 1)
    assert scripted.requests[0]["messages"] == [{"role": "user", "content": "grade this"}]


def test_429_with_retry_after_is_honoured(kind, scripted):
    scripted.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(text="ok"))
    started = time.monotonic()
    outcome = call(client_for(kind, scripted))
    assert outcome.ok and outcome.attempts == 2
    assert time.monotonic() - started >= 1.0
    assert len(scripted.requests) == 2


def test_server_errors_are_retried_then_reported(kind, scripted):
    scripted.script(*[Reply(status=500)] * 3)
    outcome = call(client_for(kind, scripted, max_attempts=3))
    assert outcome.response is None and outcome.status is Status.BACKEND_ERROR
    assert "gave up after 3 attempts" in outcome.reason and "500" in outcome.reason
    assert len(scripted.requests) == 3


def test_a_500_then_an_answer_recovers(kind, scripted):
    scripted.script(Reply(status=503), Reply(text="fine"))
    outcome = call(client_for(kind, scripted))
    assert outcome.ok and outcome.attempts == 2


def test_client_errors_are_not_retried(kind, scripted):
    scripted.script(Reply(status=400))
    outcome = call(client_for(kind, scripted))
    assert outcome.status is Status.BACKEND_ERROR and "400" in outcome.reason
    assert len(scripted.requests) == 1


def test_slow_answers_past_the_deadline_time_out(kind, scripted):
    scripted.script(Reply(text="late", delay_s=3.0))
    started = time.monotonic()
    outcome = call(client_for(kind, scripted, deadline_s=0.5))
    assert outcome.status is Status.TIMEOUT and "0.5 s deadline" in outcome.reason
    assert time.monotonic() - started < 2.5


def test_retry_after_past_the_deadline_gives_up_at_once(kind, scripted):
    scripted.script(Reply(status=429, headers={"Retry-After": "30"}))
    started = time.monotonic()
    # A 10 s deadline: a first litellm call on a busy machine can take seconds by itself, and a
    # 30 s Retry-After is still past the deadline.
    outcome = call(client_for(kind, scripted, deadline_s=10.0, backoff_max_s=60))
    assert outcome.status is Status.TIMEOUT and "deadline would pass" in outcome.reason
    assert time.monotonic() - started < 8.0


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (Reply(raw_body="{not json"), "malformed|Expecting|JSON|decode"),
        (Reply(text="x", empty_choices=True), "choice list is empty|choices"),
    ],
)
def test_malformed_responses_are_retried_then_reported(kind, scripted, fault, problem):
    scripted.script(fault, fault)
    outcome = call(client_for(kind, scripted, max_attempts=2))
    assert outcome.response is None and outcome.status is Status.BACKEND_ERROR
    assert outcome.reason is not None
    import re

    assert re.search(problem, outcome.reason), outcome.reason
    assert len(scripted.requests) == 2


def test_identical_requests_in_flight_are_sent_once(kind, scripted):
    scripted.script(Reply(text="shared", delay_s=0.3))
    client = client_for(kind, scripted)

    async def many():
        async with client.session():
            return await asyncio.gather(*(client.complete(REQUEST) for _ in range(8)))

    outcomes = asyncio.run(many())
    assert len(scripted.requests) == 1
    assert all(o.ok and o.response.text == "shared" for o in outcomes)
    assert sum(o.usage.cached_calls for o in outcomes) == 7


def test_cache_answers_a_second_run_without_calls(kind, scripted, tmp_path):
    scripted.script(Reply(text="cached answer"))
    path = str(tmp_path / "cache.sqlite")
    first = call(client_for(kind, scripted, cache=path))
    second = call(client_for(kind, scripted, cache=path))
    assert first.response.text == second.response.text == "cached answer"
    assert len(scripted.requests) == 1
    assert second.usage.cache_hit and not first.usage.cache_hit


def test_failures_are_not_cached(kind, scripted, tmp_path):
    scripted.script(Reply(status=400), Reply(text="now fine"))
    path = str(tmp_path / "cache.sqlite")
    assert not call(client_for(kind, scripted, cache=path)).ok
    assert call(client_for(kind, scripted, cache=path)).ok


def test_circuit_breaker_stops_calling_a_dead_backend(kind, scripted):
    scripted.default = Reply(status=500)
    client = client_for(kind, scripted, max_attempts=2, breaker_threshold=4, breaker_cooldown_s=60)

    outcomes = [call(client, ChatRequest.of([{"role": "user", "content": f"q{i}"}])) for i in range(6)]
    assert len(scripted.requests) == 4  # two calls of two attempts, then the circuit opened
    assert all(o.status is Status.BACKEND_ERROR for o in outcomes)
    assert "circuit open" in outcomes[-1].reason and "500" in outcomes[-1].reason


def test_concurrency_is_bounded(kind, scripted):
    scripted.default = Reply(text="x", delay_s=0.2)
    client = client_for(kind, scripted, max_concurrency=3)

    async def run():
        requests = [ChatRequest.of([{"role": "user", "content": f"q{i}"}]) for i in range(9)]
        started = time.monotonic()
        async with client.session():
            await asyncio.gather(*(client.complete(r) for r in requests))
        return time.monotonic() - started

    elapsed = asyncio.run(run())
    assert elapsed >= 0.6  # nine calls of 0.2 s, three at a time


def test_cost_comes_from_litellms_price_list(scripted):
    litellm = pytest.importorskip("litellm")
    scripted.script(Reply(text="x", usage=Usage(prompt_tokens=1000, completion_tokens=200)))
    backend = make_backend(
        {"type": "openai", "base_url": scripted.url, "model": "scripted", "cost_model": "gpt-4o-mini"}
    )
    outcome = call(ModelClient(backend, ClientOptions(**FAST)))
    prompt_cost, completion_cost = litellm.cost_per_token(
        model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=200
    )
    assert outcome.usage.cost_usd == pytest.approx(prompt_cost + completion_cost)
    assert outcome.usage.cost_usd > 0


def test_clients_survive_one_event_loop_per_call(kind, scripted):
    client = client_for(kind, scripted)
    for i in range(3):  # Reward.score makes a new loop each time
        request = ChatRequest.of([{"role": "user", "content": f"loop {i}"}])
        assert call(client, request).ok


def test_a_malformed_field_is_a_failed_call_not_a_crash(kind, scripted):
    logprobs = {"content": [{"token": "4", "logprob": None}]}
    broken = Reply(raw_body=json.dumps({"choices": [{"message": {"content": "4"}, "logprobs": logprobs}]}))
    scripted.script(broken, broken)
    request = ChatRequest.of([{"role": "user", "content": "grade"}], top_logprobs=2)
    outcome = call(client_for(kind, scripted, max_attempts=2), request)
    assert outcome.response is None and outcome.status is Status.BACKEND_ERROR
    assert "malformed" in outcome.reason


def test_an_unreadable_cache_is_a_miss_with_a_warning(kind, scripted, tmp_path, caplog):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    scripted.script(Reply(text="fresh"))
    with caplog.at_level("WARNING", logger="rewardlab.llm.client"):
        outcome = call(client_for(kind, scripted, cache=str(path)))
    assert outcome.ok and outcome.response.text == "fresh"
    assert "could not be read" in caplog.text


def test_a_cancelled_probe_does_not_jam_the_circuit(kind, scripted):
    client = client_for(kind, scripted, max_attempts=1, breaker_threshold=1, breaker_cooldown_s=0.2)
    scripted.script(Reply(status=500), Reply(text="slow", delay_s=3.0))
    assert call(client).status is Status.BACKEND_ERROR  # opens the circuit
    time.sleep(0.25)

    async def give_up_on_the_probe():
        async with client.session():
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    client.complete(ChatRequest.of([{"role": "user", "content": "probe"}])), 0.2
                )

    asyncio.run(give_up_on_the_probe())  # the loop's end cancels the probe's call
    scripted.script(Reply(text="back"))
    outcome = call(client, ChatRequest.of([{"role": "user", "content": "after"}]))
    assert outcome.ok and outcome.response.text == "back", outcome.reason


def test_unseeded_samples_are_fresh_draws(kind, scripted, tmp_path):
    scripted.default = Reply(text="draw")
    client = client_for(kind, scripted, cache=str(tmp_path / "cache.sqlite"))
    sampled = ChatRequest.of([{"role": "user", "content": "q"}], temperature=0.7)
    seeded = ChatRequest.of([{"role": "user", "content": "q"}], temperature=0.7, seed=3)
    for request in (sampled, sampled, seeded, seeded):
        assert call(client, request).ok
    assert len(scripted.requests) == 3  # two unseeded draws, one seeded answer then a cache hit
