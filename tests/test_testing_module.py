"""`rewardlab.testing` used the way a user's own tests use it: a judge built against a
`ScriptedServer` over real HTTP, with scripted verdicts, faults and latency; and the module's
doctest."""

import doctest
import time

import pytest

import rewardlab.testing
from rewardlab import Sample, Status, build
from rewardlab.testing import Reply, ScriptedServer


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running


def pointwise_judge(server, **client):
    """A 1-5 pointwise judge on ``server``: no answer cache, short retry waits."""
    return build(
        {
            "type": "pointwise_judge",
            "scale": [1, 5],
            "backend": {"type": "http", "base_url": server.url, "model": "scripted"},
            "client": {"cache": None, "backoff_base_s": 0.01, **client},
        }
    )


def score_one(judge, completion="Paris.", prompt="What is the capital of France?"):
    try:
        [score] = judge.score([Sample(prompt=prompt, completion=completion)])
    finally:
        judge.close()
    return score


def test_a_scripted_verdict_is_the_judges_score(server):
    server.script(Reply(text='Accurate and complete. {"score": 4}'))
    score = score_one(pointwise_judge(server))
    assert score.status is Status.OK and score.value == pytest.approx(0.75)
    assert score.breakdown == {"score": 4.0} and score.details["verdict_source"] == "json"
    [request] = server.requests
    assert request["model"] == "scripted" and "Paris." in request["messages"][-1]["content"]


def test_the_default_reply_answers_once_the_script_is_empty(server):
    server.script(Reply(text='{"score": 1}'))
    judge = pointwise_judge(server)
    try:
        first, second = judge.score([Sample(completion="a"), Sample(completion="b")])
    finally:
        judge.close()
    assert sorted([first.breakdown["score"], second.breakdown["score"]]) == [1.0, 5.0]  # default: 5


def test_a_default_computed_from_the_request():
    def grade(body):
        right = "Paris" in body["messages"][-1]["content"]
        return Reply(text='{"score": 5}' if right else '{"score": 1}')

    with ScriptedServer(grade) as server:
        assert score_one(pointwise_judge(server), completion="Paris.").value == 1.0
        assert score_one(pointwise_judge(server), completion="Lyon.").value == 0.0
    assert len(server.requests) == 2


def test_a_500_then_an_answer_is_retried_and_scored(server):
    server.script(Reply(status=500), Reply(text='{"score": 5}'))
    score = score_one(pointwise_judge(server))
    assert score.status is Status.OK and score.value == 1.0
    assert len(server.requests) == 2


def test_a_server_that_keeps_failing_is_a_backend_error_not_a_zero(server):
    server.default = Reply(status=500)
    score = score_one(pointwise_judge(server, max_attempts=3))
    assert score.status is Status.BACKEND_ERROR and score.value is None
    assert "500" in score.reason
    assert len(server.requests) == 3


def test_a_client_error_is_not_retried(server):
    server.script(Reply(status=400))
    score = score_one(pointwise_judge(server, max_attempts=3))
    assert score.status is Status.BACKEND_ERROR and len(server.requests) == 1


def test_a_slow_reply_is_waited_for(server):
    server.script(Reply(text='{"score": 3}', delay_s=0.3))
    started = time.monotonic()
    score = score_one(pointwise_judge(server))
    assert time.monotonic() - started >= 0.3
    assert score.status is Status.OK and score.value == 0.5


def test_latency_past_the_deadline_times_out():
    with ScriptedServer(Reply(text='{"score": 5}'), latency_s=0.5) as server:
        started = time.monotonic()
        score = score_one(pointwise_judge(server, deadline_s=0.1))
        assert time.monotonic() - started < 0.5
    assert score.status is Status.TIMEOUT and score.value is None


def test_a_server_not_started_has_no_address_and_stops_quietly():
    server = ScriptedServer()
    assert server.url == "" and server.requests == []
    server.stop()


def test_the_modules_examples_run():
    failed, attempted = doctest.testmod(rewardlab.testing, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failed == 0
