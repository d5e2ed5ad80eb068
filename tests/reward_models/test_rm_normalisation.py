"""``shaping: group`` and ``shaping: running`` of the reward-model rewards: exact values against
numpy (Bessel-corrected standard deviations, ``1e-4`` added, as TRL's GRPO advantages and its
``RunningMoments``), failed scores kept out of the statistics, state across calls and pickling,
on `OutputShaping` itself, on ``reward_model`` with a tiny classifier (raw values from its forward
pass run by hand) and on ``served_reward_model`` with a scripted server (raw values scripted)."""

import pickle
import threading

import numpy as np
import pytest
import torch

from rewardlab import ConfigError, Sample, Score, Status, build
from rewardlab.reward_models.shaping import OutputShaping
from rewardlab.testing import ScriptedPoolingServer
from tests.reward_models.tiny_models import save_classifier

EPS = 1e-4


def z(value, values):
    values = np.asarray(values, dtype=float)
    std = values.std(ddof=1) if len(values) > 1 else 0.0
    return (value - values.mean()) / (std + EPS)


def ok(value, **details):
    return Score(value, details={"raw": value, **details})


def failed():
    return Score.failure(Status.TIMEOUT, "no score")


# OutputShaping on hand-made scores.


def test_group_is_the_z_score_within_each_group_of_the_call():
    samples = [
        Sample(prompt="p", completion="a"),
        Sample(prompt="p", completion="b"),
        Sample(prompt="q", completion="c"),
        Sample(prompt="p", completion="d"),
        Sample(prompt="q", completion="e"),
        Sample(prompt="q", completion="f"),
        Sample(prompt="p", completion="g", fields={"group_id": "other"}),
        Sample(prompt="r", completion="h"),
    ]
    scores = [ok(1.0), ok(3.5), ok(-2.0), failed(), ok(0.25), ok(0.25), ok(9.0), ok(4.0)]
    shaped = OutputShaping("group").shape_scores(samples, scores)
    p, q = [1.0, 3.5], [-2.0, 0.25, 0.25]  # the failed score of p is in neither
    assert [s.value for s in shaped[:3]] == pytest.approx([z(1.0, p), z(3.5, p), z(-2.0, q)], abs=1e-12)
    assert shaped[3] is scores[3]
    assert [s.value for s in shaped[4:6]] == pytest.approx([z(0.25, q)] * 2, abs=1e-12)
    assert shaped[0].details == {"raw": 1.0, "group": {"count": 2, "mean": 2.25, "std": np.std(p, ddof=1)}}
    # Alone in its group (a field of its own; a prompt of its own): 0, and the reason says so.
    for alone in shaped[6:]:
        assert alone.value == 0.0 and alone.status is Status.OK
        assert alone.reason == "the only scored sample of its group: shaped to 0"
        assert alone.details["group"]["count"] == 1 and alone.details["group"]["std"] == 0.0


def test_group_reads_the_named_field_and_keeps_an_earlier_reason():
    samples = [Sample(prompt=str(i), completion="x", fields={"question": i % 2}) for i in range(4)]
    scores = [ok(2.0), ok(5.0), Score(4.0, reason="truncated (left): read 8 of 9 tokens"), ok(-1.0)]
    shaped = OutputShaping("group", group_field="question").shape_scores(samples, scores)
    assert [s.value for s in shaped] == pytest.approx(
        [z(2.0, [2.0, 4.0]), z(5.0, [5.0, -1.0]), z(4.0, [2.0, 4.0]), z(-1.0, [5.0, -1.0])], abs=1e-12
    )
    assert shaped[2].reason == "truncated (left): read 8 of 9 tokens"
    by_prompt = OutputShaping("group").shape_scores(samples, scores)  # every prompt differs
    assert [s.value for s in by_prompt] == [0.0] * 4


def test_equal_scores_in_a_group_shape_to_zero_and_clip_bounds_the_result():
    samples = [Sample(prompt="p", completion=c) for c in "abc"]
    assert [s.value for s in OutputShaping("group").shape_scores(samples, [ok(2.0)] * 3)] == [0.0] * 3
    clipped = OutputShaping("group", clip=(-1.0, 1.0)).shape_scores(samples, [ok(0.0), ok(1.0), ok(10.0)])
    values = [z(v, [0.0, 1.0, 10.0]) for v in (0.0, 1.0, 10.0)]
    assert [s.value for s in clipped] == pytest.approx([max(-1.0, min(1.0, v)) for v in values], abs=1e-12)
    assert clipped[2].value == 1.0


def test_running_is_the_z_score_by_every_score_seen_so_far():
    shaping = OutputShaping("running")
    calls = [[1.5], [2.0, None, -1.0, 4.0], [], [0.5, 0.5, None], [10.0, -3.0]]
    seen: list[float] = []
    for call in calls:
        scores = [failed() if value is None else ok(value) for value in call]
        samples = [Sample(prompt="p", completion="c")] * len(call)
        shaped = shaping.shape_scores(samples, scores)
        seen += [value for value in call if value is not None]
        for value, score in zip(call, shaped, strict=True):
            if value is None:
                assert score.status is Status.TIMEOUT and score.value is None
                continue
            assert score.value == pytest.approx(z(value, seen), abs=1e-12)
            assert score.details["running"] == {
                "count": len(seen), "mean": pytest.approx(np.mean(seen), abs=1e-12),
                "std": pytest.approx(np.std(seen, ddof=1) if len(seen) > 1 else 0.0, abs=1e-12),
            }  # fmt: skip
    assert shaping.running.count == 8  # of ten scores: the two failed ones never entered


def test_the_first_call_is_normalised_by_itself_and_a_first_lone_score_is_zero():
    (first,) = OutputShaping("running").shape_scores([Sample(completion="c")], [ok(7.0)])
    assert first.value == 0.0 and first.reason == "the first score seen: no spread yet, shaped to 0"
    batch = [3.0, -1.0, 2.0]
    shaped = OutputShaping("running").shape_scores([Sample(completion="c")] * 3, [ok(v) for v in batch])
    assert [s.value for s in shaped] == pytest.approx([z(v, batch) for v in batch], abs=1e-12)
    assert all(s.reason is None for s in shaped)


def test_a_pickled_running_shaping_carries_its_statistics_and_then_keeps_its_own():
    shaping = OutputShaping("running", clip=(-5.0, 5.0))
    samples = [Sample(completion="c")] * 3
    shaping.shape_scores(samples, [ok(1.0), ok(2.0), ok(6.0)])
    copy = pickle.loads(pickle.dumps(shaping))
    assert (copy.running.count, copy.running.mean) == (3, 3.0)
    after_copy = copy.shape_scores(samples[:1], [ok(0.0)])[0].value
    after_original = shaping.shape_scores(samples[:1], [ok(0.0)])[0].value
    assert after_copy == after_original == pytest.approx(z(0.0, [1.0, 2.0, 6.0, 0.0]), abs=1e-12)
    copy.shape_scores(samples[:1], [ok(100.0)])
    assert (shaping.running.count, copy.running.count) == (4, 5)


def test_running_updates_from_many_threads_lose_nothing():
    shaping = OutputShaping("running")
    values = [float(i % 17) - 3.5 for i in range(800)]

    def call(part):
        shaping.shape_scores([Sample(completion="c")] * len(part), [ok(v) for v in part])

    threads = [threading.Thread(target=call, args=(values[i : i + 100],)) for i in range(0, 800, 100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (last,) = shaping.shape_scores([Sample(completion="c")], [ok(0.0)])
    assert last.details["running"]["count"] == 801
    assert last.value == pytest.approx(z(0.0, [*values, 0.0]), abs=1e-9)


def test_a_batch_shaping_cannot_shape_one_value_alone():
    with pytest.raises(ValueError, match="shaping: group shapes a batch of scores"):
        OutputShaping("group")(1.0)


@pytest.mark.parametrize("kind", ["reward_model", "served_reward_model"])
@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({"group_field": "question"}, "group_field", "is read only with shaping: group"),
        (
            {"shaping": "running", "group_field": "question"},
            "group_field",
            "is read only with shaping: group",
        ),
        ({"shaping": "z"}, "shaping", "'normalized', 'group' or 'running'"),
    ],
)
def test_bad_shaping_options_are_config_errors_naming_the_option(kind, options, path, message):
    where = {"model": "/rm"} if kind == "reward_model" else {"url": "http://127.0.0.1:9"}
    with pytest.raises(ConfigError) as error:
        build({"type": kind, **where, **options})
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


# reward_model: raw values from the tiny classifier's forward pass, run by hand.


def raw_of(model, tokenizer, prompt, completion):
    ids = tokenizer(f"user: {prompt}\nassistant: {completion}\n", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, 0].item()


@pytest.fixture
def rm(tokenizer, tmp_path):
    return str(tmp_path / "rm"), save_classifier(tmp_path / "rm", tokenizer, seed=21)


def test_reward_model_group_shaping_over_a_grpo_batch_with_a_failed_sample(rm, tokenizer):
    folder, model = rm
    batch = [
        ("2+2?", "4"),
        ("2+2?", "five"),
        ("2+2?", 5),
        ("2+2?", "4, clearly"),
        ("3+3?", "6"),
        ("3+3?", "9"),
    ]
    samples = [Sample(prompt=p, completion=c) for p, c in batch]
    scores = build({"type": "reward_model", "model": folder, "shaping": "group"}).score(samples)
    assert scores[2].status is Status.INVALID_INPUT  # malformed: fails alone, enters no statistics
    first = [raw_of(model, tokenizer, "2+2?", c) for c in ("4", "five", "4, clearly")]
    second = [raw_of(model, tokenizer, "3+3?", c) for c in ("6", "9")]
    values = [scores[i].value for i in (0, 1, 3, 4, 5)]
    expected = [z(v, first) for v in first] + [z(v, second) for v in second]
    assert values == pytest.approx(expected, abs=1e-4)
    assert scores[0].details["raw"] == pytest.approx(first[0], abs=1e-5)
    assert scores[0].details["group"]["count"] == 3 and scores[4].details["group"]["count"] == 2


def test_reward_model_running_shaping_across_calls_and_pickling(rm, tokenizer):
    folder, model = rm
    reward = build({"type": "reward_model", "model": folder, "shaping": "running"})
    first = [Sample(prompt="2+2?", completion=c) for c in ("4", "five", "four")]
    second = [Sample(prompt="Hi", completion=c) for c in ("Hello", "Hey there")]
    raws = [raw_of(model, tokenizer, s.prompt, s.completion) for s in first + second]
    assert [s.value for s in reward.score(first)] == pytest.approx(
        [z(v, raws[:3]) for v in raws[:3]], abs=1e-4
    )
    copy = pickle.loads(pickle.dumps(reward))
    expected = [z(v, raws) for v in raws[3:]]
    assert [s.value for s in reward.score(second)] == pytest.approx(expected, abs=1e-4)
    assert [s.value for s in copy.score(second)] == pytest.approx(expected, abs=1e-4)


# served_reward_model: raw values scripted by text.


RAW = {"a1": 2.0, "a2": -1.0, "a3": 0.5, "b1": 4.0, "b2": 4.5}


def scripted(text):
    return [RAW[text[1:]]]  # prompt "a" or "b" + completion "1".."3"


def served(url, **options):
    return build({
        "type": "served_reward_model", "url": url, "protocol": "sglang", "render": "text", **options,
    })  # fmt: skip


def test_served_reward_model_group_shaping_with_a_failed_sample():
    samples = [Sample(prompt=f"x{t[0]}", completion=t[1], fields={"group_id": t[0]}) for t in RAW]
    samples.insert(2, Sample(prompt="xa", completion=[{"role": "assistant", "content": "3"}]))
    with ScriptedPoolingServer("sglang", scripted) as server:
        scores = served(server.url, shaping="group").score(samples)
    assert scores[2].status is Status.INVALID_INPUT  # chat messages cannot be sent as text
    a, b = [2.0, -1.0, 0.5], [4.0, 4.5]
    expected = [z(2.0, a), z(-1.0, a), z(0.5, a), z(4.0, b), z(4.5, b)]
    assert [scores[i].value for i in (0, 1, 3, 4, 5)] == pytest.approx(expected, abs=1e-12)
    group = {"count": 3, "mean": pytest.approx(0.5), "std": pytest.approx(1.5)}
    assert scores[0].details == {"raw": 2.0, "attempts": 1, "group": group}


def test_served_reward_model_running_shaping_across_calls():
    samples = [Sample(prompt=f"x{t[0]}", completion=t[1]) for t in RAW]
    with ScriptedPoolingServer("sglang", scripted) as server:
        reward = served(server.url, shaping="running", batch_size=2)
        first = reward.score(samples[:3])
        second = reward.score(samples[3:])
    values = list(RAW.values())
    assert [s.value for s in first] == pytest.approx([z(v, values[:3]) for v in values[:3]], abs=1e-12)
    assert [s.value for s in second] == pytest.approx([z(v, values) for v in values[3:]], abs=1e-12)
    assert second[-1].details["running"]["count"] == 5
