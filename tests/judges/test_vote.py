"""`Vote`: n sampled votes of one judge against a real scripted HTTP server whose verdict depends
on the request's seed, so each vote's answer is known in advance: majority, mean, ties, agreement
and spread, distinct seeds and cache keys (and the cache replaying the same votes), failed votes
counted, too few votes failing with a reason, the options refused, and the same through the TRL
adapter, ``rewardlab score`` and ``rewardlab serve``."""

import asyncio
import json
import pickle

import pytest

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from rewardlab.serving.limits import ServeOptions
from rewardlab.serving.serve import start_server
from rewardlab.testing import Reply
from tests.conftest import openai_backend
from tests.serving.conftest import post, wait_ready

NO_RETRY = {"cache": None, "max_attempts": 1}


def by_seed(verdicts):
    """A judge server whose yes/no verdict is ``verdicts[seed]``; an int there is an HTTP status."""

    def answer(body):
        verdict = verdicts[body["seed"]]
        if isinstance(verdict, int):
            return Reply(status=verdict)
        return Reply(text=f'Considered. {{"verdict": "{verdict}"}}')

    return answer


def vote(server, n=5, client=None, judge=None, **options):
    return build(
        {
            "type": "vote",
            "n": n,
            "judge": {
                "type": "pointwise_judge",
                "scale": "yes_no",
                "temperature": 0.8,
                "backend": openai_backend(server.url),
                "client": client or NO_RETRY,
                **(judge or {}),
            },
            **options,
        }
    )


def test_majority_of_five_with_agreement_and_spread(scripted):
    scripted.default = by_seed(["yes", "no", "yes", "no", "yes"])
    reward = vote(scripted)
    [score] = reward.score([Sample(prompt="2+2?", completion="4")])
    reward.close()
    assert score.value == 1.0
    assert score.details["counts"] == {"yes": 3, "no": 2} and score.details["majority"] == "yes"
    assert score.breakdown == {"agreement": 0.6, "spread": pytest.approx(0.4898979485566356)}  # sqrt(.24)
    assert [v["label"] for v in score.details["votes"]] == ["yes", "no", "yes", "no", "yes"]
    # Five distinct requests: seeds 0..4, each sampled at the judge's temperature.
    assert sorted(body["seed"] for body in scripted.requests) == [0, 1, 2, 3, 4]
    assert {body["temperature"] for body in scripted.requests} == {0.8}
    assert score.usage.calls == 5 and len(set(score.details["cache_keys"])) == 5


def test_mean_combination_and_a_base_seed(scripted):
    scripted.default = by_seed({7: "no", 8: "no", 9: "yes"})
    [score] = vote(scripted, n=3, combine="mean", seed=7).score([Sample(prompt="q", completion="a")])
    assert score.value == pytest.approx(1 / 3)
    assert score.details["agreement"] == pytest.approx(2 / 3) and score.details["majority"] == "no"


def test_a_tie_is_the_mean_of_the_tied_labels(scripted):
    scripted.default = by_seed(["yes", "no", "no", "yes"])
    [score] = vote(scripted, n=4).score([Sample(prompt="q", completion="a")])
    assert score.value == 0.5 and score.details["tie"] is True
    assert score.details["majority"] == ["yes", "no"] and score.breakdown["agreement"] == 0.5


def test_votes_are_cached_apart_and_replayed(scripted, tmp_path):
    scripted.default = by_seed(["yes", "no", "yes"])
    client = {"cache": str(tmp_path / "cache.sqlite"), "max_attempts": 1}
    sample = Sample(prompt="q", completion="a")
    [first] = vote(scripted, n=3, client=client).score([sample])
    [again] = vote(scripted, n=3, client=client).score([sample])
    assert len(scripted.requests) == 3  # the second run asked nothing
    assert again.usage.cached_calls == 3 and again.value == first.value == 1.0
    assert again.details["counts"] == first.details["counts"] == {"yes": 2, "no": 1}


def test_failed_votes_are_counted_and_left_out(scripted):
    scripted.default = by_seed(["yes", 500, "no", "yes", "yes"])
    [score] = vote(scripted).score([Sample(prompt="q", completion="a")])
    assert score.value == 1.0 and score.details["agreement"] == 0.75
    assert score.details["failed"] == {"backend_error": 1}
    assert score.details["skipped"] == {"vote_1": "backend_error"}
    assert score.details["votes"][1] == {"seed": 1, "status": "backend_error", "value": None, "label": None}
    assert score.reason.startswith("vote_1: ")


def test_too_few_votes_fail_with_the_first_failure_and_a_count(scripted):
    scripted.default = by_seed([500, "yes", 500])
    [score] = vote(scripted, n=3).score([Sample(prompt="q", completion="a")])
    assert score.status is Status.BACKEND_ERROR and score.value is None
    assert score.reason.startswith("1 of 3 votes have a value; min_votes is 2; vote_0 failed: ")
    assert score.usage.calls == 3
    scripted.requests.clear()
    [score] = vote(scripted, n=3, min_votes=1).score([Sample(prompt="q", completion="a")])
    assert score.value == 1.0 and score.details["agreement"] == 1.0


def test_an_unreadable_verdict_is_a_failed_vote(scripted):
    scripted.default = lambda body: (
        Reply(text="no verdict here") if body["seed"] == 0 else Reply(text='{"verdict": "no"}')
    )
    [score] = vote(scripted, n=3).score([Sample(prompt="q", completion="a")])
    assert score.value == 0.0 and score.details["failed"] == {"parse_error": 1}


def test_group_judges_vote_too(scripted):
    def answer(body):  # seed 0 prefers the first response, the others judge by length
        return Reply(text='{"winner": "A"}' if body["seed"] == 0 else '{"winner": "B"}')

    scripted.default = answer
    reward = build(
        {
            "type": "vote",
            "n": 3,
            "combine": "mean",
            "judge": {
                "type": "pairwise_judge",
                "temperature": 1.0,
                "backend": openai_backend(scripted.url),
                "client": NO_RETRY,
            },
        }
    )
    scores = reward.score([Sample(prompt="q", completion="x"), Sample(prompt="q", completion="y")])
    # Every vote's two orders split (A, then A; or B, then B): each vote is a tie, 0.5.
    assert [s.value for s in scores] == [0.5, 0.5] and len(scripted.requests) == 6


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"judge": {"type": "pointwise_judge"}}, "judge: has temperature 0"),
        ({"judge": {"type": "string_match"}}, "judge: should be an LLM judge"),
        ({"n": 1}, "n: Input should be greater than or equal to 2"),
        ({"n": 3, "min_votes": 4}, "min_votes: should be at most n"),
        ({"combine": "median"}, "combine: Input should be 'majority' or 'mean'"),
    ],
)
def test_options_errors_name_the_field(options, message):
    config = {
        "type": "vote",
        "judge": {
            "type": "pointwise_judge",
            "temperature": 0.5,
            "backend": openai_backend("http://127.0.0.1:9/v1"),
        },
    }
    with pytest.raises(ConfigError, match=message):
        build({**config, **options})


def test_pickles(scripted):
    scripted.default = by_seed(["yes", "no", "no"])
    reward = vote(scripted, n=3)
    copy = pickle.loads(pickle.dumps(reward))
    [score] = copy.score([Sample(prompt="q", completion="a")])
    assert score.value == 0.0 and copy.n == 3


def test_through_the_trl_adapter_agreement_is_a_metric(scripted):
    scripted.default = by_seed(["yes", "yes", "no", "yes", "yes"])
    func = as_reward_func(vote(scripted))
    logged = {}
    result = func(
        prompts=["q", "q"], completions=["a", "b"], completion_ids=[[1], [2]], log_metric=logged.__setitem__
    )
    values = asyncio.run(result) if asyncio.iscoroutine(result) else result
    assert values == [1.0, 1.0]
    assert logged["vote/agreement"] == pytest.approx(0.8)


def test_through_rewardlab_score(scripted, tmp_path, capsys):
    scripted.default = by_seed(["no", "no", 500])
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "r", "prompt": "q", "completion": "a"}) + "\n")
    config = tmp_path / "reward.yaml"
    judge = {
        "type": "pointwise_judge",
        "scale": "yes_no",
        "temperature": 0.8,
        "backend": openai_backend(scripted.url),
        "client": NO_RETRY,
    }
    config.write_text(json.dumps({"type": "vote", "n": 3, "judge": judge}))
    output = tmp_path / "scores.jsonl"
    status = main(["score", str(source), "--config", str(config), "--output", str(output), "--no-progress"])
    [record] = [json.loads(line) for line in output.read_text().splitlines()]
    assert (record["status"], record["value"], record["details"]["counts"]) == ("ok", 0.0, {"no": 2})
    # The vote had enough, but a backend failed one of its calls: the run reports it.
    assert status == 1 and "vote/vote_2: backend_error in 1 rows" in capsys.readouterr().err


def test_through_rewardlab_serve(scripted):
    scripted.default = by_seed(["yes", "no", "no"])
    server = start_server(vote(scripted, n=3), options=ServeOptions())
    try:
        wait_ready(server.url)
        status, _, answer = post(server.url, "/score", {"samples": [{"prompt": "q", "completion": "a"}]})
    finally:
        server.stop()
    assert status == 200
    [score] = answer["scores"]
    assert score["value"] == 0.0 and score["breakdown"]["agreement"] == pytest.approx(2 / 3)


def test_embedded_model_votes_are_distinct_draws_cached_apart(model_available, tmp_path):
    """On the embedded SmolLM2 (in process, guided yes/no, sampled at temperature 1), each of the
    n votes reaches the model as a request of its own (none is shared or served from another's
    answer), and a second judge instance on the same cache replays all n, label for label."""
    config = {
        "type": "vote",
        "n": 4,
        "judge": {
            "type": "pointwise_judge",
            "scale": "yes_no",
            "temperature": 1.0,
            "verdict_from": "text",
            "client": {"cache": str(tmp_path / "cache.sqlite")},
        },
    }
    sample = Sample(prompt="Is 17 a prime number?", completion="Yes, 17 is prime.")
    runs = []
    for _ in range(2):
        reward = build(config)
        [score] = reward.score([sample])
        reward.close()
        runs.append(score)
    first, second = runs
    assert first.status is Status.OK and (first.usage.calls, first.usage.cached_calls) == (4, 0)
    assert (second.usage.calls, second.usage.cached_calls) == (4, 4)
    assert [v["label"] for v in first.details["votes"]] == [v["label"] for v in second.details["votes"]]
    assert {v["label"] for v in first.details["votes"]} <= {"yes", "no"}
    assert first.value == second.value and sum(first.details["counts"].values()) == 4
