"""`RemoteReward` against a real ``rewardlab serve`` (equal to scoring in process, through the TRL
adapter and a real GRPOTrainer), and against a stub server that fails on demand (retries,
``Retry-After``, what is never retried, what a request that finally fails becomes)."""

import asyncio
import json
import pickle
import threading
import time

import pytest

from rewardlab import Sample, Status, build
from rewardlab.integrations.trl import AsyncRewardFunc, as_reward_func
from rewardlab.serving.remote import RemoteReward
from rewardlab.testing import _LocalServer
from tests.recording import Recorded, two_step_grpo_config
from tests.serving.conftest import Probe, metric

SAMPLES = [
    Sample(prompt="1+1?", completion="The answer is \\boxed{2}.", reference="2", id="a"),
    Sample(prompt="1+1?", completion="\\boxed{11}", reference="2", id="b"),
    Sample(prompt="2/4?", completion="\\boxed{\\frac12}", reference="0.5", id="c"),
    Sample(prompt="x?", completion="\\boxed{7}", id="no-reference"),
    Sample(
        prompt=[{"role": "user", "content": "3*3?"}],
        completion=[{"role": "assistant", "content": "Nine: \\boxed{9}"}],
        reference="9",
        fields={"level": 1},
    ),
]


@pytest.fixture(scope="module")
def math_reward():
    reward = build({"type": "math_answer"})
    yield reward
    reward.close()


def test_remote_scores_equal_scores_in_process(serve, math_reward):
    server = serve(math_reward)
    remote = RemoteReward(server.url, batch_size=2, name="math_answer")
    answered = remote.score(SAMPLES)
    assert [s.to_dict() for s in answered] == [s.to_dict() for s in math_reward.score(SAMPLES)]
    assert [s.status for s in answered] == [Status.OK] * 3 + [Status.INVALID_INPUT, Status.OK]
    # Five samples in batches of two: three requests.
    assert metric(server.url, "rewardlab_requests_total", endpoint="/score", code="200") == 3.0


def test_remote_sends_the_token(serve, monkeypatch):
    server = serve(Probe(), token="s3cret")
    [refused] = RemoteReward(server.url, retries=3).score([Sample(completion="abc")])
    assert refused.status is Status.BACKEND_ERROR and "HTTP 401: missing bearer token" in refused.reason
    assert "attempts" not in refused.reason  # a 4xx is not retried
    assert RemoteReward(server.url, token="s3cret").score([Sample(completion="abc")])[0].value == 3.0
    monkeypatch.setenv("REWARDLAB_SERVE_TOKEN", "s3cret")
    assert RemoteReward(server.url).score([Sample(completion="abcd")])[0].value == 4.0


def test_remote_waits_out_a_full_server(serve):
    probe = Probe()
    server = serve(probe, max_concurrency=1, queue=0, retry_after_s=1)
    remote = RemoteReward(server.url, retries=5)
    holder = threading.Thread(target=remote.score, args=([Sample(completion="gate")],))
    holder.start()
    assert probe.entered.acquire(timeout=10)
    threading.Timer(0.5, probe.gate.set).start()
    [score] = remote.score([Sample(completion="later")])
    holder.join(10)
    assert score.value == 5.0
    assert metric(server.url, "rewardlab_requests_total", endpoint="/score", code="503") >= 1


def test_as_reward_func_over_remote_equals_local(serve, math_reward):
    from trl.trainer.utils import is_async_callable

    server = serve(math_reward)
    remote = as_reward_func(RemoteReward(server.url, name="accuracy"))
    local = as_reward_func(math_reward)
    assert isinstance(remote, AsyncRewardFunc) and is_async_callable(remote)
    assert remote.__name__ == "accuracy"
    remote = pickle.loads(pickle.dumps(remote))  # TRL copies reward functions

    def call(func):
        logged, extra = {}, {}
        result = func(
            prompts=["1+1?", "2+2?", "3+3?"],
            completions=["\\boxed{2}", "\\boxed{5}", "\\boxed{6}"],
            completion_ids=[[1, 2], [3], [4, 5, 6]],
            answer=["2", "4", None],
            id=["p1", "p2", "p3"],
            trainer_state=None,
            log_metric=logged.__setitem__,
            log_extra=extra.__setitem__,
        )
        return (asyncio.run(result) if asyncio.iscoroutine(result) else result), logged, extra

    values, logged, extra = call(remote)
    local_values, local_logged, local_extra = call(local)
    assert values == local_values == [1.0, 0.0, None]
    assert logged == {"accuracy/failed_frac": pytest.approx(1 / 3)}
    assert local_logged == {"math_answer/failed_frac": pytest.approx(1 / 3)}
    assert extra["accuracy/status"] == local_extra["math_answer/status"] == ["ok", "ok", "invalid_input"]


def test_grpo_trains_on_a_remote_reward(serve, tmp_path, tiny_causal_lm, tiny_tokenizer):
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    served = Recorded(
        build(
            {
                "type": "combine",
                "name": "shape",
                "components": {
                    "length": {
                        "type": "length",
                        "mode": "linear_target",
                        "target_length": 8,
                        "unit": "chars",
                    },
                    "repetition": {"type": "repetition_penalty", "ngram_size": 2, "unit": "chars"},
                },
            }
        )
    )
    server = serve(served)
    dataset = Dataset.from_dict({"prompt": ["Say hi.", "Count."]})
    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm, processing_class=tiny_tokenizer, train_dataset=dataset,
        reward_funcs=[as_reward_func(RemoteReward(server.url, name="shape"))],
        args=two_step_grpo_config(tmp_path),
    )  # fmt: skip
    trainer.train()
    batches = [(samples, scores) for samples, scores in served.batches if samples[0].id != "warm-up"]
    logged = [entry for entry in trainer.state.log_history if "rewards/shape/mean" in entry]
    assert len(logged) == len(batches) == 2
    for entry, (samples, scores) in zip(logged, batches, strict=True):
        assert len(samples) == 4 and all(s.ok for s in scores)
        assert entry["rewards/shape/mean"] == pytest.approx(sum(s.value for s in scores) / 4, abs=1e-6)
        assert entry["shape/length"] == pytest.approx(
            sum(s.breakdown["length"] for s in scores) / 4, abs=1e-6
        )


class Stub(_LocalServer):
    """A ``/score`` server answering from a script of ``(status, headers, body)``; ``None`` as the
    body answers properly (one score per sample), ``delay_s`` holds each answer. Served on
    127.0.0.1 from a thread while in a ``with`` block, as `rewardlab.testing`'s scripted servers are."""

    def __init__(self, *script, delay_s=0.0):
        super().__init__()
        self.script = list(script)
        self.arrivals = []
        self.delay_s = delay_s

    def app(self):
        from fastapi import FastAPI, Request
        from fastapi.responses import Response

        app = FastAPI()

        @app.post("/score")
        async def score(request: Request):
            self.arrivals.append(time.monotonic())
            samples = (await request.json())["samples"]
            status, headers, body = self.script.pop(0) if self.script else (200, {}, None)
            await asyncio.sleep(self.delay_s)
            if body is None:
                scores = [{"id": s["id"], "value": 1.0, "status": "ok"} for s in samples]
                body = json.dumps({"scores": scores, "reward": "stub", "latency_s": 0.0})
            return Response(body, status_code=status, headers=headers, media_type="application/json")

        return app


BUSY = (503, {"Retry-After": "1"}, '{"detail": "server busy"}')
TWO = [Sample(completion="x", id="1"), Sample(completion="y", id="2")]


def test_retries_honour_retry_after_then_succeed():
    with Stub(BUSY, (500, {}, '{"detail": "oops"}')) as stub:
        scores = RemoteReward(stub.url, retries=3, backoff_s=0.0).score(TWO)
    assert [s.value for s in scores] == [1.0, 1.0]
    assert len(stub.arrivals) == 3
    assert stub.arrivals[1] - stub.arrivals[0] >= 0.95  # waited for Retry-After, not the 0 s backoff
    assert stub.arrivals[2] - stub.arrivals[1] < 0.5


def test_a_request_that_keeps_failing_fails_each_sample_with_the_reason():
    with Stub(BUSY, BUSY, BUSY, BUSY) as stub:
        scores = RemoteReward(stub.url, retries=1, backoff_max_s=0.1).score(TWO)
    assert len(stub.arrivals) == 2
    assert [s.status for s in scores] == [Status.BACKEND_ERROR] * 2
    assert all("after 2 attempts: HTTP 503: server busy" in s.reason and s.value is None for s in scores)


@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_client_errors_are_not_retried(status):
    with Stub((status, {}, '{"detail": "samples[1].completion: must be text"}')) as stub:
        scores = RemoteReward(stub.url, retries=3, backoff_s=0.0).score(TWO)
    assert len(stub.arrivals) == 1
    assert all(s.status is Status.BACKEND_ERROR and f"HTTP {status}: samples[1]" in s.reason for s in scores)


def test_answers_that_break_the_contract_are_refused():
    wrong_ids = json.dumps(
        {"scores": [{"id": "2", "value": 1.0, "status": "ok"}] * 2, "reward": "s", "latency_s": 0}
    )
    too_few = json.dumps(
        {"scores": [{"id": "1", "value": 1.0, "status": "ok"}], "reward": "s", "latency_s": 0}
    )
    for body, problem in (
        (wrong_ids, "score 0 is for id '2', sent '1'"),
        (too_few, "1 scores for 2 samples"),
    ):
        with Stub((200, {}, body)) as stub:
            scores = RemoteReward(stub.url, retries=2).score(TWO)
        assert len(stub.arrivals) == 1
        assert all(s.status is Status.BACKEND_ERROR and problem in s.reason for s in scores)
    with Stub((200, {}, "not json")) as stub:  # malformed: worth another try
        scores = RemoteReward(stub.url, retries=2, backoff_s=0.0).score(TWO)
    assert len(stub.arrivals) == 2 and all(s.ok for s in scores)


def test_timeouts_and_lost_servers_become_statuses():
    with Stub(delay_s=0.6) as stub:
        scores = RemoteReward(stub.url, timeout_s=0.2, retries=1, backoff_s=0.0).score(TWO)
    assert all(s.status is Status.TIMEOUT and "no answer within 0.2 s" in s.reason for s in scores)
    with Stub() as stub:
        url = stub.url
    scores = RemoteReward(url, retries=1, backoff_s=0.0).score(TWO)
    assert all(s.status is Status.BACKEND_ERROR and "connection failed" in s.reason for s in scores)
