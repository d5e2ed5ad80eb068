"""`EnsembleReward`: every combination against numpy, the normalisations, the failure policy,
members read from one reward's heads, options errors that name the field, configs and pickling.

The members are scripted: each reads its value from a sample field, so that every expected value
below is computed from the same numbers with numpy, not by the code under test."""

import doctest
import pickle
import re

import numpy as np
import pytest

import rewardlab.rewards.ensemble
from rewardlab import ConfigError, Reward, RuleReward, Sample, Score, Status, Usage, build, register
from rewardlab.rewards.ensemble import EnsembleReward


@register("field_value_for_ensemble_tests")
class FieldValue(RuleReward):
    """The value in ``fields[key]``; a string there is a status to fail with, a mapping the heads
    of a multi-head reward (the value is their sum)."""

    def __init__(self, key: str = "a", name: str | None = None):
        self.key = key
        self.name = name or key

    def check(self, sample):
        value = sample.fields[self.key]
        if isinstance(value, str):
            return Score.failure(value, f"{self.key} said {value}")
        if isinstance(value, dict):
            return Score(sum(value.values()), breakdown=value)
        return Score(value, breakdown={"double": 2 * value}, details={"seen": self.key})


class Raises(Reward):
    async def ascore(self, samples):
        raise RuntimeError("broken member")


class Billed(FieldValue):
    """A member that reports the usage of a model call."""

    io_bound = True

    def check(self, sample):
        score = super().check(sample)
        score.usage = Usage(prompt_tokens=10, completion_tokens=2, calls=1)
        return score


def members(*keys):
    return {key: FieldValue(key) for key in keys}


def samples(**columns):
    """One sample per position of the columns: ``samples(a=[1, 2], b=[3, 4])``."""
    rows = zip(*columns.values(), strict=True)
    return [Sample(completion="c", fields=dict(zip(columns, row, strict=True))) for row in rows]


A, B, C = [0.2, 0.9, -1.0, 0.5], [0.4, 0.1, -0.5, 0.5], [1.0, 0.3, 0.0, 0.5]


def test_mean_minus_std_is_the_mean_less_k_population_standard_deviations():
    reward = EnsembleReward(members("a", "b", "c"), k=0.7)
    scores = reward.score(samples(a=A, b=B, c=C))
    values = np.array([A, B, C])  # members x samples
    expected = values.mean(axis=0) - 0.7 * values.std(axis=0, ddof=0)
    assert [s.value for s in scores] == pytest.approx(expected.tolist())
    first = scores[0]
    assert first.details["members"] == {"a": 0.2, "b": 0.4, "c": 1.0}
    assert first.details["mean"] == pytest.approx(np.mean([0.2, 0.4, 1.0]))
    assert first.breakdown["disagreement"] == pytest.approx(np.std([0.2, 0.4, 1.0]))
    assert first.breakdown["a"] == 0.2 and first.breakdown["a/double"] == 0.4
    assert first.details["member_details"]["b"] == {"seen": "b"}
    # Members that agree cost nothing.
    assert scores[3].value == pytest.approx(0.5) and scores[3].breakdown["disagreement"] == 0


@pytest.mark.parametrize(
    ("combine", "expected"),
    [
        ("mean_minus_std", lambda v: v.mean(axis=0) - 2.0 * v.std(axis=0)),
        ("mean_minus_variance", lambda v: v.mean(axis=0) - 2.0 * v.var(axis=0)),
        ("min", lambda v: v.min(axis=0)),
        ("mean", lambda v: v.mean(axis=0)),
    ],
)
def test_each_combination_against_numpy(combine, expected):
    options = {} if combine in ("min", "mean") else {"k": 2.0}
    scores = EnsembleReward(members("a", "b", "c"), combine=combine, **options).score(samples(a=A, b=B, c=C))
    assert [s.value for s in scores] == pytest.approx(expected(np.array([A, B, C])).tolist())


def test_the_default_penalty_is_one_standard_deviation():
    [score] = EnsembleReward(members("a", "b")).score(samples(a=[1.0], b=[0.0]))
    assert score.value == pytest.approx(0.5 - 0.5)


def test_batch_normalisation_standardises_each_member_over_the_call():
    a = np.array([0.1, 0.5, 0.9, 0.3])
    b = 100 * a + 7  # the same judgement on another scale
    c = np.array([3.0, -1.0, 2.0, 0.0])
    reward = EnsembleReward(members("a", "b", "c"), normalize="batch", k=0.5)
    scores = reward.score(samples(a=a.tolist(), b=b.tolist(), c=c.tolist()))
    z = np.array([(m - m.mean()) / m.std() for m in (a, b, c)])
    assert [s.value for s in scores] == pytest.approx((z.mean(axis=0) - 0.5 * z.std(axis=0)).tolist())
    assert scores[0].details["standardized"] == pytest.approx({"a": z[0, 0], "b": z[1, 0], "c": z[2, 0]})
    assert scores[0].details["members"]["b"] == pytest.approx(17.0)  # raw values are kept
    # Without normalisation, the member on the large scale swamps the others.
    raw = EnsembleReward(members("a", "b"), combine="mean").score(samples(a=a.tolist(), b=b.tolist()))
    standardized = EnsembleReward(members("a", "b"), normalize="batch").score(
        samples(a=a.tolist(), b=b.tolist())
    )
    assert raw[0].value == pytest.approx((0.1 + 17.0) / 2)
    assert [s.breakdown["disagreement"] for s in standardized] == pytest.approx([0, 0, 0, 0])


def test_batch_normalisation_leaves_out_a_member_without_spread():
    reward = EnsembleReward(members("a", "b", "c"), normalize="batch")
    scores = reward.score(samples(a=[1.0, 2.0, 4.0], b=[0.0, 0.0, 3.0], c=[1.0, 1.0, 1.0]))
    z = np.array([(m - m.mean()) / m.std() for m in (np.array([1.0, 2.0, 4.0]), np.array([0.0, 0.0, 3.0]))])
    assert [s.value for s in scores] == pytest.approx((z.mean(axis=0) - z.std(axis=0)).tolist())
    assert "no spread" in scores[0].details["left_out"]["c"]
    assert "c" not in scores[0].details["standardized"]
    # A call of one sample: nothing can be standardised, so there is no value, not a 0.
    [alone] = reward.score(samples(a=[1.0], b=[2.0], c=[3.0]))
    assert alone.status is Status.NOT_APPLICABLE and alone.value is None
    assert "0 of 3 members have a value; min_members is 2" in alone.reason


def test_batch_normalisation_treats_float_rounding_as_no_spread():
    # Red-team 22, finding 11: 0.1 + 0.2 is 0.30000000000000004; standardised, those 5.6e-17
    # became z-scores of -0.71, +1.41, -0.71 and moved the ensemble by a full unit.
    b, c = np.array([0.2, 0.5, 0.9]), np.array([1.0, 0.0, 0.5])
    reward = EnsembleReward(members("a", "b", "c"), normalize="batch")
    scores = reward.score(samples(a=[0.3, 0.1 + 0.2, 0.3], b=b.tolist(), c=c.tolist()))
    z = np.array([(m - m.mean()) / m.std() for m in (b, c)])
    assert [s.value for s in scores] == pytest.approx((z.mean(axis=0) - z.std(axis=0)).tolist())
    reason = scores[0].details["left_out"]["a"]
    assert re.search(
        r"spread by [0-9.]+e-17 around 0\.3, at most 1e-12 of their magnitude: float rounding", reason
    )
    # With only one other member, too few remain: no value rather than a noise-driven one.
    pair = EnsembleReward(members("a", "b"), normalize="batch").score(
        samples(a=[0.3, 0.1 + 0.2, 0.3], b=b.tolist())
    )
    assert [s.status for s in pair] == [Status.NOT_APPLICABLE] * 3
    assert "float rounding" in pair[0].reason
    # A small spread that is not rounding (1e-9 on 0.3, 3e-9 of the magnitude) is standardised.
    a = np.array([0.3, 0.3 + 1e-9, 0.3])
    kept = reward.score(samples(a=a.tolist(), b=b.tolist(), c=c.tolist()))
    z = np.array([(m - m.mean()) / m.std() for m in (a, b, c)])
    assert [s.value for s in kept] == pytest.approx((z.mean(axis=0) - z.std(axis=0)).tolist())
    assert "left_out" not in kept[0].details


def test_values_near_the_float_limit_neither_raise_nor_fail_their_batch_mates():
    # Red-team 22, finding 11: 1e200 members raised OverflowError out of score() for the batch.
    batch = samples(a=[1e200, -1e200, 1.7e308, 0.5], b=[1e200, 1e200, -1.7e308, 0.25])
    scores = EnsembleReward(members("a", "b")).score(batch)
    # mean +- std by hand: (1e200, 0), (0, 1e200), (0, 1.7e308), (0.375, 0.125).
    assert [s.value for s in scores] == [1e200, -1e200, -1.7e308, 0.25]
    assert [s.details["std"] for s in scores] == [0.0, 1e200, 1.7e308, 0.125]
    variance = EnsembleReward(members("a", "b"), combine="mean_minus_variance").score(batch)
    assert [s.status for s in variance] == [Status.OK, Status.ERROR, Status.ERROR, Status.OK]
    assert variance[0].value == 1e200 and variance[3].value == 0.375 - 0.125**2
    assert "too large to combine: mean_minus_variance overflows a float (mean 0, std 1e+200, value -inf)" in (
        variance[1].reason
    )
    assert variance[1].details["members"] == {"a": -1e200, "b": 1e200}
    # Standardised over the batch: a's values +-1.7e308 and 0 are z = +-sqrt(3/2) and 0.
    normalized = EnsembleReward(members("a", "b"), normalize="batch", combine="mean").score(
        samples(a=[1.7e308, -1.7e308, 0.0], b=[1.0, 3.0, 2.0])
    )
    root = np.sqrt(1.5)
    assert normalized[0].details["standardized"] == pytest.approx({"a": root, "b": -root})
    assert normalized[1].details["standardized"] == pytest.approx({"a": -root, "b": root})
    assert [s.value for s in normalized] == pytest.approx([0.0, 0.0, 0.0])


def test_reference_normalisation_uses_the_given_stats():
    stats = {"a": {"mean": 0.5, "std": 0.25}, "b": {"mean": 10.0, "std": 4.0}}
    reward = EnsembleReward(members("a", "b"), normalize="reference", reference_stats=stats, k=0.3)
    scores = reward.score(samples(a=[0.75, 0.0], b=[2.0, 14.0]))
    z = np.array([(np.array([0.75, 0.0]) - 0.5) / 0.25, (np.array([2.0, 14.0]) - 10.0) / 4.0])
    assert [s.value for s in scores] == pytest.approx((z.mean(axis=0) - 0.3 * z.std(axis=0)).tolist())
    # A sample's value does not depend on its batch mates.
    [alone] = reward.score(samples(a=[0.75], b=[2.0]))
    assert alone.value == pytest.approx(scores[0].value)


def test_a_failed_member_fails_the_ensemble_by_default():
    [score] = EnsembleReward(members("a", "b", "c")).score(samples(a=[1.0], b=["timeout"], c=[0.0]))
    assert score.status is Status.TIMEOUT and score.value is None
    assert score.reason == "member 'b' failed: b said timeout"
    assert score.breakdown == {"a": 1.0, "a/double": 2.0, "c": 0.0, "c/double": 0.0}


def test_skip_combines_the_rest_while_there_are_min_members():
    reward = EnsembleReward(members("a", "b", "c"), on_member_failure="skip", k=0.5)
    enough, too_few = reward.score(
        samples(a=[1.0, 1.0], b=["backend_error", "backend_error"], c=[0.0, "timeout"])
    )
    assert enough.value == pytest.approx(np.mean([1.0, 0.0]) - 0.5 * np.std([1.0, 0.0]))
    assert enough.details["skipped"] == {"b": "backend_error"}
    assert too_few.status is Status.BACKEND_ERROR and too_few.value is None
    assert too_few.reason.startswith("1 of 3 members have a value; min_members is 2; member 'b' failed")
    lenient = EnsembleReward(members("a", "b", "c"), on_member_failure="skip", min_members=1)
    [one] = lenient.score(samples(a=[0.8], b=["timeout"], c=["timeout"]))
    assert one.value == 0.8 and one.breakdown["disagreement"] == 0


def test_not_applicable_members_are_left_out_and_too_few_is_not_applicable():
    reward = EnsembleReward(members("a", "b", "c"))
    partial, none = reward.score(
        samples(a=[0.4, "not_applicable"], b=[0.8, "not_applicable"], c=["not_applicable", 1.0])
    )
    assert partial.value == pytest.approx(0.6 - np.std([0.4, 0.8]))
    assert partial.details["left_out"] == {"c": "not applicable: c said not_applicable"}
    assert none.status is Status.NOT_APPLICABLE and none.value is None


def test_a_member_that_raises_fails_its_scores_not_the_batch():
    reward = EnsembleReward({"a": FieldValue("a"), "broken": Raises()})
    [score] = reward.score(samples(a=[1.0]))
    assert score.status is Status.ERROR
    assert "broken member" in score.reason


def test_heads_of_one_reward_are_the_members():
    heads = {"helpful": 0.9, "honest": 0.1, "harmless": 0.5, "verbose": 7.0}
    reward = EnsembleReward({"rm": FieldValue("rm")}, heads=["helpful", "honest", "harmless"], k=1.5)
    [score] = reward.score(samples(rm=[heads]))
    values = np.array([0.9, 0.1, 0.5])
    assert score.value == pytest.approx(values.mean() - 1.5 * values.std())
    assert score.details["members"] == {"helpful": 0.9, "honest": 0.1, "harmless": 0.5}
    assert set(score.breakdown) == {"helpful", "honest", "harmless", "disagreement"}


def test_a_head_missing_from_the_breakdown_is_an_error_and_a_failed_reward_fails_every_head():
    reward = EnsembleReward({"rm": FieldValue("rm")}, heads=["helpful", "honest"])
    missing, failed = reward.score(samples(rm=[{"helpful": 1.0}, "timeout"]))
    assert missing.status is Status.ERROR and "no finite 'honest'" in missing.reason
    assert failed.status is Status.TIMEOUT


def test_usage_is_summed_and_io_bound_comes_from_the_members():
    reward = EnsembleReward({"a": Billed("a"), "b": Billed("b"), "c": FieldValue("c")})
    assert reward.io_bound and not reward.uses_gpu
    assert not EnsembleReward(members("a", "b")).io_bound
    [score] = reward.score(samples(a=[1.0], b=[1.0], c=[1.0]))
    assert (score.usage.prompt_tokens, score.usage.completion_tokens, score.usage.calls) == (20, 4, 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"members": {"a": {"type": "string_match"}}}, r"members: an ensemble needs at least 2"),
        ({"combine": "min", "k": 2.0}, r"k: has no meaning with combine: min"),
        ({"k": -1}, r"k: Input should be greater than or equal to 0"),
        ({"min_members": 3}, r"min_members: should be at most the number of members \(2\)"),
        ({"normalize": "reference"}, r"reference_stats: normalize: reference needs the stats"),
        ({"reference_stats": {"a": {"mean": 0, "std": 1}}}, r"reference_stats: is read only"),
        (
            {
                "normalize": "reference",
                "reference_stats": {"a": {"mean": 0, "std": 0}, "b": {"mean": 0, "std": 1}},
            },
            r"reference_stats\.a\.std: Input should be greater than 0",
        ),
        ({"heads": ["x", "y"]}, r"heads: are read from one member's breakdown; members has 2"),
        ({"on_member_failure": "ignore"}, r"on_member_failure: Input should be 'fail' or 'skip'"),
        (
            {"members": {"a": {"type": "string_match"}, "disagreement": {"type": "string_match"}}},
            r"members: 'disagreement' is the ensemble's own breakdown entry",
        ),
    ],
)
def test_options_errors_name_the_field(options, message):
    config = {"members": {"a": {"type": "string_match"}, "b": {"type": "string_match"}}, **options}
    with pytest.raises(ConfigError, match=rf"^EnsembleReward\.{message}"):
        EnsembleReward(**config)


def test_heads_need_one_member_and_two_heads():
    with pytest.raises(ConfigError, match=r"^EnsembleReward\.heads: should name at least 2 different heads"):
        EnsembleReward({"rm": FieldValue("rm")}, heads=["x", "x"])


def test_errors_in_a_nested_config_name_its_path():
    bad_member = {"type": "ensemble", "members": {"a": {"type": "string_match"}, "b": {"type": "nope"}}}
    with pytest.raises(ConfigError, match=r"^components\.e\.members\.b: unknown reward type 'nope'"):
        build({"type": "combine", "components": {"e": bad_member}})
    with pytest.raises(
        ConfigError, match=r"^components\.e\.colour: unknown option; accepted options: members"
    ):
        build({"type": "combine", "components": {"e": {**bad_member, "colour": "red"}}})


def test_builds_from_yaml_and_scores(tmp_path):
    path = tmp_path / "ensemble.yaml"
    path.write_text(
        "type: ensemble\n"
        "name: rm_ensemble\n"
        "combine: mean_minus_variance\n"
        "k: 0.5\n"
        "members:\n"
        "  first: {type: field_value_for_ensemble_tests, key: a}\n"
        "  second: {type: field_value_for_ensemble_tests, key: b}\n"
        "on_member_failure: skip\n"
    )
    reward = build(path)
    assert isinstance(reward, EnsembleReward) and reward.name == "rm_ensemble"
    assert reward.members["first"].name == "first"
    [score] = reward.score(samples(a=[0.9], b=[0.3]))
    assert score.value == pytest.approx(0.6 - 0.5 * np.var([0.9, 0.3]))


def test_pickles_and_scores_the_same_after():
    reward = build(
        {
            "type": "ensemble",
            "normalize": "batch",
            "members": {
                "a": {"type": "field_value_for_ensemble_tests", "key": "a"},
                "b": {"type": "field_value_for_ensemble_tests", "key": "b"},
            },
        }
    )
    copy = pickle.loads(pickle.dumps(reward))
    batch = samples(a=[0.1, 0.7, 0.4], b=[3.0, 1.0, 2.0])
    assert [s.value for s in copy.score(batch)] == [s.value for s in reward.score(batch)]


def test_the_docstring_examples_run():
    assert doctest.testmod(rewardlab.rewards.ensemble, optionflags=doctest.ELLIPSIS).failed == 0
