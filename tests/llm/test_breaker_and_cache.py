import time

from rewardlab.llm.backend import ChatResponse, TokenLogprob
from rewardlab.llm.breaker import CircuitBreaker
from rewardlab.llm.cache import AnswerCache
from rewardlab.rewards.contract import Usage


def test_breaker_opens_after_consecutive_failures_and_probes_after_cooldown():
    breaker = CircuitBreaker(threshold=3, cooldown_s=0.2)
    for _ in range(2):
        breaker.failed("HTTP 500")
    assert breaker.allow() is None
    breaker.failed("HTTP 500")
    refusal = breaker.allow()
    assert refusal is not None and "circuit open" in refusal and "HTTP 500" in refusal
    time.sleep(0.25)
    assert breaker.allow() is None  # the probe
    assert breaker.allow() is not None  # only one probe at a time
    breaker.succeeded()
    assert breaker.allow() is None and not breaker.is_open


def test_a_failed_probe_reopens_the_circuit():
    breaker = CircuitBreaker(threshold=1, cooldown_s=0.1)
    breaker.failed("down")
    time.sleep(0.15)
    assert breaker.allow() is None
    breaker.failed("still down")
    assert breaker.allow() is not None


def test_failures_in_flight_do_not_extend_the_cooldown():
    breaker = CircuitBreaker(threshold=1, cooldown_s=0.2)
    breaker.failed("down")
    time.sleep(0.12)
    breaker.failed("a call that was already in flight")
    time.sleep(0.1)
    assert breaker.allow() is None  # 0.22 s after opening: the probe


def test_an_abandoned_probe_lets_the_next_call_probe():
    breaker = CircuitBreaker(threshold=1, cooldown_s=0.05)
    breaker.failed("down")
    time.sleep(0.06)
    assert breaker.allow() is None
    breaker.abandoned()  # the probe was cancelled: no outcome
    assert breaker.allow() is None


def test_a_success_resets_the_count():
    breaker = CircuitBreaker(threshold=2, cooldown_s=10)
    breaker.failed("x")
    breaker.succeeded()
    breaker.failed("x")
    assert breaker.allow() is None


def test_cache_round_trips_every_field_and_persists(tmp_path):
    path = tmp_path / "cache.sqlite"
    response = ChatResponse(
        text="Score: 7",
        finish_reason="stop",
        logprobs=[TokenLogprob(" 7", -0.5, ((" 7", -0.5), (" 8", -1.5)))],
        usage=Usage(prompt_tokens=12, completion_tokens=3, cost_usd=0.25),
    )
    cache = AnswerCache(path)
    assert cache.get("k") is None
    cache.put("k", "backend", response, nonces=("0123456789ab", "ba9876543210"))
    cache.close()
    again = AnswerCache(path)
    assert again.get("k") == (response, ("0123456789ab", "ba9876543210"))
    assert len(again) == 1


def test_answers_are_purged_by_key(tmp_path):
    cache = AnswerCache(tmp_path / "cache.sqlite")
    for key in ("a", "b", "c"):
        cache.put(key, "backend", ChatResponse(text=key))
    assert cache.purge(["a", "c", "missing"]) == 2
    assert cache.get("a") is None and cache.get("b") is not None and len(cache) == 1


def test_memory_cache_forgets_when_pickled():
    import pickle

    cache = AnswerCache(":memory:")
    cache.put("k", "b", ChatResponse(text="x"))
    copy = pickle.loads(pickle.dumps(cache))
    assert cache.get("k") is not None and copy.get("k") is None
