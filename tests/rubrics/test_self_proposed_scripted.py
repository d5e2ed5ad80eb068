"""Compute-as-Teacher against scripted anchor and grader servers."""

import json
import re

import pytest

from rewardlab import Sample, Status, build
from rewardlab.testing import Reply, ScriptedServer
from tests.conftest import openai_backend

QUESTION = "What is 2 + 2? Explain."


def user_text(body):
    return body["messages"][-1]["content"]


def cat(server, **options):
    return build(
        {
            "type": "self_proposed_rubric",
            "backend": openai_backend(server.url),
            "client": {"cache": None, "max_attempts": 1},
            **options,
        }
    )


def test_verifiable_answers_against_the_synthesized_reference(scripted):
    scripted.default = Reply(text="Reconciling the attempts, 2 + 2 = 4, so the answer is \\boxed{4}.")
    rollouts = ["2 + 2 = 4. \\boxed{4}", "The answer is 4.", "I get \\boxed{5}."]
    scores = cat(scripted, verify="math").score([Sample(prompt=QUESTION, completion=c) for c in rollouts])
    assert [s.value for s in scores] == [1.0, 1.0, 0.0]
    (synthesis,) = scripted.requests
    assert QUESTION not in user_text(synthesis)  # the anchor never sees the question
    assert all(r in user_text(synthesis) for r in rollouts)
    assert [s.usage.calls for s in scores] == [1, 0, 0]
    assert "boxed{4}" in scores[1].details["synthesized_reference"]


def _anchor_and_grader(body):
    text = user_text(body)
    if "Write the single best response" in text:
        return Reply(text="4, because two pairs make four.")
    if "yes/no criteria" in text:
        return Reply(
            text=json.dumps({"criteria": [{"text": "Gives the answer 4"}, {"text": "Explains with pairs"}]})
        )
    (response,) = re.findall(r"<<<BEGIN RESPONSE \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
    (criterion,) = re.findall(r"<<<BEGIN CRITERION \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)
    met = ("4" in response) if "answer 4" in criterion else ("pair" in response)
    return Reply(text=json.dumps({"verdict": "yes" if met else "no"}))


def test_proposed_criteria_graded_by_the_judge(scripted):
    scripted.default = _anchor_and_grader
    rollouts = ["4, as two pairs.", "It is 4.", "5."]
    scores = cat(scripted, min_criteria=2).score([Sample(prompt=QUESTION, completion=c) for c in rollouts])
    assert [s.value for s in scores] == pytest.approx([1.0, 0.5, 0.0])
    proposal = next(b for b in scripted.requests if "yes/no criteria" in user_text(b))
    assert QUESTION in user_text(proposal) and "two pairs make four" in user_text(proposal)
    assert {c["text"] for c in scores[0].details["criteria"]} == {"Gives the answer 4", "Explains with pairs"}
    assert sum(s.usage.calls for s in scores) == len(scripted.requests) == 2 + 3 * 2


def test_a_separate_anchor_model(scripted):
    scripted.default = _anchor_and_grader
    with ScriptedServer(_anchor_and_grader) as anchor:
        scores = cat(scripted, min_criteria=2, anchor=openai_backend(anchor.url)).score(
            [Sample(prompt=QUESTION, completion=c) for c in ("4 pairs", "3")]
        )
        assert all(s.ok for s in scores)
        assert len(anchor.requests) == 2  # synthesis and proposal
        assert all(
            "yes/no criteria" not in user_text(b) and "Write the single" not in user_text(b)
            for b in scripted.requests
        )


def test_too_few_proposed_criteria_fail_the_group(scripted):
    scripted.default = _anchor_and_grader
    scores = cat(scripted).score([Sample(prompt=QUESTION, completion=c) for c in ("4", "5")])
    assert all(s.status is Status.PARSE_ERROR and "fewer than 3" in s.reason for s in scores)
    assert len(scripted.requests) == 2  # nothing graded against a short checklist


def test_small_groups_and_failed_synthesis(scripted):
    single = cat(scripted).score([Sample(prompt=QUESTION, completion="4")])[0]
    assert single.status is Status.NOT_APPLICABLE and "at least 2" in single.reason
    scripted.default = Reply(status=503)
    failed = cat(scripted).score([Sample(prompt=QUESTION, completion=c) for c in ("4", "5")])
    assert all(s.status is Status.BACKEND_ERROR and "synthesis" in s.reason for s in failed)
