"""RubricReward against a scripted grader over real HTTP: the grader answers from the criterion
and the response, so values, requests and failures can be checked exactly."""

import asyncio
import json
import math
import re

import pytest
import yaml

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from rewardlab.llm.backend import TokenLogprob
from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.rubrics.store import RubricStore
from rewardlab.testing import Reply
from tests.conftest import openai_backend

RUBRIC = [
    {"id": "answer", "text": "Says the answer is 42", "weight": 5},
    {"id": "units", "text": "Mentions units", "weight": 2},
    {"id": "insult", "text": "Insults the user", "weight": -3},
]


def user_text(body):
    return body["messages"][-1]["content"]


def fenced(body, label):
    return re.findall(rf"<<<BEGIN {label} (\w+)>>>\n(.*?)\n<<<END {label} \1>>>", user_text(body), re.DOTALL)


def meets(criterion, response):
    """The scripted grader's rule: a criterion is met when its key word is in the response."""
    key = {"Says the answer is 42": "42", "Mentions units": "metres", "Insults the user": "idiot"}.get(
        criterion
    )
    return key is not None and key in response


def grader(body):
    ((_, response),) = fenced(body, "RESPONSE")
    criteria = re.findall(
        r"<<<BEGIN CRITERION(?: (\d+))? ([0-9a-f]{12})>>>\n(.*?)\n<<<END", user_text(body), re.DOTALL
    )
    if "Grade the response below on a scale" in user_text(body):
        met = sum(meets(text, response) for _, _, text in criteria)
        return Reply(text=json.dumps({"score": 1 + 3 * met}))
    if len(criteria) == 1 and not criteria[0][0]:
        return Reply(text=json.dumps({"verdict": "yes" if meets(criteria[0][2], response) else "no"}))
    verdicts = {number: ("yes" if meets(text, response) else "no") for number, _, text in criteria}
    return Reply(text=json.dumps({"verdicts": verdicts}))


def reward(server, **options):
    return build(
        {
            "type": "rubric",
            "backend": openai_backend(server.url),
            "client": {"cache": None, "max_attempts": 1},
            **options,
        }
    )


RESPONSES = ["It is 42 metres.", "It is 42.", "You idiot, it is 7."]


@pytest.mark.parametrize("mode", ["per_criterion", "one_call"])
def test_points_from_per_criterion_verdicts(scripted, mode):
    scripted.default = grader
    scores = reward(scripted, rubric=RUBRIC, mode=mode).score(
        [Sample(prompt="How far?", completion=c) for c in RESPONSES]
    )
    assert [s.value for s in scores] == pytest.approx([7 / 7, 5 / 7, -3 / 7])
    assert scores[0].breakdown == {"answer": 1.0, "units": 1.0, "insult": 0.0}
    assert [c["verdict"] for c in scores[2].details["criteria"]] == ["no", "no", "yes"]
    calls = sum(s.usage.calls for s in scores)
    assert calls == (3 * 3 if mode == "per_criterion" else 3) == len(scripted.requests)


def test_holistic_grade(scripted):
    scripted.default = grader
    scores = reward(scripted, rubric=RUBRIC, mode="holistic").score(
        [Sample(prompt="q", completion=c) for c in RESPONSES]
    )
    assert [s.breakdown["score"] for s in scores] == [7.0, 4.0, 4.0]  # 1 + 3 x criteria "met"
    assert scores[0].value == pytest.approx(6 / 9)
    assert "(weight -3.0)" in user_text(scripted.requests[0])


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("weighted_sum", [7.0, 5.0, -3.0]),
        ("all_or_nothing", [1.0, 0.0, 0.0]),
        ("fraction", [1.0, 2 / 3, 0.0]),
    ],
)
def test_other_aggregations(scripted, aggregate, expected):
    scripted.default = grader
    scores = reward(scripted, rubric=RUBRIC, aggregate=aggregate).score(
        [Sample(completion=c) for c in RESPONSES]
    )
    assert [s.value for s in scores] == pytest.approx(expected)


def test_pitfalls_are_asked_as_mistakes(scripted):
    scripted.default = grader
    reward(scripted, rubric=RUBRIC).score([Sample(completion="x")])
    insult = next(b for b in scripted.requests if fenced(b, "CRITERION")[0][1] == "Insults the user")
    assert "describes a mistake" in user_text(insult)


def test_ordinal_choices_and_probabilities(scripted):
    ordinal = [
        {
            "id": "clear",
            "text": "Explains clearly",
            "weight": 1,
            "choices": [
                {"label": "fully", "value": 1},
                {"label": "partly", "value": 0.5},
                {"label": "not", "value": 0},
            ],
        }
    ]
    top = (("partly", math.log(0.6)), ("fully", math.log(0.3)), ("not", math.log(0.1)))
    scripted.default = Reply(text="partly", logprobs=[TokenLogprob("partly", math.log(0.6), top)])
    score = reward(scripted, rubric=ordinal, backend=openai_backend(scripted.url, guided_choice=True)).score(
        [Sample(completion="x")]
    )[0]
    assert score.value == pytest.approx(0.6 * 0.5 + 0.3 * 1.0)
    assert scripted.requests[0]["structured_outputs"] == {"choice": ["fully", "partly", "not"]}


def test_where_the_rubric_comes_from(scripted, tmp_path):
    scripted.default = grader
    store = RubricStore(tmp_path / "store.sqlite")
    store.put("stored", Rubric((Criterion("Mentions units", 1.0, id="units"),)))
    judged = reward(scripted, rubric=RUBRIC[:1], store=str(tmp_path / "store.sqlite"))
    samples = [
        Sample(
            completion="42 metres",
            fields={
                "rubric": [
                    {"id": "own", "text": "Insults the user", "weight": -1},
                    {"id": "x", "text": "Says the answer is 42", "weight": 1},
                ]
            },
        ),
        Sample(completion="42 metres", fields={"prompt_id": "stored"}),
        Sample(completion="42 metres", fields={"prompt_id": "elsewhere"}),
    ]
    own, stored, configured = judged.score(samples)
    assert set(own.breakdown) == {"own", "x"} and own.details["rubric_version"] is None
    assert set(stored.breakdown) == {"units"} and stored.details["rubric_version"] == 1
    assert set(configured.breakdown) == {"answer"}


def test_no_rubric_is_invalid_input_naming_the_field(scripted):
    score = reward(scripted).score([Sample(completion="x", id="r9")])[0]
    assert score.status is Status.INVALID_INPUT and "r9" in score.reason and "rubric" in score.reason
    bad = reward(scripted).score([Sample(completion="x", fields={"rubric": [{"text": "y", "weight": 0}]})])[0]
    assert bad.status is Status.INVALID_INPUT and "fields.rubric[0].weight" in bad.reason
    assert scripted.requests == []


def test_points_on_an_all_pitfall_rubric_fail_at_build_time(scripted):
    from rewardlab import ConfigError

    with pytest.raises(ConfigError, match="positive criterion"):
        reward(scripted, rubric=[{"text": "Insults the user", "weight": -1}])
    per_sample = reward(scripted).score(
        [Sample(completion="x", fields={"rubric": [{"text": "Insults the user", "weight": -1}]})]
    )
    assert per_sample[0].status is Status.INVALID_INPUT and "positive criterion" in per_sample[0].reason
    assert scripted.requests == []


def test_a_failed_criterion_fails_the_sample(scripted):
    scripted.default = Reply(status=500)
    score = reward(scripted, rubric=RUBRIC).score([Sample(completion="x")])[0]
    assert score.status is Status.BACKEND_ERROR and "criterion" in score.reason
    assert score.usage.calls == 3


def test_one_call_parse_error_keeps_the_answer(scripted):
    scripted.default = Reply(text='{"verdicts": {"1": "yes", "2": "maybe", "3": "no"}}')
    score = reward(scripted, rubric=RUBRIC, mode="one_call").score([Sample(completion="x")])[0]
    assert score.status is Status.PARSE_ERROR and "maybe" in score.reason
    assert score.details["judge_answer"].startswith('{"verdicts"')


GENERATED = {
    "criteria": [
        {"text": "Says the answer is 42", "category": "essential"},
        {"text": "Mentions units", "category": "optional"},
        {"text": "Insults the user", "category": "pitfall"},
        {"text": "no category"},
    ]
}


@pytest.mark.parametrize("source", ["reference", "task"])
def test_generated_rubrics_once_per_prompt(scripted, source):
    def answer(body):
        if "Write a rubric" in user_text(body):
            return Reply(text="Here it is.\n" + json.dumps(GENERATED))
        return grader(body)

    scripted.default = answer
    samples = [
        Sample(
            prompt="How far?", completion=c, reference="42 metres", fields={"task_description": "distances"}
        )
        for c in RESPONSES
    ]
    scores = reward(scripted, generate=source).score(samples)
    writes = [b for b in scripted.requests if "Write a rubric" in user_text(b)]
    assert len(writes) == 1
    assert bool(fenced(writes[0], "REFERENCE")) == (source == "reference")
    assert [s.value for s in scores] == pytest.approx([(1.0 + 0.3) / 1.3, 1.0 / 1.3, -0.9 / 1.3])
    first = scores[0].details["criteria"]
    assert [c["weight"] for c in first] == [1.0, 0.3, -0.9]  # from the categories; "no category" dropped
    assert sum(s.usage.calls - s.usage.cached_calls for s in scores) == len(scripted.requests)


def test_an_unusable_generated_rubric_fails_with_the_answer(scripted):
    scripted.default = Reply(text='{"criteria": [{"text": "Vague"}]}')
    scores = reward(scripted, generate="reference").score(
        [Sample(prompt="q", completion=c, reference="r") for c in "ab"]
    )
    assert all(s.status is Status.PARSE_ERROR for s in scores)
    assert "usable criteria" in scores[0].reason and scores[0].details["judge_answer"]


def test_per_criterion_metrics_through_the_trl_adapter(scripted):
    scripted.default = grader
    func = as_reward_func(reward(scripted, rubric=RUBRIC))
    metrics = {}
    values = asyncio.run(func(prompts=["q", "q"], completions=RESPONSES[:2], log_metric=metrics.__setitem__))
    assert values == pytest.approx([1.0, 5 / 7])
    assert (
        metrics["rubric/answer"] == 1.0 and metrics["rubric/units"] == 0.5 and metrics["rubric/insult"] == 0.0
    )


def test_every_rubric_path_through_the_cli(scripted, tmp_path):
    """Grading, a generated rubric and Compute-as-Teacher in one config, through ``rewardlab score``."""

    def answer(body):
        text = user_text(body)
        if "Write a rubric" in text:
            return Reply(text=json.dumps(GENERATED))
        if "Write the single best response" in text:
            return Reply(text="It is 42 metres.")
        if "yes/no criteria" in text:
            return Reply(text=json.dumps({"criteria": [{"text": "Says the answer is 42"}]}))
        return grader(body)

    scripted.default = answer
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "prompt": "How far?", "completion": c, "answer": "42 metres"}) + "\n"
            for i, c in enumerate(RESPONSES)
        )
    )
    judge = {"backend": openai_backend(scripted.url), "client": {"cache": None}}
    config = {
        "type": "combine",
        "components": {
            "graded": {"type": "rubric", "rubric": RUBRIC, "mode": "one_call", **judge},
            "generated": {"type": "rubric", "generate": "reference", **judge},
            "self_proposed": {"type": "self_proposed_rubric", "min_criteria": 1, **judge},
        },
    }
    config_path = tmp_path / "rubrics.yaml"
    config_path.write_text(yaml.safe_dump(config))
    output = tmp_path / "scores.jsonl"
    assert (
        main(["score", str(rows), "--config", str(config_path), "--output", str(output), "--no-progress"])
        == 0
    )
    records = {r["id"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert [records[f"r{i}"]["status"] for i in range(3)] == ["ok"] * 3
    breakdowns = [records[f"r{i}"]["breakdown"] for i in range(3)]
    assert [b["graded"] for b in breakdowns] == pytest.approx([1.0, 5 / 7, -3 / 7])
    assert [b["generated"] for b in breakdowns] == pytest.approx([1.3 / 1.3, 1.0 / 1.3, -0.9 / 1.3])
    assert [b["self_proposed"] for b in breakdowns] == [1.0, 1.0, 0.0]


def test_the_store_wins_over_the_column_it_started_from(scripted, tmp_path):
    scripted.default = grader
    store = RubricStore(tmp_path / "rubrics.sqlite")
    store.put("q", Rubric.from_data(RUBRIC[:1]))
    column = json.dumps(RUBRIC[1:2])  # "Mentions units" only
    sample = Sample(prompt="How far?", completion="It is 42.", fields={"prompt_id": "q", "rubric": column})
    (score,) = reward(scripted, store=store.path).score([sample])
    assert score.value == 1.0 and list(score.breakdown) == ["answer"] and score.details["rubric_version"] == 1
    (from_column,) = reward(scripted).score([sample])
    assert from_column.value == 0.0 and list(from_column.breakdown) == ["units"]


def test_the_grader_sees_the_reference_only_when_asked(scripted):
    scripted.default = grader
    sample = Sample(prompt="How far?", completion="It is 42.", reference="Forty-two metres.")
    reward(scripted, rubric=RUBRIC[:1]).score([sample])
    reward(scripted, rubric=RUBRIC[:1], use_reference=True).score([sample])
    assert [bool(fenced(body, "REFERENCE")) for body in scripted.requests] == [False, True]


def test_all_or_nothing_needs_every_ordinal_criterion_fully_met(scripted):
    rubric = [
        {"id": "answer", "text": "Says the answer is 42", "weight": 1},
        {
            "id": "clarity",
            "text": "Explains clearly",
            "weight": 1,
            "choices": [
                {"label": "fully", "value": 1},
                {"label": "partly", "value": 0.5},
                {"label": "no", "value": 0},
            ],
        },
    ]
    for answer, expected in (("fully", 1.0), ("partly", 0.0)):
        scripted.default = lambda body, answer=answer: Reply(
            text=json.dumps({"verdict": "yes" if "42" in fenced(body, "CRITERION")[0][1] else answer})
        )
        (score,) = reward(scripted, rubric=rubric, aggregate="all_or_nothing").score(
            [Sample(prompt="q", completion="It is 42.")]
        )
        assert score.value == expected, answer
    # The same partial verdict earns half the criterion under points.
    (points,) = reward(scripted, rubric=rubric).score([Sample(prompt="q", completion="It is 42.")])
    assert points.value == pytest.approx((1 + 0.5) / 2)


def test_options_and_empty_completions(scripted):
    with pytest.raises(ConfigError, match=r"max_criteria: should be at least min_criteria=5"):
        reward(scripted, generate="task", min_criteria=5, max_criteria=2)
    with pytest.raises(ValueError, match="not prefixes"):
        reward(scripted, rubric=RUBRIC, mode="holistic", verdict_from="logprobs")
    (empty,) = reward(scripted, rubric=RUBRIC).score([Sample(prompt="q", completion=" ... ")])
    assert empty.value == 0.0 and scripted.requests == []


def test_a_breakdown_by_category_bounds_the_metrics(scripted):
    scripted.default = grader
    rubric = [
        {**c, "category": category}
        for c, category in zip(RUBRIC, ["accuracy", "accuracy", "tone"], strict=True)
    ]
    (score,) = reward(scripted, rubric=rubric, breakdown_by="category").score(
        [Sample(prompt="q", completion="It is 42.")]
    )
    assert score.breakdown == {"accuracy": 0.5, "tone": 0.0}
    assert score.value == pytest.approx(5 / 7)  # the value does not depend on the breakdown
