"""A real GRPOTrainer run (tiny model from a config, two steps) rewarded by a rubric reward that
reads a live rubric store, with `RubricElicitationCallback` growing the rubric after step 1.

The grader and the elicitor are a scripted server over real HTTP, so the test knows what must
happen: step 1 is graded with the hand-written rubric (version 1); the callback compares the
step's rollouts with the reference policy's response and adds the proposed criterion (version
2); step 2 is graded with it, and TRL logs its per-criterion metric from then on.
"""

import json
import re

import pytest

from rewardlab import build
from rewardlab.integrations.trl import as_reward_func
from rewardlab.integrations.trl_callbacks import RubricElicitationCallback
from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.rubrics.store import RubricStore
from rewardlab.testing import Reply
from tests.conftest import openai_backend
from tests.recording import Recorded, two_step_grpo_config

trl = pytest.importorskip("trl")

EVEN = "Has an even number of characters"
SHORT = "Is at most 30 characters long"
RULES = {EVEN: lambda response: len(response) % 2 == 0, SHORT: lambda response: len(response) <= 30}


def fenced(text, label):
    return re.findall(rf"<<<BEGIN {label} \w+>>>\n(.*?)\n<<<END", text, re.DOTALL)


def grader_and_elicitor(body):
    text = body["messages"][-1]["content"]
    if "propose criteria that explain the difference" in text:
        return Reply(text=json.dumps({"criteria": [{"text": SHORT, "category": "important"}]}))
    (response,) = fenced(text, "RESPONSE")
    (criterion,) = fenced(text, "CRITERION")
    return Reply(text=json.dumps({"verdict": "yes" if RULES[criterion](response) else "no"}))


def mean(values):
    return sum(values) / len(values)


def test_grpo_with_a_live_rubric_and_elicitation(tmp_path, tiny_causal_lm, tiny_tokenizer, scripted):
    from datasets import Dataset

    scripted.default = grader_and_elicitor
    store = RubricStore(tmp_path / "rubrics.sqlite")
    store.put("kind", Rubric((Criterion(EVEN, 1.0),)), step=0, reason="hand-written")
    rubric = build(
        {
            "type": "rubric",
            "store": store.path,
            "backend": openai_backend(scripted.url),
            "client": {"cache": None},
            "empty_completion": "judge",  # the tiny model writes random bytes; grade them all
        }
    )
    recorded = Recorded(rubric)
    callback = RubricElicitationCallback(rubric)
    dataset = Dataset.from_dict(
        {
            "prompt": ["Say something kind."],
            "prompt_id": ["kind"],
            "reference_response": ["You are doing great."],
        }
    )
    args = two_step_grpo_config(tmp_path)
    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm, processing_class=tiny_tokenizer, reward_funcs=[as_reward_func(recorded)],
        args=args, train_dataset=dataset, callbacks=[callback],
    )  # fmt: skip
    trainer.train()

    assert len(recorded.batches) == 2
    versions = [[s.details["rubric_version"] for s in scores] for _, scores in recorded.batches]
    assert versions == [[1] * 4, [2] * 4]
    assert [c.text for c in store.rubric("kind").criteria] == [EVEN, SHORT]
    (added,) = [r for r in store.history("kind") if r.action == "add"]
    assert (added.step, added.version, added.detail["criterion"]["provenance"]) == (1, 2, "elicited@step:1")
    assert [report.step for report in callback.reports] == [1, 2]
    # What TRL logged is what the rubric returned for the completions it generated.
    logged = [e for e in trainer.state.log_history if "rewards/rubric/mean" in e]
    assert [e["rewards/rubric/mean"] for e in logged] == pytest.approx(
        [mean([s.value for s in scores]) for _, scores in recorded.batches], abs=1e-6
    )
    short_id = Criterion(SHORT, 0.7).id
    assert [f"rubric/{short_id}" in e for e in trainer.state.log_history if "rewards/rubric/mean" in e] == [
        False,
        True,
    ]
    for samples, scores in recorded.batches[1:]:
        for sample, score in zip(samples, scores, strict=True):
            expected = (
                RULES[EVEN](sample.completion_text) + 0.7 * RULES[SHORT](sample.completion_text)
            ) / 1.7
            assert score.value == pytest.approx(expected)
