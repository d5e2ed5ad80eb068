"""Every rubric path end to end against the real local server (``rewardlab serve-model`` running
the embedded SmolLM2-135M): grading in the three modes, rubrics generated from a reference and
from the task, Compute-as-Teacher, and online elicitation.

The model is tiny: what it writes is rarely a usable rubric. These tests check what must hold
whatever it says - statuses, value ranges, calls made, failures that keep the model's answer,
store versions that match the reports - not the quality of its judgements. Written answers are
kept short (``max_tokens``) so the suite stays fast on a CPU.
"""

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rubrics.elicit import ElicitationOptions, RubricElicitor
from rewardlab.rubrics.online import replay
from rewardlab.rubrics.store import RubricStore

PROMPT = "Explain why the sky is blue, in two sentences."
REFERENCE = (
    "Sunlight scatters off air molecules, and shorter (blue) wavelengths scatter far more than "
    "longer ones - Rayleigh scattering. So blue light reaches our eyes from every direction of the sky."
)
COMPLETIONS = [
    "Air molecules scatter blue light more than red light, so the sky looks blue.",
    "Because the ocean reflects onto it.",
    "The sky is blue.",
]
RUBRIC = [
    {"text": "Mentions that light is scattered", "weight": 5},
    {"text": "Says blue light scatters more than red light", "weight": 3},
    {"text": "Claims the sky reflects the ocean", "weight": -4},
]
WRITTEN = (Status.OK, Status.PARSE_ERROR)  # a written answer either reads or says why not


def reward(url, **config):
    return build(
        {
            "type": "rubric",
            "backend": {"type": "openai", "base_url": url, "model": "smollm2", "guided_choice": True},
            "client": {"cache": None},
            **config,
        }
    )


def samples():
    return [
        Sample(prompt=PROMPT, completion=c, reference=REFERENCE, id=f"s{i}")
        for i, c in enumerate(COMPLETIONS)
    ]


def score(url, **config):
    grader = reward(url, **config)
    try:
        return grader.score(samples())
    finally:
        grader.close()


def assert_failure_keeps_the_answer(score):
    assert score.status is Status.PARSE_ERROR, score
    assert score.reason and score.details["judge_answer"]


def test_per_criterion_grading_from_log_probabilities(local_server):
    scores = score(local_server, rubric=RUBRIC)
    assert all(s.ok for s in scores), scores
    for s in scores:
        # Points: met positive weight (at most 8) less met pitfall weight, over 8.
        assert -0.5 - 1e-9 <= s.value <= 1.0 + 1e-9
        assert len(s.breakdown) == 3 and all(0.0 <= met <= 1.0 for met in s.breakdown.values())
        assert s.usage.calls == 3 and s.usage.prompt_tokens > 0
        assert {c["verdict"] for c in s.details["criteria"]} <= {"yes", "no"}
        positive = sum(w * m for w, m in zip((5, 3), list(s.breakdown.values())[:2], strict=True))
        pitfall = 4 * list(s.breakdown.values())[2]
        assert s.value == pytest.approx((positive - pitfall) / 8)


def test_one_call_grading(local_server):
    scores = score(local_server, rubric=RUBRIC, mode="one_call", max_tokens=96)
    for s in scores:
        assert s.status in WRITTEN and s.usage.calls == 1
        if s.ok:
            assert set(s.breakdown) == {c["id"] for c in s.details["criteria"]} and len(s.breakdown) == 3
        else:
            assert_failure_keeps_the_answer(s)


def test_holistic_grading(local_server):
    scores = score(local_server, rubric=RUBRIC, mode="holistic", scale=[1, 5])
    assert all(s.ok and 0.0 <= s.value <= 1.0 and s.usage.calls == 1 for s in scores), scores


@pytest.mark.parametrize("source", ["reference", "task"])
def test_generated_rubrics(local_server, source):
    samples_with_task = [
        Sample(
            prompt=s.prompt, completion=s.completion, reference=s.reference, id=s.id,
            fields={"task_description": "Short science explanations for a general reader."},
        )
        for s in samples()
    ]  # fmt: skip
    grader = reward(local_server, generate=source, max_tokens=160, min_criteria=1)
    try:
        scores = grader.score(samples_with_task)
    finally:
        grader.close()
    # One rubric for the prompt: written once, charged to the first sample.
    if scores[0].ok:
        rubric_ids = {s.details["rubric_id"] for s in scores}
        assert len(rubric_ids) == 1 and all(s.ok for s in scores)
        assert all(
            c["weight"] in (1.0, 0.7, 0.3, -0.9) for s in scores for c in s.details["criteria"]
        )  # weights from the categories
        assert scores[0].usage.calls == 1 + len(scores[0].details["criteria"])
    else:
        assert all(s.status is Status.PARSE_ERROR and "rubric generation" in s.reason for s in scores)
        assert scores[0].details["judge_answer"] and scores[0].usage.calls == 1
        assert [s.usage.calls for s in scores[1:]] == [0, 0]


def test_compute_as_teacher(local_server):
    backend = {"type": "openai", "base_url": local_server, "model": "smollm2", "guided_choice": True}
    for verify in ("math", None):
        cat = build(
            {
                "type": "self_proposed_rubric",
                "verify": verify,
                "backend": backend,
                "client": {"cache": None},
                "synthesis_max_tokens": 48,
                "max_tokens": 160,
                "min_criteria": 1,
            }
        )
        try:
            rollouts = ["2 + 2 = 4, so \\boxed{4}.", "The answer is \\boxed{4}.", "I think \\boxed{5}."]
            scores = cat.score([Sample(prompt="What is 2 + 2?", completion=c) for c in rollouts])
        finally:
            cat.close()
        assert all(s.status is not Status.ERROR for s in scores), scores
        assert all(s.details.get("synthesized_reference") for s in scores if s.ok)
        if verify == "math":
            # The synthesized reference is the model's; whatever it says, answers that agree
            # with each other score alike.
            assert scores[0].status is scores[1].status
            if scores[0].ok:
                assert scores[0].value == scores[1].value and scores[2].value in (0.0, 1.0)
        else:
            assert len({s.status for s in scores}) == 1  # the group succeeds or fails together
            if scores[0].ok:
                assert all(0.0 <= s.value <= 1.0 for s in scores)
            else:
                assert "criteria proposal" in scores[0].reason or "synthesis" in scores[0].reason


def test_online_elicitation_over_saved_rollouts(local_server, tmp_path):
    store = RubricStore(tmp_path / "rubrics.sqlite")
    grader = reward(local_server, rubric=RUBRIC[:2], store=store.path, max_tokens=128)
    rows = [
        {"step": step, "prompt": PROMPT, "prompt_id": "sky", "completion": c, "reference_response": REFERENCE}
        for step in (1, 2)
        for c in COMPLETIONS[:2]
    ]
    try:
        steps = replay(grader, RubricElicitor(grader, store, ElicitationOptions(pairs_per_prompt=1)), rows)
    finally:
        grader.close()
    assert [len(step.scores) for step in steps] == [2, 2]
    assert all(s.ok for step in steps for s in step.scores)
    history = store.history("sky")
    for step in steps:
        # Every change a report names is in the store's log under the version it reports.
        for prompt_id, changes in step.report.changes.items():
            logged = [r for r in history if r.step == step.step and r.prompt_id == prompt_id]
            assert [r.action for r in logged if r.action != "set"] == [c.action for c in changes]
            assert {r.version for r in logged if r.action != "set"} == {step.report.versions[prompt_id]}
        assert all("elicitation" in failure or "maximum" in failure for failure in step.report.failures)
    # The second step was graded with whatever the store held after the first.
    latest_after_first = max((r.version for r in history if r.step in (0, 1)), default=None)
    if latest_after_first is not None:
        assert {s.details["rubric_version"] for s in steps[1].scores} == {latest_after_first}
