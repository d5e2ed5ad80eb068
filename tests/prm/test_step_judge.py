"""The generative step judge against a scripted judge over real HTTP (exact verdicts and the
first error), and against the real local model server (shapes and probabilities)."""

import json
import math
import re

import pytest

from rewardlab import Sample, Status, build
from rewardlab.testing import Reply
from tests.conftest import openai_backend

SOLUTION = "Step 1: 2 + 2 = 4.\nStep 2: 4 * 3 = 13.\nStep 3: So the answer is 13."


def judge(server_or_url, **options):
    backend = openai_backend(server_or_url.url) if hasattr(server_or_url, "url") else {
        "type": "openai", "base_url": server_or_url, "model": "smollm2", "guided_choice": True}  # fmt: skip
    return build({"type": "step_judge", "backend": backend, "client": {"cache": None}, **options})


def checker(body):
    """Marks a step incorrect when it contains "13"; in one call, lists every step's verdict."""
    text = body["messages"][-1]["content"]
    steps = re.findall(r"<<<BEGIN STEP (\d+) \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
    if "Go through the steps in order" in text:
        verdicts = {number: "incorrect" if "13" in step else "correct" for number, step in steps}
        return Reply(text="Checked.\n" + json.dumps({"steps": verdicts}))
    (checked,) = re.findall(r"The step to check:\n<<<BEGIN STEP \d+ \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
    return Reply(text=json.dumps({"verdict": "incorrect" if "13" in checked else "correct"}))


@pytest.mark.parametrize("mode", ["per_step", "one_call"])
def test_verdicts_and_the_first_error(scripted, mode):
    scripted.default = checker
    (score,) = judge(scripted, mode=mode).score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION)])
    assert score.steps == [1.0, 0.0, 0.0]
    assert score.details["first_error"] == 1 and score.value == 0.0
    assert score.details["step_verdicts"] == ["correct", "incorrect", "incorrect"]
    assert score.usage.calls == (3 if mode == "per_step" else 1) == len(scripted.requests)


def test_each_step_is_asked_with_the_steps_before_it(scripted):
    scripted.default = checker
    judge(scripted).score([Sample(prompt="q", completion=SOLUTION, reference="12")])
    shown = [len(re.findall(r"<<<BEGIN STEP", b["messages"][-1]["content"])) for b in scripted.requests]
    assert sorted(shown) == [1, 2, 3]  # the step itself plus those before it
    assert not any("REFERENCE" in b["messages"][-1]["content"] for b in scripted.requests)
    judge(scripted, use_reference=True).score([Sample(prompt="q", completion=SOLUTION, reference="12")])
    assert all("REFERENCE" in b["messages"][-1]["content"] for b in scripted.requests[3:])


def test_failures_are_statuses(scripted):
    scripted.default = Reply(text="Looks fine to me.")
    (unread,) = judge(scripted, mode="one_call").score([Sample(prompt="q", completion=SOLUTION)])
    assert unread.status is Status.PARSE_ERROR and unread.details["judge_answer"] == "Looks fine to me."
    calls = len(scripted.requests)
    (empty,) = judge(scripted).score([Sample(prompt="q", completion="  ")])
    assert empty.value == 0.0 and len(scripted.requests) == calls  # the minimum, without a call
    (odd,) = judge(scripted).score([Sample(prompt="q", completion=7)])
    assert odd.status is Status.INVALID_INPUT and "completion" in odd.reason


def test_per_step_probabilities_from_the_local_model(local_server):
    (score,) = judge(local_server).score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION)])
    assert score.ok and len(score.steps) == 3, score
    assert all(0.0 <= p <= 1.0 for p in score.steps) and score.value == min(score.steps)
    assert score.details["first_error"] in (None, 0, 1, 2)
    assert score.usage.calls == 3 and math.isfinite(score.value)
