"""`LengthControlledReward`: the adjustment against numpy's least squares, over groups, batches
and a calibration file; a reward that is only length comes out flat while a real signal keeps
its order; degenerate sets and failures; options errors, configs and pickling.

The wrapped reward is scripted (its value is a sample field), and every expected value is
computed with numpy from the completions' lengths: ``np.polyfit`` for the slope,
``np.std(ddof=1)`` for AlpacaEval's standardisation."""

import doctest
import json
import pickle

import numpy as np
import pytest

import rewardlab.rewards.length_controlled
from rewardlab import ConfigError, RuleReward, Sample, Score, Status, build, register
from rewardlab.rewards.length_controlled import (
    LengthCalibration,
    LengthControlledReward,
    fit_length_calibration,
)


@register("field_value_for_length_control_tests")
class FieldValue(RuleReward):
    """The value in ``fields[key]``; a string there is a status to fail with."""

    def __init__(self, key: str = "r", name: str | None = None):
        self.key = key
        self.name = name or "scripted"

    def check(self, sample):
        value = sample.fields[self.key]
        if isinstance(value, str):
            return Score.failure(value, f"scripted said {value}")
        return Score(value, breakdown={"half": value / 2}, details={"seen": True})


class LogWords(RuleReward):
    """``weight * log(1 + words)``, plus 1 when ``fields["correct"]``: a length bias with, or
    without, a real signal."""

    name = "log_words"

    def __init__(self, weight):
        self.weight = weight

    def check(self, sample):
        bonus = 1.0 if sample.fields.get("correct") else 0.0
        return Score(bonus + self.weight * np.log1p(len(sample.completion_text.split())))


def sample(length, r, group="g", **fields):
    return Sample(prompt="p", completion="x" * length, fields={"r": r, "group_id": group, **fields})


def tanh_std(lengths):
    lengths = np.asarray(lengths, dtype=float)
    return np.tanh((lengths - lengths.mean()) / lengths.std(ddof=1))


def controlled(features, values):
    """What length control should give: the values less the fitted line's slope times the
    feature's deviation from its mean, by numpy's polynomial fit."""
    features, values = np.asarray(features), np.asarray(values)
    slope = np.polyfit(features, values, 1)[0]
    return values - slope * (features - features.mean()), slope


LENGTHS = [12, 40, 25, 90, 60]
VALUES = [0.1, 0.7, 0.2, 0.9, 0.4]
OTHER_LENGTHS = [5, 7, 30, 11]
OTHER_VALUES = [0.9, 0.3, 0.5, 0.8]


def test_group_fit_matches_numpy_in_each_group():
    batch = [sample(n, r, "g1") for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch += [sample(n, r, "g2") for n, r in zip(OTHER_LENGTHS, OTHER_VALUES, strict=True)]
    scores = LengthControlledReward(FieldValue()).score(batch)
    first, slope1 = controlled(tanh_std(LENGTHS), VALUES)
    second, slope2 = controlled(tanh_std(OTHER_LENGTHS), OTHER_VALUES)
    assert [s.value for s in scores] == pytest.approx([*first, *second])
    assert scores[0].details["slope"] == pytest.approx(slope1)
    assert scores[-1].details["slope"] == pytest.approx(slope2)
    assert scores[0].details["feature"] == pytest.approx(tanh_std(LENGTHS)[0])
    assert scores[0].details["fit_size"] == 5 and scores[-1].details["fit_size"] == 4
    # The mean reward of each group is kept; only what length predicts moves.
    assert np.mean([s.value for s in scores[:5]]) == pytest.approx(np.mean(VALUES))


def test_batch_fit_uses_one_slope_over_every_group():
    batch = [sample(n, r, "g1") for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch += [sample(n, r, "g2") for n, r in zip(OTHER_LENGTHS, OTHER_VALUES, strict=True)]
    scores = LengthControlledReward(FieldValue(), fit="batch").score(batch)
    expected, slope = controlled(tanh_std(LENGTHS + OTHER_LENGTHS), VALUES + OTHER_VALUES)
    assert [s.value for s in scores] == pytest.approx(expected.tolist())
    assert [s.details["slope"] for s in scores] == pytest.approx([slope] * len(batch))
    grouped = LengthControlledReward(FieldValue(), fit="group").score(batch)
    assert [s.value for s in scores] != pytest.approx([s.value for s in grouped])


def test_groups_default_to_the_prompt_and_group_field_names_another_field():
    batch = [
        Sample(prompt=prompt, completion="x" * n, fields={"r": r, "item": item})
        for prompt, item, n, r in [("p", 1, 10, 0.1), ("p", 1, 20, 0.5), ("p", 2, 35, 0.2), ("q", 2, 50, 0.9)]
    ]
    by_prompt = LengthControlledReward(FieldValue(), min_fit_samples=2).score(batch)
    assert by_prompt[3].value == 0.9 and by_prompt[3].details["fit_size"] == 1
    assert [s.value for s in by_prompt[:3]] == pytest.approx(
        controlled(tanh_std([10, 20, 35]), [0.1, 0.5, 0.2])[0]
    )
    by_item = LengthControlledReward(FieldValue(), group_field="item", min_fit_samples=2).score(batch)
    assert [s.value for s in by_item[2:]] == pytest.approx([0.55, 0.55])  # two points: a line through both


def test_log_feature_in_words_and_tokens():
    texts = ["a b", "a b c d e f", "a", "a b c d e f g h i j k"]
    values = [0.3, 0.8, 0.1, 0.6]
    batch = [Sample(completion=t, fields={"r": v}) for t, v in zip(texts, values, strict=True)]
    words = LengthControlledReward(FieldValue(), fit="batch", feature="log", unit="words").score(batch)
    features = np.log1p([len(t.split()) for t in texts])
    assert [s.value for s in words] == pytest.approx(controlled(features, values)[0].tolist())
    ids = [[0] * n for n in (3, 9, 2, 4)]
    tokens = [
        Sample(completion="t", fields={"r": v, "completion_ids": i}) for v, i in zip(values, ids, strict=True)
    ]
    by_tokens = LengthControlledReward(FieldValue(), fit="batch", feature="log", unit="tokens").score(tokens)
    assert [s.value for s in by_tokens] == pytest.approx(
        controlled(np.log1p([3, 9, 2, 4]), values)[0].tolist()
    )
    assert by_tokens[1].details["length"] == 9 and by_tokens[1].details["unit"] == "tokens"


def test_a_reward_that_is_only_length_becomes_flat_and_a_real_signal_keeps_its_order():
    lengths = [3, 8, 15, 30, 60, 120]
    correct = [False, True, False, True, True, False]
    batch = [
        Sample(prompt="p", completion="w " * n, fields={"correct": c})
        for n, c in zip(lengths, correct, strict=True)
    ]
    biased = LengthControlledReward(LogWords(0.4), feature="log", unit="words")
    only_length = biased.score([Sample(prompt="p", completion="w " * n) for n in lengths])
    raw = [s.details["raw_value"] for s in only_length]
    assert raw == sorted(raw) and raw[-1] - raw[0] > 1  # before: longer is better
    assert [s.value for s in only_length] == pytest.approx([np.mean(raw)] * len(lengths))  # after: flat
    assert only_length[0].details["slope"] == pytest.approx(0.4)

    with_signal = biased.score(batch)
    values = [s.value for s in with_signal]
    right = [v for v, c in zip(values, correct, strict=True) if c]
    wrong = [v for v, c in zip(values, correct, strict=True) if not c]
    assert min(right) > max(wrong)  # every right answer above every wrong one, whatever its length
    # Before control, a long wrong answer beat a short right one.
    raw_values = [s.details["raw_value"] for s in with_signal]
    assert raw_values[5] > raw_values[1]
    expected, _ = controlled(np.log1p(lengths), raw_values)
    assert values == pytest.approx(expected.tolist())


def test_one_sample_or_one_length_is_left_as_it_is_with_a_note():
    [alone] = LengthControlledReward(FieldValue()).score([sample(10, 0.3)])
    assert alone.value == 0.3 and alone.details["slope"] == 0.0
    assert "nothing to remove" in alone.details["fit_note"]
    same = LengthControlledReward(FieldValue()).score([sample(10, 0.3), sample(10, 0.9), sample(10, 0.5)])
    assert [s.value for s in same] == [0.3, 0.9, 0.5]
    assert all(s.details["feature"] == 0.0 for s in same)


def test_too_few_samples_with_different_lengths_have_no_value():
    pair = [sample(10, 0.3), sample(40, 0.9)]
    scores = LengthControlledReward(FieldValue()).score(pair)
    assert [s.status for s in scores] == [Status.NOT_APPLICABLE] * 2
    assert [s.value for s in scores] == [None, None]
    assert "needs at least 3 (min_fit_samples)" in scores[0].reason
    # Why: a line through two points removes all of their signal.
    two = LengthControlledReward(FieldValue(), min_fit_samples=2).score(pair)
    assert [s.value for s in two] == pytest.approx([0.6, 0.6])


def test_failed_scores_pass_through_and_are_left_out_of_the_fit():
    batch = [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch.insert(2, sample(33, "timeout"))
    scores = LengthControlledReward(FieldValue()).score(batch)
    assert scores[2].status is Status.TIMEOUT and scores[2].reason == "scripted said timeout"
    kept = [s.value for i, s in enumerate(scores) if i != 2]
    assert kept == pytest.approx(controlled(tanh_std(LENGTHS), VALUES)[0].tolist())


def test_a_length_that_cannot_be_measured_is_invalid_input():
    batch = [
        Sample(completion="t", fields={"r": 0.5, "completion_ids": [1, 2]}),
        Sample(completion="t", fields={"r": 0.5}),
    ]
    with_ids, without = LengthControlledReward(FieldValue(), unit="tokens").score(batch)
    assert with_ids.ok
    assert without.status is Status.INVALID_INPUT and "completion_ids" in without.reason
    assert without.details == {"raw_value": 0.5}


def test_breakdown_and_details_keep_the_wrapped_reward():
    scores = LengthControlledReward(FieldValue(name="judge")).score(
        [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    )
    first = scores[0]
    slope = controlled(tanh_std(LENGTHS), VALUES)[1]
    assert first.breakdown == pytest.approx({"judge": 0.1, "judge/half": 0.05, "length_slope": slope})
    assert first.details["raw_value"] == 0.1 and first.details["reward_details"] == {"seen": True}
    assert (
        first.details["fit"] == "group" and first.details["unit"] == "chars" and first.details["length"] == 12
    )


def test_calibration_fit_matches_numpy_and_round_trips(tmp_path):
    batch = [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    calibration = LengthCalibration.fit(batch, FieldValue().score(batch))
    features = tanh_std(LENGTHS)
    slope, intercept = np.polyfit(features, VALUES, 1)
    assert (calibration.slope, calibration.intercept) == (pytest.approx(slope), pytest.approx(intercept))
    assert calibration.feature_mean == pytest.approx(features.mean())
    assert (calibration.length_mean, calibration.length_std) == (
        pytest.approx(np.mean(LENGTHS)),
        pytest.approx(np.std(LENGTHS, ddof=1)),
    )
    assert calibration.count == 5 and calibration.unit == "chars"
    path = tmp_path / "calibration.json"
    calibration.write(path)
    assert LengthCalibration.read(path) == calibration


def test_calibration_from_a_scored_jsonl_file_adjusts_each_sample_alone(tmp_path):
    rows = [
        {"id": str(i), "completion": "x" * n, "value": r, "status": "ok"}
        for i, (n, r) in enumerate(zip(LENGTHS, VALUES, strict=True))
    ]
    rows.append({"id": "late", "completion": "x" * 500, "value": None, "status": "timeout"})
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(row) + "\n" for row in rows))
    calibration = fit_length_calibration(scored)
    assert calibration.count == 5
    path = tmp_path / "calibration.json"
    calibration.write(path)

    config = tmp_path / "reward.yaml"
    config.write_text(
        f"type: length_controlled\nfit: calibration\ncalibration: {path}\n"
        "reward: {type: field_value_for_length_control_tests}\n"
    )
    reward = build(config)
    new = [sample(50, 0.6, "a"), sample(8, 0.2, "b")]
    scores = reward.score(new)
    slope, _ = np.polyfit(tanh_std(LENGTHS), VALUES, 1)
    mean, std = np.mean(LENGTHS), np.std(LENGTHS, ddof=1)
    features = np.tanh((np.array([50, 8]) - mean) / std)
    expected = np.array([0.6, 0.2]) - slope * (features - tanh_std(LENGTHS).mean())
    assert [s.value for s in scores] == pytest.approx(expected.tolist())
    assert scores[0].details["fit"] == "calibration" and scores[0].details["fit_size"] == 5
    [alone] = reward.score([sample(50, 0.6)])  # a sample's value does not depend on its batch
    assert alone.value == pytest.approx(scores[0].value)


def test_calibration_from_python_and_its_errors(tmp_path):
    calibration = fit_length_calibration(
        [{"completion": "w " * n, "value": r} for n, r in zip(LENGTHS, VALUES, strict=True)], unit="words"
    )
    reward = LengthControlledReward(FieldValue(), fit="calibration", calibration=calibration, unit="words")
    assert reward.calibration is calibration
    with pytest.raises(
        ConfigError,
        match=r"^LengthControlledReward\.unit: is 'chars' but the calibration was fit with unit: words",
    ):
        LengthControlledReward(FieldValue(), fit="calibration", calibration=calibration)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**calibration.to_dict(), "slope": "steep"}))
    with pytest.raises(
        ConfigError,
        match=r"^LengthControlledReward\.calibration: .*broken\.json: 'slope' should be a finite number",
    ):
        LengthControlledReward(FieldValue(), fit="calibration", calibration=broken, unit="words")
    with pytest.raises(ValueError, match="all 3 scored completions have length 4: no slope to fit"):
        fit_length_calibration([{"completion": "abcd", "value": v} for v in (0.1, 0.2, 0.3)])
    with pytest.raises(ValueError, match="at least 3 scored samples, got 2"):
        fit_length_calibration([{"completion": "a", "value": 0.1}, {"completion": "abc", "value": 0.2}])
    with pytest.raises(ValueError, match=r"row 1: should be a record with a 'completion'"):
        fit_length_calibration([{"completion": "a", "value": 0.1}, {"value": 0.2}])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fit": "prompt"}, r"fit: Input should be 'group', 'batch' or 'calibration'"),
        ({"fit": "calibration"}, r"calibration: fit: calibration needs a calibration file"),
        ({"calibration": "c.json"}, r"calibration: is read only with fit: calibration"),
        ({"fit": "calibration", "calibration": "/no/such/file.json"}, r"calibration: cannot read"),
        ({"fit": "batch", "group_field": "item"}, r"group_field: is read only with fit: group"),
        ({"min_fit_samples": 1}, r"min_fit_samples: Input should be greater than or equal to 2"),
        ({"feature": "linear"}, r"feature: Input should be 'tanh_std' or 'log'"),
        ({"unit": "words", "tokenizer": object()}, r"tokenizer: should have an encode"),
    ],
)
def test_options_errors_name_the_field(options, message):
    with pytest.raises(ConfigError, match=rf"^LengthControlledReward\.{message}"):
        LengthControlledReward({"type": "string_match"}, **options)


def test_errors_in_a_nested_config_name_its_path():
    with pytest.raises(ConfigError, match=r"^components\.lc\.reward: should be a reward config"):
        build({"type": "combine", "components": {"lc": {"type": "length_controlled", "reward": 3}}})
    with pytest.raises(ConfigError, match=r"^components\.lc\.reward\.mode: Input should be"):
        build(
            {
                "type": "combine",
                "components": {
                    "lc": {"type": "length_controlled", "reward": {"type": "length", "mode": "x"}}
                },
            }
        )


def test_builds_from_yaml_wrapping_an_ensemble(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_text(
        "type: length_controlled\n"
        "fit: batch\n"
        "feature: log\n"
        "reward:\n"
        "  type: ensemble\n"
        "  combine: mean\n"
        "  members:\n"
        "    a: {type: field_value_for_length_control_tests, key: r}\n"
        "    b: {type: field_value_for_length_control_tests, key: s}\n"
    )
    reward = build(path)
    assert isinstance(reward, LengthControlledReward) and reward.reward.name == "ensemble"
    lengths, r, s = [4, 9, 20, 2], [0.2, 0.6, 0.9, 0.1], [0.4, 0.2, 0.7, 0.3]
    batch = [
        Sample(completion="x" * n, fields={"r": a, "s": b}) for n, a, b in zip(lengths, r, s, strict=True)
    ]
    scores = reward.score(batch)
    expected, _ = controlled(np.log1p(lengths), (np.array(r) + np.array(s)) / 2)
    assert [x.value for x in scores] == pytest.approx(expected.tolist())


def test_pickles_and_scores_the_same_after():
    reward = build({"type": "length_controlled", "reward": {"type": "field_value_for_length_control_tests"}})
    copy = pickle.loads(pickle.dumps(reward))
    batch = [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    assert [s.value for s in copy.score(batch)] == [s.value for s in reward.score(batch)]


def test_io_bound_and_gpu_use_come_from_the_wrapped_reward():
    inner = FieldValue()
    inner.io_bound, inner.uses_gpu = True, True
    reward = LengthControlledReward(inner)
    assert reward.io_bound and reward.uses_gpu
    assert not LengthControlledReward(FieldValue()).io_bound


def test_the_docstring_examples_run():
    assert doctest.testmod(rewardlab.rewards.length_controlled, optionflags=doctest.ELLIPSIS).failed == 0
