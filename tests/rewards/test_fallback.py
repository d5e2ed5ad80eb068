"""`Fallback`: which samples go on to which reward (and only those), what the score says about
it, the statuses that fall through by default and on request, usage, options errors, configs,
pickling, and the same pipeline through the TRL adapter, ``rewardlab score`` and ``rewardlab
serve``.

The members are scripted rule rewards: each reads what to return from a sample field (a number is
the value, a word the status to fail with) and records the batches it was called with, so every
expected value below is written from the fields, not computed by the code under test."""

import asyncio
import doctest
import json
import pickle

import pytest

import rewardlab.rewards.fallback
from rewardlab import ConfigError, Reward, RuleReward, Sample, Score, Status, Usage, build, register
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from rewardlab.rewards.fallback import Fallback
from rewardlab.serving.limits import ServeOptions
from rewardlab.serving.serve import start_server
from tests.serving.conftest import post, wait_ready

CALLS: dict[str, list[list[str]]] = {}


@register("field_outcome_for_fallback_tests")
class FieldOutcome(RuleReward):
    """``fields[key]``: a number is the value, a status name the failure; the ids of each batch it
    scores are kept in ``CALLS[name]``. Each score costs one model call of 10 + 2 tokens."""

    def __init__(self, key: str = "rule", name: str | None = None):
        self.key = key
        self.name = name or key

    async def ascore(self, samples):
        CALLS.setdefault(self.name, []).append([s.id for s in samples])
        return await super().ascore(samples)

    def check(self, sample):
        outcome = sample.fields[self.key]
        usage = Usage(prompt_tokens=10, completion_tokens=2, calls=1)
        if isinstance(outcome, str):
            return Score.failure(outcome, f"{self.key} said {outcome}", usage=usage)
        return Score(outcome, breakdown={"double": 2 * outcome}, usage=usage, details={"seen": self.key})


class Raises(Reward):
    name = "raises"

    async def ascore(self, samples):
        raise RuntimeError("broken member")


@pytest.fixture(autouse=True)
def fresh_calls():
    CALLS.clear()


def rows(*outcomes):
    """One sample per (rule, judge) outcome pair, with ids s0, s1, ..."""
    return [
        Sample(completion="c", id=f"s{i}", fields={"rule": rule, "judge": judge})
        for i, (rule, judge) in enumerate(outcomes)
    ]


RULE_THEN_JUDGE = {
    "type": "fallback",
    "rewards": [
        {"type": "field_outcome_for_fallback_tests", "key": "rule"},
        {"type": "field_outcome_for_fallback_tests", "key": "judge"},
    ],
}


def test_only_samples_the_rule_could_not_judge_go_to_the_judge_in_one_batch():
    reward = build(RULE_THEN_JUDGE)
    scores = reward.score(
        rows((1.0, 0.3), ("not_applicable", 0.7), (0.0, 0.9), ("parse_error", 0.4), ("invalid_input", 0.5))
    )
    assert CALLS == {"rule": [["s0", "s1", "s2", "s3", "s4"]], "judge": [["s1", "s3"]]}
    assert [s.value for s in scores] == [1.0, 0.7, 0.0, 0.4, None]
    # A definite 0 from the rule stands: the judge never overturns it.
    assert [s.details["scored_by"] for s in scores] == ["rule", "judge", "rule", "judge", "rule"]
    assert scores[4].status is Status.INVALID_INPUT and scores[4].reason == "rule: rule said invalid_input"
    assert scores[0].breakdown == {"rule": 1.0, "rule/double": 2.0}
    assert scores[1].breakdown == {"judge": 0.7, "judge/double": 1.4}
    assert scores[1].details["fell_through"] == [
        {"reward": "rule", "status": "not_applicable", "reason": "rule said not_applicable"}
    ]
    assert "fell_through" not in scores[0].details and "skipped" not in scores[1].details
    assert scores[3].details["skipped"] == {"rule": "parse_error"}
    assert scores[1].details["seen"] == "judge"
    assert scores[1].reason == "rule: rule said not_applicable"
    # Usage: one call for a sample the rule settled, two for one that fell through.
    assert [s.usage.calls for s in scores] == [1, 2, 1, 2, 1]
    assert scores[3].usage.prompt_tokens == 20 and scores[3].usage.completion_tokens == 4
    reward.close()


def test_pipeline_failures_do_not_fall_through_unless_named():
    outcomes = (("backend_error", 1.0), ("timeout", 1.0), ("error", 1.0))
    default = build(RULE_THEN_JUDGE).score(rows(*outcomes))
    assert [s.status for s in default] == [Status.BACKEND_ERROR, Status.TIMEOUT, Status.ERROR]
    assert "judge" not in CALLS
    CALLS.clear()
    lenient = build({**RULE_THEN_JUDGE, "fall_through": ["not_applicable", "backend_error"]})
    scores = lenient.score(rows(*outcomes))
    assert CALLS["judge"] == [["s0"]]
    assert [(s.status, s.value) for s in scores] == [
        (Status.OK, 1.0),
        (Status.TIMEOUT, None),
        (Status.ERROR, None),
    ]
    # Covered by the judge, the outage is still on record for `rewardlab score`'s summary.
    assert scores[0].details["skipped"] == {"rule": "backend_error"}


def test_the_last_reward_decides_whatever_it_says_and_the_reason_names_every_step():
    reward = Fallback(
        [FieldOutcome("rule"), FieldOutcome("judge"), FieldOutcome("last")],
        fall_through=["not_applicable", "parse_error"],
    )
    samples = [
        Sample(
            completion="c",
            id="x",
            fields={"rule": "not_applicable", "judge": "parse_error", "last": "parse_error"},
        )
    ]
    [score] = reward.score(samples)
    assert score.status is Status.PARSE_ERROR and score.value is None
    assert score.details["scored_by"] == "last"
    assert [step["reward"] for step in score.details["fell_through"]] == ["rule", "judge"]
    assert (
        score.reason
        == "rule: rule said not_applicable; judge: judge said parse_error; last: last said parse_error"
    )
    assert score.usage.calls == 3


def test_a_reward_that_raises_fails_its_samples_with_error_which_does_not_fall_through():
    reward = Fallback([Raises(), FieldOutcome("judge")])
    [score] = reward.score(rows((1.0, 0.5)))
    assert score.status is Status.ERROR and "broken member" in score.reason
    assert score.details["scored_by"] == "raises" and "judge" not in CALLS
    [score] = Fallback([Raises(), FieldOutcome("judge")], fall_through=["error"]).score(rows((1.0, 0.5)))
    assert (score.value, score.details["scored_by"]) == (0.5, "judge")


def test_nothing_is_sent_on_when_the_first_reward_settles_every_sample():
    build(RULE_THEN_JUDGE).score(rows((1.0, 0.0), (0.5, 0.0)))
    assert list(CALLS) == ["rule"]


def test_io_bound_comes_from_the_members():
    class Waits(FieldOutcome):
        io_bound = True

    assert Fallback([FieldOutcome("rule"), Waits("judge")]).io_bound
    assert not Fallback([FieldOutcome("rule"), FieldOutcome("judge")]).io_bound


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rewards": [{"type": "string_match"}]}, "rewards: List should have at least 2 items"),
        (
            {"rewards": [{"type": "string_match"}, {"type": "string_match"}]},
            "rewards: more than one reward is named",
        ),
        ({**RULE_THEN_JUDGE, "fall_through": ["ok"]}, "fall_through.0: Input should be"),
        ({**RULE_THEN_JUDGE, "fall_through": ["timeout", "timeout"]}, "fall_through: names a status twice"),
        ({**RULE_THEN_JUDGE, "fall_through": []}, "fall_through: Tuple should have at least 1 item"),
        (
            {"rewards": [{"type": "string_match"}, {"type": "math_answer", "cas_budget_s": 0}]},
            "rewards.1.cas_budget_s",
        ),
    ],
)
def test_options_errors_name_the_field(options, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        build({"type": "fallback", **{k: v for k, v in options.items() if k != "type"}})


def test_builds_from_yaml_pickles_and_scores_the_same(tmp_path):
    config = tmp_path / "reward.yaml"
    config.write_text(
        "type: fallback\nname: hybrid\nrewards:\n"
        "  - {type: field_outcome_for_fallback_tests, key: rule}\n"
        "  - {type: field_outcome_for_fallback_tests, key: judge}\n"
    )
    reward = build(config)
    copy = pickle.loads(pickle.dumps(reward))
    samples = rows(("parse_error", 0.25), (0.5, 1.0))
    assert reward.name == "hybrid"
    assert [s.value for s in reward.score(samples)] == [s.value for s in copy.score(samples)] == [0.25, 0.5]


def test_through_the_trl_adapter_each_member_logs_its_share():
    func = as_reward_func(build(RULE_THEN_JUDGE))
    logged = {}
    values = func(
        prompts=["p"] * 3,
        completions=["a", "b", "c"],
        completion_ids=[[1], [2], [3]],
        rule=[1.0, "not_applicable", "parse_error"],
        judge=[0.0, 0.5, "backend_error"],
        log_metric=logged.__setitem__,
    )
    if asyncio.iscoroutine(values):
        values = asyncio.run(values)
    assert values == [1.0, 0.5, None]
    assert func.__name__ == "fallback"
    assert logged["fallback/rule"] == 1.0 and logged["fallback/judge"] == 0.5


def test_through_rewardlab_score(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    lines = [
        {"id": "a", "prompt": "p", "completion": "x", "rule": 1.0, "judge": 0.0},
        {"id": "b", "prompt": "p", "completion": "y", "rule": "not_applicable", "judge": 0.75},
        {"id": "c", "prompt": "p", "completion": "z", "rule": "parse_error", "judge": "backend_error"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = tmp_path / "reward.yaml"
    config.write_text(json.dumps(RULE_THEN_JUDGE))
    output = tmp_path / "scores.jsonl"
    status = main(["score", str(source), "--config", str(config), "--output", str(output), "--no-progress"])
    records = {r["id"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert {k: (r["status"], r["value"], r["details"]["scored_by"]) for k, r in records.items()} == {
        "a": ("ok", 1.0, "rule"),
        "b": ("ok", 0.75, "judge"),
        "c": ("backend_error", None, "judge"),
    }
    # The judge's outage is a pipeline failure: the run says so and exits 1.
    assert status == 1
    assert "fallback: backend_error in 1 rows" in capsys.readouterr().err


def test_through_rewardlab_serve():
    server = start_server(build(RULE_THEN_JUDGE), options=ServeOptions())
    try:
        wait_ready(server.url)
        samples = [
            {"completion": "x", "id": "a", "fields": {"rule": "not_applicable", "judge": 0.5}},
            {"completion": "y", "id": "b", "fields": {"rule": 0.0, "judge": 1.0}},
        ]
        status, _, answer = post(server.url, "/score", {"samples": samples})
    finally:
        server.stop()
    assert status == 200 and answer["reward"] == "fallback"
    first, second = answer["scores"]
    assert (first["value"], first["details"]["scored_by"]) == (0.5, "judge")
    assert first["details"]["fell_through"][0]["status"] == "not_applicable"
    assert (second["value"], second["details"]["scored_by"]) == (0.0, "rule")


def test_the_docstring_example_runs():
    assert doctest.testmod(rewardlab.rewards.fallback).failed == 0
