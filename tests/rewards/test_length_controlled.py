"""`LengthControlledReward`: the adjustment against numpy's least squares, over groups, batches
and a calibration file, for the default (leave-one-out slope clamped at 0, unclipped z-score,
subtracting only above the peers' mean) and AlpacaEval's pooled two-sided fit; property tests
over random groups, batches and paddings: padding never raises a sample's value, no value
exceeds the wrapped one, a wrapped reward paying length linearly or logarithmically is not paid
for padding at or above the peers' mean, an empty answer never outranks a right one around a
verifier (with red-team 22's and 22b's constructions); degenerate sets and failures; options
errors, configs and pickling.

The wrapped reward is scripted (its value is a sample field), and every expected value is
computed with numpy from the completions' lengths (``np.polyfit`` for the slope,
``np.std(ddof=1)`` for AlpacaEval's standardisation) or by hand."""

import doctest
import json
import pickle
import random
from dataclasses import replace

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


def clipped_std(lengths, mean, std):
    z = (np.asarray(lengths, dtype=float) - mean) / std
    return np.clip(z, -3, 3)


def loo_controlled(lengths, values, feature="std", direction="longer_only"):
    """The default adjustment, computed with numpy: for each sample, the slope of a fit over the
    other samples (whose lengths standardise the z-score features); for ``longer_only`` the slope
    clamped at 0 and charged only on the feature above the others' mean, for ``both`` the sample
    moved to the mean feature of the whole set in those coordinates."""
    lengths, values = np.asarray(lengths, dtype=float), np.asarray(values, dtype=float)
    out, slopes = [], []
    for i in range(len(lengths)):
        others = np.delete(np.arange(len(lengths)), i)
        mean, std = lengths[others].mean(), lengths[others].std(ddof=1)
        if feature == "log":
            features = np.log1p(lengths)
        elif std == 0:
            features = np.zeros(len(lengths))
        elif feature == "tanh_std":
            features = np.tanh((lengths - mean) / std)
        elif feature == "std":
            features = (lengths - mean) / std
        else:
            features = clipped_std(lengths, mean, std)
        xo = features[others]
        slope = np.polyfit(xo, values[others], 1)[0] if np.ptp(xo) > 0 else 0.0
        if direction == "longer_only":
            slope = max(slope, 0.0)
            out.append(values[i] - slope * max(0.0, features[i] - xo.mean()))
        else:
            out.append(values[i] - slope * (features[i] - features.mean()))
        slopes.append(slope)
    return np.array(out), np.array(slopes)


LENGTHS = [12, 40, 25, 90, 60]
VALUES = [0.1, 0.7, 0.2, 0.9, 0.4]
OTHER_LENGTHS = [5, 7, 30, 11]
OTHER_VALUES = [0.9, 0.3, 0.5, 0.8]


def test_group_fit_matches_numpy_leave_one_out_in_each_group():
    batch = [sample(n, r, "g1") for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch += [sample(n, r, "g2") for n, r in zip(OTHER_LENGTHS, OTHER_VALUES, strict=True)]
    scores = LengthControlledReward(FieldValue()).score(batch)
    first, slopes1 = loo_controlled(LENGTHS, VALUES)
    second, slopes2 = loo_controlled(OTHER_LENGTHS, OTHER_VALUES)
    assert [s.value for s in scores] == pytest.approx([*first, *second])
    assert [s.details["slope"] for s in scores] == pytest.approx([*slopes1, *slopes2])
    assert [s.details["fit_size"] for s in scores] == [4] * 5 + [3] * 4
    assert {s.details["slope_fit"] for s in scores} == {"leave_one_out"}
    assert {s.details["direction"] for s in scores} == {"longer_only"}
    # Where a left-out fit's slope is negative, it is clamped to 0 and the value stays as it is.
    _, fitted = loo_controlled(LENGTHS + OTHER_LENGTHS, VALUES + OTHER_VALUES, direction="both")
    _, fitted1 = loo_controlled(LENGTHS, VALUES, direction="both")
    _, fitted2 = loo_controlled(OTHER_LENGTHS, OTHER_VALUES, direction="both")
    fitted = [*fitted1, *fitted2]
    assert [s.details["fitted_slope"] for s in scores] == pytest.approx(fitted)
    assert [s.details["slope_clamped"] for s in scores] == [f < 0 for f in fitted]
    assert 0 < sum(f < 0 for f in fitted) < len(fitted)  # the data has both cases
    for s in scores:
        if s.details["slope_clamped"]:
            assert s.details["slope"] == 0.0 and s.value == s.details["raw_value"]


def test_exact_values_by_hand():
    # Lengths 10, 20, 30, 60. The longest's peers (10, 20, 30) have mean 20 and std 10: z-scores
    # -1, 0, 1, its own 4; their values 0.1, 0.3, 0.8 (mean 0.4) give the slope
    # (-1 * -0.3 + 1 * 0.4) / 2 = 0.35, so it is charged 0.35 * (4 - 0) = 1.4. The others lie at
    # or below their peers' mean length (20 < 33.3, 30 = 30, 10 < 36.7): their values stay.
    batch = [sample(10, 0.1), sample(20, 0.3), sample(30, 0.8), sample(60, 1.0)]
    scores = LengthControlledReward(FieldValue()).score(batch)
    assert [s.value for s in scores] == pytest.approx([0.1, 0.3, 0.8, 1.0 - 1.4])
    assert scores[3].details["slope"] == pytest.approx(0.35)
    assert scores[3].details["feature"] == pytest.approx(4.0)
    assert scores[3].details["feature_mean"] == pytest.approx(0.0, abs=1e-12)
    assert scores[2].details["feature"] == pytest.approx(0.0, abs=1e-12)
    # Padding it by another 10 characters costs 0.35 * 1 more.
    longer = LengthControlledReward(FieldValue()).score([*batch[:3], sample(70, 1.0)])
    assert longer[3].value == pytest.approx(1.0 - 0.35 * 5)

    # Lengths 10, 10, 40: each short sample's peers are one 10 and the 40 (z -1/sqrt(2) and
    # +1/sqrt(2)); it lies below their mean and keeps its value. Two-sided (AlpacaEval), it was
    # paid for being short: slope (r_long - r_other_short) / sqrt(2) times the distance
    # 2 / (3 sqrt(2)) to the set's mean feature, i.e. (r_long - r_other_short) / 3.
    three = [sample(10, 0.2), sample(10, 0.5), sample(40, 1.1)]
    scores = LengthControlledReward(FieldValue()).score(three)
    assert [s.value for s in scores] == [0.2, 0.5, 1.1]
    assert scores[0].details["slope"] == pytest.approx(0.6 / np.sqrt(2))
    assert scores[0].details["feature"] == pytest.approx(-1 / np.sqrt(2))
    assert (
        scores[2].details["slope"] == 0.0
        and "have one length: no slope to fit" in scores[2].details["fit_note"]
    )
    both = LengthControlledReward(FieldValue(), direction="both").score(three)
    assert [s.value for s in both] == pytest.approx([0.2 + 0.6 / 3, 0.5 + 0.9 / 3, 1.1])
    assert both[0].details["feature_mean"] == pytest.approx(-1 / (3 * np.sqrt(2)))

    # Here the long answer is the wrong one: the slopes are negative. By default they are
    # clamped (the values stay); removed in both directions, they would pay the short ones for
    # being short and, the other way round, length for length.
    wrong_long = [sample(10, 0.9), sample(10, 0.5), sample(40, 0.0)]
    default = LengthControlledReward(FieldValue()).score(wrong_long)
    assert [s.value for s in default] == [0.9, 0.5, 0.0]
    assert [s.details["slope_clamped"] for s in default] == [True, True, False]
    assert default[0].details["fitted_slope"] == pytest.approx(-0.5 / np.sqrt(2))
    both = LengthControlledReward(FieldValue(), direction="both").score(wrong_long)
    assert [s.value for s in both] == pytest.approx([0.9 - 0.5 / 3, 0.5 - 0.9 / 3, 0.0])


def test_pooled_two_sided_tanh_fit_is_alpacaevals_regression_in_each_group():
    batch = [sample(n, r, "g1") for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch += [sample(n, r, "g2") for n, r in zip(OTHER_LENGTHS, OTHER_VALUES, strict=True)]
    scores = LengthControlledReward(
        FieldValue(), slope_fit="pooled", direction="both", feature="tanh_std"
    ).score(batch)
    first, slope1 = controlled(tanh_std(LENGTHS), VALUES)
    second, slope2 = controlled(tanh_std(OTHER_LENGTHS), OTHER_VALUES)
    assert [s.value for s in scores] == pytest.approx([*first, *second])
    assert scores[0].details["slope"] == pytest.approx(slope1)
    assert scores[-1].details["slope"] == pytest.approx(slope2)
    assert scores[0].details["feature"] == pytest.approx(tanh_std(LENGTHS)[0])
    assert scores[0].details["fit_size"] == 5 and scores[-1].details["fit_size"] == 4
    assert slope2 < 0 and not scores[-1].details["slope_clamped"]  # both signs are removed
    # The mean reward of each group is kept; only what length predicts moves.
    assert np.mean([s.value for s in scores[:5]]) == pytest.approx(np.mean(VALUES))


def test_batch_fit_fits_over_every_group():
    batch = [sample(n, r, "g1") for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch += [sample(n, r, "g2") for n, r in zip(OTHER_LENGTHS, OTHER_VALUES, strict=True)]
    scores = LengthControlledReward(FieldValue(), fit="batch").score(batch)
    expected, _ = loo_controlled(LENGTHS + OTHER_LENGTHS, VALUES + OTHER_VALUES)
    assert [s.value for s in scores] == pytest.approx(expected.tolist())
    assert {s.details["fit_size"] for s in scores} == {len(batch) - 1}
    pooled = LengthControlledReward(FieldValue(), fit="batch", slope_fit="pooled", direction="both")
    all_lengths = np.array(LENGTHS + OTHER_LENGTHS, dtype=float)
    features = (all_lengths - all_lengths.mean()) / all_lengths.std(ddof=1)
    expected, slope = controlled(features, VALUES + OTHER_VALUES)
    assert [s.value for s in pooled.score(batch)] == pytest.approx(expected.tolist())
    assert [s.details["slope"] for s in pooled.score(batch)] == pytest.approx([slope] * len(batch))
    grouped = LengthControlledReward(FieldValue(), fit="group").score(batch)
    assert [s.value for s in scores] != pytest.approx([s.value for s in grouped])


def test_groups_default_to_the_prompt_and_group_field_names_another_field():
    batch = [
        Sample(prompt=prompt, completion="x" * n, fields={"r": r, "item": item})
        for prompt, item, n, r in [
            ("p", 1, 10, 0.1),
            ("p", 1, 20, 0.5),
            ("p", 2, 35, 0.2),
            ("q", 2, 50, 0.9),
            ("q", 2, 70, 0.4),
            ("q", 1, 90, 0.8),
        ]
    ]
    by_prompt = LengthControlledReward(FieldValue()).score(batch)
    assert [s.value for s in by_prompt[:3]] == pytest.approx(loo_controlled([10, 20, 35], [0.1, 0.5, 0.2])[0])
    assert [s.value for s in by_prompt[3:]] == pytest.approx(loo_controlled([50, 70, 90], [0.9, 0.4, 0.8])[0])
    by_item = LengthControlledReward(FieldValue(), group_field="item").score(batch)
    item1, item2 = [0, 1, 5], [2, 3, 4]
    assert [by_item[i].value for i in item1] == pytest.approx(
        loo_controlled([10, 20, 90], [0.1, 0.5, 0.8])[0]
    )
    assert [by_item[i].value for i in item2] == pytest.approx(
        loo_controlled([35, 50, 70], [0.2, 0.9, 0.4])[0]
    )


def test_log_and_tanh_features_in_words_and_tokens():
    texts = ["a b", "a b c d e f", "a", "a b c d e f g h i j k"]
    values = [0.3, 0.8, 0.1, 0.6]
    batch = [Sample(completion=t, fields={"r": v}) for t, v in zip(texts, values, strict=True)]
    lengths = [len(t.split()) for t in texts]
    words = LengthControlledReward(FieldValue(), fit="batch", feature="log", unit="words").score(batch)
    assert [s.value for s in words] == pytest.approx(loo_controlled(lengths, values, "log")[0].tolist())
    tanh = LengthControlledReward(FieldValue(), fit="batch", feature="tanh_std", unit="words").score(batch)
    assert [s.value for s in tanh] == pytest.approx(loo_controlled(lengths, values, "tanh_std")[0].tolist())
    ids = [[0] * n for n in (3, 9, 2, 4)]
    tokens = [
        Sample(completion="t", fields={"r": v, "completion_ids": i}) for v, i in zip(values, ids, strict=True)
    ]
    by_tokens = LengthControlledReward(FieldValue(), fit="batch", feature="log", unit="tokens").score(tokens)
    assert [s.value for s in by_tokens] == pytest.approx(
        loo_controlled([3, 9, 2, 4], values, "log")[0].tolist()
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
    # After: each sample's peers fit the same line (slope 0.4 exactly); a sample at or above its
    # peers' mean log-length gets what the reward pays there, 0.4 * that mean; one below keeps its
    # value (shortness earns nothing more).
    assert [s.details["slope"] for s in only_length] == pytest.approx([0.4] * len(lengths))
    logs = np.log1p(lengths)
    peers = [(logs.sum() - x) / (len(logs) - 1) for x in logs]
    expected = [0.4 * min(x, m) for x, m in zip(logs, peers, strict=True)]
    assert [s.value for s in only_length] == pytest.approx(expected)
    assert all(s.value <= s.details["raw_value"] + 1e-12 for s in only_length)

    with_signal = biased.score(batch)
    values = [s.value for s in with_signal]
    right = [v for v, c in zip(values, correct, strict=True) if c]
    wrong = [v for v, c in zip(values, correct, strict=True) if not c]
    assert min(right) > max(wrong)  # every right answer above every wrong one, whatever its length
    # Before control, a long wrong answer beat a short right one.
    raw_values = [s.details["raw_value"] for s in with_signal]
    assert raw_values[5] > raw_values[1]
    expected, _ = loo_controlled(lengths, raw_values, "log")
    assert values == pytest.approx(expected.tolist())


class LinearChars(RuleReward):
    """``weight * characters``, plus 1 when ``fields["correct"]``: a length bias in the default
    feature's own terms (a z-score is linear in length)."""

    name = "linear_chars"

    def __init__(self, weight):
        self.weight = weight

    def check(self, sample):
        return Score(float(sample.fields.get("correct", 0)) + self.weight * len(sample.completion_text))


def test_a_reward_linear_in_length_is_flat_above_the_peers_mean_however_far_one_pads():
    lengths = [120, 300, 450, 610, 800, 950, 1300, 1500]
    reward = LengthControlledReward(LinearChars(0.001))
    scores = reward.score([Sample(prompt="p", completion="y" * n) for n in lengths])
    assert [s.details["raw_value"] for s in scores] == pytest.approx([n / 1000 for n in lengths])
    # At or above its peers' mean length, a sample gets the reward at that mean; below, its own.
    peers = [(sum(lengths) - n) / 7 for n in lengths]
    assert [s.value for s in scores] == pytest.approx(
        [min(n, m) / 1000 for n, m in zip(lengths, peers, strict=True)]
    )
    # Padding the longest by up to 100k characters: the unclipped z-score keeps charging; the
    # saturating features stop (red-team 22b finding 1) and keep most of the pay.
    for feature in ("std", "clipped_std", "tanh_std"):
        control = LengthControlledReward(LinearChars(0.001), feature=feature)
        values = [
            control.score([Sample(prompt="p", completion="y" * n) for n in [*lengths[:-1], 1500 + extra]])[
                -1
            ].value
            for extra in (0, 1_000, 10_000, 100_000)
        ]
        if feature == "std":
            assert values == pytest.approx([peers[-1] / 1000] * 4)
        else:
            assert values[-1] > values[0] + 90  # 100 of pay, nearly all kept
    # A real signal keeps its order, and the length bias is gone from it.
    correct = [1, 0, 0, 1, 0, 1, 0, 0]
    graded = reward.score(
        [
            Sample(prompt="p", completion="y" * n, fields={"correct": c})
            for n, c in zip(lengths, correct, strict=True)
        ]
    )
    right = [s.value for s, c in zip(graded, correct, strict=True) if c]
    wrong = [s.value for s, c in zip(graded, correct, strict=True) if not c]
    assert min(right) > max(wrong)
    assert graded[0].details["raw_value"] < graded[6].details["raw_value"]  # before: long wrong > short right
    assert all(s.value <= s.details["raw_value"] + 1e-12 for s in graded)


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
    two = LengthControlledReward(FieldValue(), min_fit_samples=2, slope_fit="pooled", direction="both").score(
        pair
    )
    assert [s.value for s in two] == pytest.approx([0.6, 0.6])


# Padding never pays. For any wrapped value, a longer completion of a sample never gets a higher
# adjusted value, whatever its batch mates: random sets, values and paddings, every feature and
# fit, and the red-team's constructions. (Tolerance 1e-12: float rounding of equal values.)

FEATURES = ["std", "clipped_std", "tanh_std", "log"]


def padded(batch, index, extra):
    changed = list(batch)
    changed[index] = replace(batch[index], completion=batch[index].completion + "." * extra)
    return changed


def random_set(rng, size, group="g"):
    lengths = [rng.choice([rng.randint(1, 60), rng.randint(20, 3000)]) for _ in range(size)]
    values = [rng.choice([0.0, 1.0]) if rng.random() < 0.5 else rng.uniform(-1, 1) for _ in range(size)]
    return [sample(n, r, group) for n, r in zip(lengths, values, strict=True)]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("fit", ["group", "batch"])
def test_padding_never_raises_a_samples_value_over_random_sets(feature, fit):
    rng = random.Random(f"{feature}-{fit}")
    reward = LengthControlledReward(FieldValue(), feature=feature, fit=fit)
    checked = 0
    for _ in range(60):
        batch = [
            s
            for g in range(rng.choice([1, 2, 3]))
            for s in random_set(rng, rng.choice([3, 4, 5, 8, 16]), f"g{g}")
        ]
        index = rng.randrange(len(batch))
        before = reward.score(batch)[index].value
        for extra in sorted(rng.sample([1, 2, 5, 17, 60, 250, 1000, 4000, 20000], 4)):
            after = reward.score(padded(batch, index, extra))[index].value
            assert after <= before + 1e-12, (feature, fit, [len(s.completion) for s in batch], index, extra)
            before, checked = after, checked + 1
    assert checked == 240


def test_the_pooled_two_sided_fit_fails_that_property():
    # The same check would catch the pre-fix behaviour: AlpacaEval's pooled fit, both signs.
    rng = random.Random(0)
    reward = LengthControlledReward(FieldValue(), slope_fit="pooled", direction="both", feature="tanh_std")
    raised = 0
    for _ in range(60):
        batch = random_set(rng, 8)
        index = rng.randrange(8)
        before = reward.score(batch)[index].value
        raised += reward.score(padded(batch, index, 20000))[index].value > before + 1e-12
    assert raised > 10


def test_padding_never_pays_under_a_calibration():
    reference = random_set(random.Random(1), 20)
    for direction in ("longer_only", "both"):
        calibration = LengthCalibration.fit(reference, FieldValue().score(reference))
        if calibration.slope < 0:
            continue
        reward = LengthControlledReward(
            FieldValue(), fit="calibration", calibration=calibration, direction=direction
        )
        batch = random_set(random.Random(2), 6)
        for index in range(6):
            before = reward.score(batch)[index].value
            assert reward.score(padded(batch, index, 5000))[index].value <= before + 1e-12


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize(
    ("fit", "slope_fit"), [("group", "leave_one_out"), ("batch", "leave_one_out"), ("group", "pooled")]
)
def test_no_value_exceeds_the_wrapped_one_by_default(feature, fit, slope_fit):
    rng = random.Random(f"cap-{feature}-{fit}-{slope_fit}")
    reward = LengthControlledReward(FieldValue(), feature=feature, fit=fit, slope_fit=slope_fit)
    charged = 0
    for _ in range(60):
        batch = [
            s for g in range(rng.choice([1, 2])) for s in random_set(rng, rng.choice([3, 5, 8]), f"g{g}")
        ]
        for s in reward.score(batch):
            assert s.value <= s.details["raw_value"] + 1e-12
            charged += s.value < s.details["raw_value"] - 1e-9
    assert charged > 20  # the correction does subtract somewhere
    # Two-sided, shortness is paid: some values rise above the wrapped ones.
    both = LengthControlledReward(
        FieldValue(), feature=feature, fit=fit, slope_fit=slope_fit, direction="both"
    )
    batch = random_set(random.Random(3), 8)
    assert any(s.value > s.details["raw_value"] + 1e-9 for s in both.score(random_set(rng, 8) + batch))


class PaysLength(RuleReward):
    """A grader that pays length: ``0.001 * chars`` or ``0.3 * log(1 + chars)``."""

    name = "pays_length"

    def __init__(self, shape):
        self.shape = shape

    def check(self, sample):
        n = len(sample.completion_text)
        return Score(0.001 * n if self.shape == "linear" else 0.3 * np.log1p(n))


@pytest.mark.parametrize(("shape", "feature"), [("linear", "std"), ("log", "std"), ("log", "log")])
def test_padding_does_not_pay_a_length_paying_reward_at_or_above_the_peers_mean(shape, feature):
    # Red-team 22b finding 1: the grader keeps paying as one pads. Its peers lie on its curve, so
    # the slope fitted on them is its own (exactly for a reward linear in the feature; for a log
    # paid through the z-score, a line through a concave curve, which over-charges far out).
    rng = random.Random(f"{shape}-{feature}")
    reward = LengthControlledReward(PaysLength(shape), feature=feature)
    steps = 0
    for _ in range(80):
        batch = [
            Sample(prompt="p", completion="x" * rng.randint(20, 3000))
            for _ in range(rng.choice([3, 4, 8, 16]))
        ]
        index = rng.randrange(len(batch))
        first = reward.score(batch)[index]
        if first.details["feature"] < first.details["feature_mean"]:
            continue  # below its peers' mean the grader's pay is left (shortness earns nothing more)
        before = first.value
        for extra in (1, 10, 100, 1_000, 10_000, 100_000):
            after = reward.score(padded(batch, index, extra))[index].value
            assert after <= before + 1e-9, ([len(s.completion) for s in batch], index, extra)
            before, steps = after, steps + 1
    assert steps > 150


def verifier_group(rng, size=8):
    """A group where right answers (1.0) are longer than wrong ones (0.0), as on hard MATH
    questions (red-team 22b finding 2), with at least one of each."""
    right = rng.randint(1, size - 1)
    values = [1.0] * right + [0.0] * (size - right)
    lengths = [rng.randint(600, 1500) if v else rng.randint(200, 900) for v in values]
    return lengths, values


def test_an_empty_answer_never_outranks_a_right_one_around_a_verifier():
    # Red-team 22b finding 2: right answers longer than wrong ones make the slope positive, and
    # two-sided control paid a short or empty answer above the right ones. Now an empty answer
    # gets exactly the verifier's 0, and a right answer is charged only for lying above its
    # peers' mean length, at most 0.540 per peer std (the bound below): it stays above the
    # empty answer unless it lies 1.85 peer std or more above that mean, where it is charged as
    # padding is (length control cannot tell a long right answer from a padded one).
    rng = random.Random(22)
    reward = LengthControlledReward(FieldValue())
    both = LengthControlledReward(FieldValue(), direction="both")
    cases = paid_before = outranked = 0
    for _ in range(150):
        lengths, values = verifier_group(rng)
        for wrong in [i for i, v in enumerate(values) if v == 0.0]:
            batch = [sample(n, r) for n, r in zip(lengths, values, strict=True)]
            batch[wrong] = sample(0, 0.0)  # the policy gives up: an empty completion
            scores = reward.score(batch)
            assert scores[wrong].value == 0.0  # exactly what the verifier gives it
            for s, v in zip(scores, values, strict=True):
                if v == 1.0 and s.value <= 0.0:
                    assert s.details["feature"] - s.details["feature_mean"] >= 2 * np.sqrt(6 / 7)
                    outranked += 1
            cases += 1
            paid_before += both.score(batch)[wrong].value > 0.0
    assert cases > 300
    assert outranked < cases / 50  # right answers that far out are rare here
    assert paid_before > cases / 2  # two-sided, the empty answer was paid for being short


def test_a_verifiers_slope_is_bounded_so_a_right_answer_near_its_peers_length_stays_on_top():
    # With values in [0, 1] and k peers, slope <= sqrt(k / (k - 1)) / 2 (0.540 for k = 7): a right
    # answer less than 2 * sqrt((k - 1) / k) = 1.852 peer std above their mean keeps a value > 0.
    rng = random.Random(7)
    reward = LengthControlledReward(FieldValue())
    bound = np.sqrt(7 / 6) / 2
    steepest = 0.0
    for _ in range(300):
        lengths = [rng.randint(1, 3000) for _ in range(8)]
        values = [rng.choice([0.0, 1.0]) for _ in range(8)]
        scores = reward.score([sample(n, r) for n, r in zip(lengths, values, strict=True)])
        for s, v in zip(scores, values, strict=True):
            steepest = max(steepest, s.details["slope"])
            assert s.details["slope"] <= bound + 1e-12
            if v == 1.0 and s.details["feature"] < 2 * np.sqrt(6 / 7):
                assert s.value > 0.0
    assert steepest > 0.8 * bound  # the bound is nearly reached
    # By hand: peers 4 x (100 chars, 0) and 3 x (200 chars, 1) are perfectly correlated, so the
    # slope is sqrt(sum (r - mean r)^2 / sum z^2) = sqrt((12 / 7) / 6) = sqrt(2 / 7) = 0.535. A
    # right answer of 400 characters, 4.8 peer std out, is charged below a wrong answer's 0.
    peers = [100] * 4 + [200] * 3
    [*_, far] = reward.score([*(sample(n, float(n == 200)) for n in peers), sample(400, 1.0)])
    z = (400 - np.mean(peers)) / np.std(peers, ddof=1)
    assert far.details["slope"] == pytest.approx(np.sqrt(2 / 7))
    assert far.value == pytest.approx(1.0 - np.sqrt(2 / 7) * z) and far.value < 0


def red_team_group(right, padding):
    """Red-team 22's construction (finding 1), in small: a group of 8 rollouts, ``right`` of them
    right (1.0) and the rest wrong (0.0), right ones a little shorter; one right rollout replaced
    by a wrong one-line answer, after ``padding`` characters of filler."""
    lengths = [420, 510, 380, 640, 700, 880, 930, 760]
    values = [1.0] * right + [0.0] * (8 - right)
    batch = [sample(n, r) for n, r in zip(lengths, values, strict=True)]
    batch[0] = sample(28 + padding, 0.0)
    return batch


@pytest.mark.parametrize("right", [3, 4, 5, 6, 7])
def test_a_padded_wrong_answer_gets_no_more_than_a_short_one(right):
    reward = LengthControlledReward(FieldValue())
    short = reward.score(red_team_group(right, 0))
    for padding in (2_000, 20_000, 200_000):
        long = reward.score(red_team_group(right, padding))
        assert long[0].value <= short[0].value + 1e-12
        assert long[0].value < min(s.value for s in long[1:right])  # below every right answer
        # Here its GRPO advantage (value less the others' mean) does not rise either (not a
        # guarantee in general: padding moves the batch mates' slopes a little; see the docs).
        advantage = long[0].value - np.mean([s.value for s in long[1:]])
        assert advantage <= short[0].value - np.mean([s.value for s in short[1:]]) + 1e-12
        assert advantage < 0
    # Before the fix (pooled, both signs, tanh): padded, the wrong answer got about the group mean.
    old = LengthControlledReward(FieldValue(), slope_fit="pooled", direction="both", feature="tanh_std")
    was_short, was_long = old.score(red_team_group(right, 0)), old.score(red_team_group(right, 20_000))
    assert was_long[0].value > was_short[0].value + 0.1


def test_a_negative_batch_slope_is_not_paid_out():
    # Finding 1b: across prompts wrong answers are longer, so the batch's slope is negative; with
    # both signs removed, padding any answer paid. By default the slope is clamped.
    lengths = [300, 420, 350, 500, 1500, 1800, 1650, 2100]
    values = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    batch = [sample(n, r, f"q{i % 4}") for i, (n, r) in enumerate(zip(lengths, values, strict=True))]
    reward = LengthControlledReward(FieldValue(), fit="batch")
    honest = reward.score(batch)
    assert all(s.details["fitted_slope"] < 0 and s.details["slope"] == 0.0 for s in honest)
    assert [s.value for s in honest] == values
    both = LengthControlledReward(FieldValue(), fit="batch", direction="both")
    for index in range(8):
        assert reward.score(padded(batch, index, 3000))[index].value == values[index]
        assert both.score(padded(batch, index, 3000))[index].value > both.score(batch)[index].value


def test_failed_scores_pass_through_and_are_left_out_of_the_fit():
    batch = [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    batch.insert(2, sample(33, "timeout"))
    scores = LengthControlledReward(FieldValue()).score(batch)
    assert scores[2].status is Status.TIMEOUT and scores[2].reason == "scripted said timeout"
    kept = [s.value for i, s in enumerate(scores) if i != 2]
    assert kept == pytest.approx(loo_controlled(LENGTHS, VALUES)[0].tolist())


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
    slope = loo_controlled(LENGTHS, VALUES)[1][0]
    assert first.breakdown == pytest.approx({"judge": 0.1, "judge/half": 0.05, "length_slope": slope})
    assert first.details["raw_value"] == 0.1 and first.details["reward_details"] == {"seen": True}
    assert (
        first.details["fit"] == "group" and first.details["unit"] == "chars" and first.details["length"] == 12
    )


def test_calibration_fit_matches_numpy_and_round_trips(tmp_path):
    batch = [sample(n, r) for n, r in zip(LENGTHS, VALUES, strict=True)]
    calibration = LengthCalibration.fit(batch, FieldValue().score(batch), feature="tanh_std")
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
    calibration = fit_length_calibration(scored, feature="tanh_std")
    assert calibration.count == 5
    path = tmp_path / "calibration.json"
    calibration.write(path)

    config = tmp_path / "reward.yaml"
    config.write_text(
        f"type: length_controlled\nfit: calibration\ncalibration: {path}\nfeature: tanh_std\n"
        "reward: {type: field_value_for_length_control_tests}\n"
    )
    reward = build(config)
    new = [sample(50, 0.6, "a"), sample(8, 0.2, "b")]
    scores = reward.score(new)
    slope, _ = np.polyfit(tanh_std(LENGTHS), VALUES, 1)
    mean, std = np.mean(LENGTHS), np.std(LENGTHS, ddof=1)
    features = np.tanh((np.array([50, 8]) - mean) / std)
    assert slope > 0
    # Charged only above the reference's mean feature: the short one keeps its value.
    expected = np.array([0.6, 0.2]) - slope * np.maximum(0, features - tanh_std(LENGTHS).mean())
    assert [s.value for s in scores] == pytest.approx(expected.tolist())
    assert scores[0].value < 0.6 and scores[1].value == 0.2
    assert scores[0].details["fit"] == "calibration" and scores[0].details["fit_size"] == 5
    [alone] = reward.score([sample(50, 0.6)])  # a sample's value does not depend on its batch
    assert alone.value == pytest.approx(scores[0].value)


def test_a_negative_calibration_slope_is_clamped_unless_both_directions():
    # Longer answers scored lower on the reference data: the slope is negative.
    rows = [
        {"completion": "x" * n, "value": v} for n, v in zip(LENGTHS, [0.9, 0.5, 0.7, 0.1, 0.3], strict=True)
    ]
    calibration = fit_length_calibration(rows)
    assert calibration.slope < 0
    new = [sample(200, 0.4), sample(10, 0.4)]
    clamped = LengthControlledReward(FieldValue(), fit="calibration", calibration=calibration).score(new)
    assert [s.value for s in clamped] == [0.4, 0.4]
    assert clamped[0].details["slope_clamped"] and clamped[0].details["fitted_slope"] == calibration.slope
    assert clamped[0].details["slope_fit"] == "calibration"
    both = LengthControlledReward(FieldValue(), fit="calibration", calibration=calibration, direction="both")
    mean, std = np.mean(LENGTHS), np.std(LENGTHS, ddof=1)
    features = (np.array([200, 10]) - mean) / std
    reference = 0.0  # the mean z-score of the reference lengths
    expected = 0.4 - calibration.slope * (features - reference)
    assert [s.value for s in both.score(new)] == pytest.approx(expected.tolist())
    assert both.score(new)[0].value > 0.4  # the long one paid for its length: why it is not the default


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
    with pytest.raises(
        ConfigError, match=r"^LengthControlledReward\.slope_fit: has no meaning with fit: calibration"
    ):
        LengthControlledReward(
            FieldValue(), fit="calibration", calibration=calibration, unit="words", slope_fit="pooled"
        )
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
        ({"feature": "linear"}, r"feature: Input should be 'std', 'clipped_std', 'tanh_std' or 'log'"),
        ({"direction": "shorter"}, r"direction: Input should be 'longer_only' or 'both'"),
        ({"min_fit_samples": 2}, r"min_fit_samples: is 2, but slope_fit: leave_one_out fits each slope"),
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
    expected, _ = loo_controlled(lengths, (np.array(r) + np.array(s)) / 2, "log")
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
