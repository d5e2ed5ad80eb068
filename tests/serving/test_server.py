"""``rewardlab serve`` over real HTTP: every endpoint, every limit, and what it survives."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rewardlab import Sample, Score, build
from rewardlab.serving.wire import WireScore
from tests.serving.conftest import Probe, metric, post, request

MATH = [
    {"prompt": "1+1?", "completion": "So the answer is $\\boxed{2}$.", "reference": "2", "id": "right"},
    {"prompt": "1+1?", "completion": "I think \\boxed{3}", "reference": "2", "id": "wrong"},
    {"prompt": "1+1?", "completion": "\\boxed{2}", "id": "no-reference"},
    {
        "prompt": [{"role": "user", "content": "Half of 1?"}],
        "completion": [{"role": "assistant", "content": "\\boxed{\\frac{1}{2}}"}],
        "reference": "0.5",
        "id": "chat",
        "fields": {"source": "test"},
    },
]


@pytest.fixture(scope="module")
def math_reward():
    reward = build({"type": "math_answer"})
    yield reward
    reward.close()


def samples_of(records):
    return [Sample(**record) for record in records]


def test_score_answers_every_field_one_per_sample_in_order(serve, math_reward):
    server = serve(math_reward)
    status, _, body = post(server.url, "/score", {"samples": MATH})
    assert status == 200 and body["reward"] == "math_answer" and body["latency_s"] > 0
    expected = math_reward.score(samples_of(MATH))
    assert [s["id"] for s in body["scores"]] == [r["id"] for r in MATH]
    for answered, local in zip(body["scores"], expected, strict=True):
        assert set(answered) == {"id", *local.to_dict()}
        assert {k: v for k, v in answered.items() if k != "id"} == local.to_dict()
    assert [s["status"] for s in body["scores"]] == ["ok", "ok", "invalid_input", "ok"]
    assert [s["value"] for s in body["scores"]] == [1.0, 0.0, None, 1.0]


def test_the_wire_score_model_has_every_field_of_a_score():
    assert set(WireScore.model_fields) == {"id", *Score(value=1.0).to_dict()}


def test_health_ready_and_readiness_waits_for_the_warm_up(serve):
    probe = Probe(hold_warmup=True)
    server = serve(probe, ready=False)
    assert probe.entered.acquire(timeout=10)  # the warm-up probe is scoring
    assert request(f"{server.url}/health")[:1] == (200,)
    status, _, body = request(f"{server.url}/ready")
    assert status == 503 and body["ready"] is False
    assert metric(server.url, "rewardlab_ready") == 0.0
    probe.gate.set()
    deadline = time.monotonic() + 10
    while request(f"{server.url}/ready")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    body = request(f"{server.url}/ready")[2]
    assert body["ready"] is True and body["reward"] == "probe" and body["warmup"]["probe_status"] == "ok"
    assert metric(server.url, "rewardlab_ready") == 1.0


def test_get_reward_speaks_openrlhf(serve, math_reward):
    server = serve(math_reward)
    prompts = ["<|user|>1+1?<|assistant|>", "<|user|>2+2?<|assistant|>"]
    responses = ["The answer is \\boxed{2}.<|end|>", "\\boxed{5}<|end|>"]
    body = {
        "query": [p + r for p, r in zip(prompts, responses, strict=True)],
        "prompts": prompts,
        "labels": ["2", 4],  # OpenRLHF labels may be numbers
    }
    status, _, answer = post(server.url, "/get_reward", body)
    assert status == 200
    assert answer["rewards"] == [1.0, 0.0] and answer["scores"] == [1.0, 0.0]
    assert answer["extra_logs"] == {"math_answer/failed": [0.0, 0.0]}
    assert answer["statuses"] == ["ok", "ok"]
    # The completion is the query after its prompt, exactly what scoring it in process sees.
    local = math_reward.score([Sample(prompt=prompts[1], completion=responses[1], reference="4")])
    assert local[0].value == answer["rewards"][1]


def test_get_reward_failures_become_the_failure_value_and_are_flagged(serve, math_reward):
    server = serve(math_reward, failure_value=-1.0)
    body = {"query": ["Q:\\boxed{2}", "Q:\\boxed{2}"], "prompts": ["Q:", "Q:"], "labels": ["2", None]}
    status, _, answer = post(server.url, "/get_reward", body)
    assert status == 200
    assert answer["rewards"] == [1.0, -1.0]
    assert answer["statuses"] == ["ok", "invalid_input"] and "reference" in answer["reasons"][1]
    assert answer["extra_logs"]["math_answer/failed"] == [0.0, 1.0]
    assert metric(server.url, "rewardlab_get_reward_substituted_total", status="invalid_input") == 1.0


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"query": ["Q:a", "R:b"], "prompts": ["Q:", "Q:"]}, "query[1] does not start with prompts[1]"),
        ({"query": ["Q:a"], "prompts": ["Q:", "Q:"]}, "prompts has 2 items but query has 1"),
        ({"query": ["Q:a"], "prompts": ["Q:"], "labels": []}, "labels has 0 items"),
        ({"prompts": ["Q:"]}, "query: Field required"),
        ({"query": ["Q:a"], "prompts": ["Q:"], "labels": [{"x": 1}]}, "labels[0]: must be text, a number"),
    ],
)
def test_get_reward_refuses_what_it_cannot_split(serve, math_reward, body, problem):
    server = serve(math_reward)
    status, _, answer = post(server.url, "/get_reward", body)
    assert status == 422 and problem in answer["detail"]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"samples": [', "Invalid JSON"),
        (b"[]", "Input should be an object"),
        ({"samples": [{"completion": "a"}, {"completion": 7}]}, "samples[1].completion: must be text"),
        (
            {"samples": [{"completion": [{"content": "x"}]}]},
            "samples[0].completion: message 0 needs a 'role'",
        ),
        ({"samples": [{"completion": "a", "idd": "x"}]}, "samples[0].idd: Extra inputs are not permitted"),
        ({"samples": [{"completion": "a", "fields": [1]}]}, "samples[0].fields: Input should be an object"),
        ({"samples": [{"reference": 2}]}, "samples[0].reference: Input should be a valid string"),
    ],
)
def test_malformed_requests_get_422_naming_the_sample_and_field(serve, body, problem):
    server = serve(Probe())
    status, _, answer = post(server.url, "/score", body)
    assert status == 422 and problem in answer["detail"], answer


def test_bearer_token_guards_scoring_but_not_probes(serve):
    server = serve(Probe(), token="s3cret")
    body = {"samples": [{"completion": "abc", "id": "a"}]}
    status, headers, answer = post(server.url, "/score", body)
    assert status == 401 and "missing bearer token" in answer["detail"]
    assert headers["www-authenticate"] == "Bearer"
    assert post(server.url, "/score", body, authorization="Bearer wrong")[0] == 401
    assert (
        post(server.url, "/get_reward", {"query": [], "prompts": []}, authorization="Basic s3cret")[0] == 401
    )
    status, _, answer = post(server.url, "/score", body, authorization="Bearer s3cret")
    assert status == 200 and answer["scores"][0]["value"] == 3.0
    for path in ("/health", "/ready", "/metrics"):
        assert request(f"{server.url}{path}")[0] == 200


def test_body_and_batch_caps(serve):
    server = serve(Probe(), max_body_bytes=1000, max_batch_size=3)
    big = {"samples": [{"completion": "x" * 2000}]}
    status, _, answer = post(server.url, "/score", big)
    assert status == 413 and "exceeds max_body_bytes 1000" in answer["detail"]
    # Without a Content-Length the body is counted as it arrives.
    status, _, answer = post(
        server.url, "/score", iter([b'{"samples": [{"completion": "', b"x" * 2000, b'"}]}'])
    )
    assert status == 413 and "exceeds max_body_bytes 1000" in answer["detail"]
    status, _, answer = post(server.url, "/score", {"samples": [{"completion": "a"}] * 4})
    assert status == 413 and "batch of 4 samples exceeds max_batch_size 3" in answer["detail"]
    status, _, answer = post(server.url, "/get_reward", {"query": ["a"] * 4, "prompts": [""] * 4})
    assert status == 413 and "max_batch_size 3" in answer["detail"]
    assert post(server.url, "/score", {"samples": [{"completion": "a"}] * 3})[0] == 200


def test_a_reward_that_raises_fails_its_batch_and_the_server_goes_on(serve):
    server = serve(Probe())
    status, _, answer = post(
        server.url,
        "/score",
        {"samples": [{"completion": "ok", "id": "a"}, {"completion": "boom", "id": "b"}]},
    )
    assert status == 200 and [s["id"] for s in answer["scores"]] == ["a", "b"]
    assert all(
        s["status"] == "error" and "RuntimeError: asked to fail" in s["reason"] for s in answer["scores"]
    )
    assert all(s["value"] is None for s in answer["scores"])
    status, _, answer = post(server.url, "/score", {"samples": [{"completion": "fine", "id": "c"}]})
    assert status == 200 and answer["scores"][0]["value"] == 4.0
    assert metric(server.url, "rewardlab_samples_total", endpoint="/score", status="error") == 2.0


def test_past_the_deadline_every_sample_times_out_and_the_batch_is_cancelled(serve):
    probe = Probe(slow_s=30.0)
    server = serve(probe, deadline_s=0.5)
    started = time.monotonic()
    body = {"samples": [{"completion": "slow", "id": "a"}, {"completion": "fast", "id": "b"}]}
    status, _, answer = post(server.url, "/score", body)
    assert time.monotonic() - started < 5
    assert status == 200 and [s["id"] for s in answer["scores"]] == ["a", "b"]
    assert all(s["status"] == "timeout" and "deadline" in s["reason"] for s in answer["scores"])
    assert probe.cancelled.wait(5)
    status, _, answer = post(server.url, "/score", {"samples": [{"completion": "fast"}]})
    assert status == 200 and answer["scores"][0]["status"] == "ok"


def test_bounded_concurrency_queues_then_refuses_with_retry_after(serve):
    probe = Probe()
    server = serve(probe, max_concurrency=1, queue=1, retry_after_s=2.5)
    service = server.service
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(post, server.url, "/score", {"samples": [{"completion": "gate", "id": "1"}]})
        assert probe.entered.acquire(timeout=10)  # scoring, holding the only slot
        second = pool.submit(post, server.url, "/score", {"samples": [{"completion": "queued", "id": "2"}]})
        deadline = time.monotonic() + 10
        while service.admission.admitted < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert metric(server.url, "rewardlab_batches_scoring") == 1.0
        assert metric(server.url, "rewardlab_requests_waiting") == 1.0
        started = time.monotonic()
        status, headers, answer = post(server.url, "/score", {"samples": [{"completion": "refused"}]})
        assert time.monotonic() - started < 1.0  # refused at once, not after waiting
        assert status == 503 and headers["retry-after"] == "3" and "busy" in answer["detail"]
        assert not second.done()
        probe.gate.set()
        assert first.result(timeout=10)[2]["scores"][0]["value"] == 4.0
        assert second.result(timeout=10)[2]["scores"][0]["value"] == 6.0
    assert probe.batches[-2:] == [["1"], ["2"]]  # the queued batch scored only after the first
    assert metric(server.url, "rewardlab_requests_total", endpoint="/score", code="503") == 1.0


def test_metrics_count_requests_and_statuses(serve, math_reward):
    server = serve(math_reward, token="t")
    url = server.url

    def counts():
        return (
            metric(url, "rewardlab_requests_total", endpoint="/score", code="200"),
            metric(url, "rewardlab_requests_total", endpoint="/score", code="401"),
            metric(url, "rewardlab_samples_total", reward="math_answer", endpoint="/score", status="ok"),
            metric(
                url,
                "rewardlab_samples_total",
                reward="math_answer",
                endpoint="/score",
                status="invalid_input",
            ),
            metric(url, "rewardlab_request_seconds_count", endpoint="/score"),
        )

    before = counts()
    assert post(url, "/score", {"samples": MATH}, authorization="Bearer t")[0] == 200
    assert post(url, "/score", {"samples": MATH})[0] == 401
    assert post(url, "/score", {"samples": MATH[:1]}, authorization="Bearer t")[0] == 200
    after = counts()
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 1, 4, 1, 3]
    status, headers, text = request(f"{url}/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert b"# TYPE rewardlab_request_seconds histogram" in text


def test_servers_in_one_process_keep_their_own_metrics(serve):
    one, two = serve(Probe()), serve(Probe())
    post(one.url, "/score", {"samples": [{"completion": "a"}]})
    assert metric(one.url, "rewardlab_samples_total", status="ok") == 1.0
    assert metric(two.url, "rewardlab_samples_total", status="ok") == 0.0


def test_many_concurrent_clients_each_get_exactly_their_ids(serve):
    server = serve(Probe(), max_concurrency=2, queue=64)

    def client(number):
        ids = [f"{number}-{i}" for i in range(3)]
        body = {"samples": [{"completion": "x" * number, "id": i} for i in ids]}
        status, _, answer = post(server.url, "/score", body)
        return ids, status, answer

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(client, range(32)))
    for (ids, status, answer), number in zip(results, range(32), strict=True):
        assert status == 200
        assert [s["id"] for s in answer["scores"]] == ids
        assert all(s["value"] == float(number) for s in answer["scores"])


def test_a_client_that_vanishes_does_not_leak_its_place(serve):
    probe = Probe(slow_s=0.3)
    server = serve(probe, max_concurrency=1, queue=0)
    with pytest.raises(TimeoutError):
        request(f"{server.url}/score", "POST", {"samples": [{"completion": "slow"}]}, timeout=0.05)
    deadline = time.monotonic() + 10
    while server.service.admission.admitted:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert post(server.url, "/score", {"samples": [{"completion": "after"}]})[0] == 200


def test_a_sample_that_grinds_holds_neither_health_nor_deadlines(serve):
    """A pattern that backtracks exponentially on one completion holds the CPU (and, in the
    server's process, the GIL) for as long as it runs. Run in a rule worker, it costs its sample
    budget: health answers throughout, the other samples are scored, and a deadline shorter
    than the budget still ends the request on time."""
    evil = {"completion": "a" * 40 + "!", "id": "evil"}
    budgeted = build({"type": "regex_match", "pattern": "^(a+)+$", "sample_budget_s": 1.5})
    server = serve(budgeted, deadline_s=30.0)
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        answer = pool.submit(
            post, server.url, "/score", {"samples": [evil, {"completion": "aaa", "id": "fine"}]}
        )
        health = []
        while not answer.done():
            asked = time.monotonic()
            assert request(f"{server.url}/health")[0] == 200
            health.append(time.monotonic() - asked)
            time.sleep(0.05)
        status, _, scored = answer.result()
    assert status == 200 and time.monotonic() - started < 10
    evil_score, fine_score = scored["scores"]
    assert evil_score["status"] == "timeout" and "budget" in evil_score["reason"]
    assert (fine_score["status"], fine_score["value"]) == ("ok", 1.0)
    assert len(health) >= 5 and max(health) < 0.5, health

    patient = build({"type": "regex_match", "pattern": "^(a+)+$", "sample_budget_s": 60.0})
    server = serve(patient, deadline_s=1.0)
    started = time.monotonic()
    status, _, scored = post(server.url, "/score", {"samples": [evil]})
    assert time.monotonic() - started < 5
    assert scored["scores"][0]["status"] == "timeout" and "deadline" in scored["scores"][0]["reason"]
    assert request(f"{server.url}/health")[0] == 200
    budgeted.close()
    patient.close()
