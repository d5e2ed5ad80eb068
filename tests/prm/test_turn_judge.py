"""The turn judge (the generative step judge over an agent's turns) against a scripted judge over
real HTTP: one verdict per assistant turn, tool calls and results shown, failures as statuses."""

import json
import re

import pytest

from rewardlab import Sample, Status, build
from rewardlab.testing import Reply
from tests.conftest import openai_backend, tool_call

ROLLOUT = [
    {"role": "assistant", "content": "First the sum.", "tool_calls": [tool_call("add", a=2, b=3)]},
    {"role": "tool", "name": "add", "content": "5"},
    {"role": "assistant", "content": "", "tool_calls": [tool_call("multiply", a=5, b=4)]},
    {"role": "tool", "name": "multiply", "content": "20"},
    {"role": "assistant", "content": "The answer is 20."},
]


def checker(body):
    """A turn is incorrect when it multiplies by 4 or reports 20 (the task multiplies by 3)."""
    text = body["messages"][-1]["content"]
    if "Go through the steps in order" in text:
        steps = re.findall(r"<<<BEGIN STEP (\d+) \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
        verdicts = {n: "incorrect" if re.search(r'"b": 4|is 20', s) else "correct" for n, s in steps}
        return Reply(text=json.dumps({"steps": verdicts}))
    (turn,) = re.findall(r"The turn to check:\n<<<BEGIN TURN \d+ \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
    return Reply(text=json.dumps({"verdict": "incorrect" if re.search(r'"b": 4|is 20', turn) else "correct"}))


def judge(server, **options):
    return build(
        {"type": "turn_judge", "backend": openai_backend(server.url), "client": {"cache": None}, **options}
    )


@pytest.mark.parametrize("mode", ["per_step", "one_call"])
def test_one_verdict_per_assistant_turn(scripted, mode):
    scripted.default = checker
    prompt = [{"role": "user", "content": "What is (2 + 3) * 3?"}]
    (score,) = judge(scripted, mode=mode).score([Sample(prompt=prompt, completion=ROLLOUT)])
    assert score.steps == [1.0, 0.0, 0.0] and score.value == 0.0
    assert score.details["first_error"] == 1
    assert score.usage.calls == (3 if mode == "per_step" else 1) == len(scripted.requests)


def test_the_judge_sees_calls_results_and_earlier_turns(scripted):
    scripted.default = checker
    judge(scripted, aggregate="mean").score([Sample(prompt="What is (2 + 3) * 3?", completion=ROLLOUT)])
    asked = sorted((b["messages"][-1]["content"] for b in scripted.requests), key=len)
    last = asked[-1]
    assert "Tool call: multiply" not in asked[0] and "Tool result (add): 5" in asked[0]
    assert "Turn 1:" in last and "Turn 2:" in last and 'Tool call: multiply({"a": 5, "b": 4})' in last
    assert "Tool result (multiply): 20" in last and "The turn to check:" in last
    assert "judge of tool-using agents" in scripted.requests[0]["messages"][0]["content"]


def test_without_observations_and_failures(scripted):
    scripted.default = checker
    judge(scripted, observations=False).score([Sample(prompt="q", completion=ROLLOUT[:2])])
    assert "Tool result" not in scripted.requests[0]["messages"][-1]["content"]
    bad = [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": 3}}]}]
    (broken,) = judge(scripted).score([Sample(prompt="q", completion=bad, id="x")])
    assert broken.status is Status.INVALID_INPUT
    assert (
        broken.reason
        == "sample 'x': completion[0].tool_calls[0].function: the call has no function name ('name')"
    )
    calls = len(scripted.requests)
    (empty,) = judge(scripted).score([Sample(prompt="q", completion=[{"role": "assistant", "content": " "}])])
    assert empty.value == 0.0 and len(scripted.requests) == calls  # nothing to judge: the minimum
    scripted.default = Reply(text="Seems fine.")
    (unread,) = judge(scripted, mode="one_call").score([Sample(prompt="q", completion=ROLLOUT)])
    assert unread.status is Status.PARSE_ERROR
