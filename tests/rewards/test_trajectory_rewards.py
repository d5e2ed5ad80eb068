"""Trajectory rewards: the final answer, the environment's final state, and any reward per turn
(a rule, and a rubric judge against a scripted grader over real HTTP)."""

import json
import re

import pytest

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.testing import Reply
from tests.conftest import openai_backend, tool_call

ROLLOUT = [
    {"role": "assistant", "content": "First the sum.", "tool_calls": [tool_call("add", a=2, b=3)]},
    {"role": "tool", "name": "add", "content": "5"},
    {"role": "assistant", "content": "", "tool_calls": [tool_call("multiply", a=5, b=3)]},
    {"role": "tool", "name": "multiply", "content": "15"},
    {"role": "assistant", "content": "The answer is \\boxed{15}."},
]
PROMPT = [{"role": "user", "content": "What is (2 + 3) * 3?"}]


def test_final_answer_scores_the_last_message_only():
    reward = build({"type": "final_answer", "reward": {"type": "regex_match", "pattern": r"^The answer"}})
    cut_off = ROLLOUT[:4]  # ends on a tool result: the last assistant message only called a tool
    scores = reward.score(
        [Sample(completion=ROLLOUT), Sample(completion=cut_off), Sample(completion="The answer")]
    )
    assert [s.value for s in scores] == [1.0, 0.0, 1.0]
    assert (
        scores[0].details["final_answer"] == "The answer is \\boxed{15}." and scores[0].details["turns"] == 3
    )
    assert scores[1].details["final_answer"] == "" and scores[1].details["turns"] == 2


def test_final_answer_with_math_and_a_malformed_trajectory():
    reward = build({"type": "final_answer", "reward": {"type": "math_answer"}})
    bad = [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("add")]},
        {"role": "system", "content": "x"},
    ]
    good, wrong, broken = reward.score(
        [
            Sample(prompt=PROMPT, completion=ROLLOUT, reference="15"),
            Sample(prompt=PROMPT, completion=ROLLOUT, reference="5"),
            Sample(prompt=PROMPT, completion=bad, reference="15", id="r7"),
        ]
    )
    reward.close()
    assert (good.value, wrong.value) == (1.0, 0.0)
    assert broken.status is Status.INVALID_INPUT
    assert (
        broken.reason == "sample 'r7': completion[1].role: must be one of assistant, tool, user, got 'system'"
    )


def state_sample(state, expected, **extra):
    return Sample(fields={"environment_state": state, "expected_state": expected, **extra})


@pytest.mark.parametrize(
    ("options", "value"),
    [({}, 0.0), ({"partial": True}, 2 / 3), ({"match": "exact", "partial": True}, 2 / 4)],
)
def test_environment_state_subset_exact_and_partial(options, value):
    state = {"lamp": True, "door": "open", "items": [1, 2], "extra": 0}
    expected = {"lamp": True, "door": "closed", "items": [1, 2.0]}
    (score,) = build({"type": "environment_state", **options}).score([state_sample(state, expected)])
    assert score.value == pytest.approx(value)
    assert score.details["mismatches"][0] == {"key": "door", "expected": "closed", "actual": "open"}
    assert score.reason.startswith(
        f"{len(score.details['mismatches'])} of {score.details['checked']} state keys"
    )


def test_environment_state_compares_json_values_by_type():
    reward = build({"type": "environment_state"})
    cases = [
        ({"on": 1}, {"on": True}, 0.0),  # a bool is not a number
        ({"n": "1"}, {"n": 1}, 0.0),  # text is not a number
        ({"n": 1}, {"n": 1.0}, 1.0),
        ({"m": {"a": [1, {"b": None}]}}, {"m": {"a": [1, {"b": None}]}}, 1.0),
        ({"m": {"a": 1, "b": 2}}, {"m": {"a": 1}}, 0.0),  # a nested mapping compares whole
        ({"l": [1, 2]}, {"l": [2, 1]}, 0.0),
        ({"x": 1}, {}, 1.0),  # nothing expected: nothing to differ
        ('{"x": [1]}', '{"x": [1]}', 1.0),  # JSON text, as a datasets column often holds it
        ({}, {"x": 1}, 0.0),
    ]
    scores = reward.score([state_sample(state, expected) for state, expected, _ in cases])
    assert [s.value for s in scores] == [value for _, _, value in cases]
    assert scores[-1].details["mismatches"] == [{"key": "x", "expected": 1, "missing": True}]


def test_environment_state_failures_name_the_field():
    reward = build({"type": "environment_state", "state_field": "env"})
    scores = reward.score(
        [
            Sample(fields={"expected_state": {"a": 1}}),
            Sample(fields={"expected_state": {"a": 1}, "env": [1]}),
            Sample(fields={"expected_state": "{not json", "env": {}}, id="s3"),
        ]
    )
    assert [s.status for s in scores] == [Status.INVALID_INPUT] * 3
    assert scores[0].reason == "sample #0: env: is missing: the sample has no such field"
    assert scores[1].reason == "sample #1: env: must be a mapping of state keys to values, got list"
    assert scores[2].reason.startswith("sample 's3': expected_state: is text but not JSON: ")


def test_per_turn_rule_gives_one_step_per_assistant_turn():
    reward = build(
        {
            "type": "per_turn",
            "reward": {"type": "regex_match", "pattern": "Tool call: add"},
            "aggregate": "mean",
        }
    )
    (score,) = reward.score([Sample(prompt=PROMPT, completion=ROLLOUT)])
    assert score.steps == [1.0, 0.0, 0.0] and score.value == pytest.approx(1 / 3)
    assert score.details["first_turn"] == 0 and len(score.details["turns"]) == 3
    (last_two,) = build(
        {"type": "per_turn", "reward": {"type": "regex_match", "pattern": "multiply|boxed"}, "max_turns": 2}
    ).score([Sample(prompt=PROMPT, completion=ROLLOUT)])
    assert last_two.steps == [1.0, 1.0] and last_two.details["first_turn"] == 1


def test_per_turn_shows_each_turn_its_history():
    class Shown(list):
        pass

    from rewardlab import Reward, Score

    class Record(Reward):
        name = "record"

        def __init__(self):
            self.seen = Shown()

        async def ascore(self, samples):
            self.seen.extend(samples)
            return [Score(value=float(len(s.completion))) for s in samples]

    inner = Record()
    build({"type": "per_turn", "reward": inner, "observations": False}).score(
        [Sample(prompt=PROMPT, completion=ROLLOUT, reference="15", fields={"k": 1})]
    )
    assert [s.completion for s in inner.seen] == [
        'First the sum.\nTool call: add({"a": 2, "b": 3})',
        'Tool call: multiply({"a": 5, "b": 3})',
        "The answer is \\boxed{15}.",
    ]
    assert inner.seen[0].prompt == "What is (2 + 3) * 3?"
    assert inner.seen[2].prompt == (
        "What is (2 + 3) * 3?\n\nAssistant turn 1:\nFirst the sum.\n"
        'Tool call: add({"a": 2, "b": 3})\nTool result (add): 5\n\nAssistant turn 2:\n'
        'Tool call: multiply({"a": 5, "b": 3})\nTool result (multiply): 15'
    )
    assert all(s.reference == "15" and s.fields == {"k": 1} for s in inner.seen)


def test_per_turn_a_failed_turn_fails_the_sample():
    reward = build({"type": "per_turn", "reward": {"type": "string_match"}})
    (score,) = reward.score([Sample(completion=ROLLOUT, id="a")])  # string_match needs a reference
    assert score.status is Status.INVALID_INPUT
    assert score.reason.startswith("sample 'a': turn 1: ")


def test_per_turn_options_are_checked():
    with pytest.raises(ConfigError, match="aggregate"):
        build({"type": "per_turn", "reward": {"type": "string_match"}, "aggregate": "median"})


def grader(body):
    """Meets the criterion "Calls the right tool" when the turn calls add or multiply."""
    text = body["messages"][-1]["content"]
    (response,) = re.findall(r"<<<BEGIN RESPONSE \w+>>>\n(.*?)\n<<<END RESPONSE", text, re.DOTALL)
    return Reply(
        text=json.dumps({"verdict": "yes" if re.search(r"Tool call: (add|multiply)", response) else "no"})
    )


def test_per_turn_rubric_judge(scripted):
    scripted.default = grader
    reward = build(
        {
            "type": "per_turn",
            "aggregate": "min",
            "reward": {
                "type": "rubric",
                "rubric": [{"text": "Calls the right tool", "weight": 1}],
                "backend": openai_backend(scripted.url),
                "client": {"cache": None, "max_attempts": 1},
            },
        }
    )
    (score,) = reward.score([Sample(prompt=PROMPT, completion=ROLLOUT)])
    assert score.steps == [1.0, 1.0, 0.0] and score.value == 0.0
    assert score.usage.calls == 3 == len(scripted.requests)
