import pytest

from rewardlab.errors import RubricError
from rewardlab.rubrics.aggregate import aggregate
from rewardlab.rubrics.model import Criterion, Rubric


def rubric(*weights):
    return Rubric(tuple(Criterion(f"criterion {i}", w) for i, w in enumerate(weights)))


def test_points_match_healthbenchs_own_example():
    # simple-evals' healthbench test: points 7, 5, 10, -6; met, not met, met, met.
    value = aggregate(rubric(7, 5, 10, -6), [1, 0, 1, 1], "points")
    assert value == pytest.approx((7 + 10 - 6) / (7 + 5 + 10))


def test_points_are_not_clipped_per_sample():
    assert aggregate(rubric(2, -5), [0, 1], "points") == pytest.approx(-2.5)


def test_all_negative_rubrics():
    pitfalls = rubric(-2, -3)
    with pytest.raises(RubricError, match="positive criterion"):
        aggregate(pitfalls, [1, 0], "points")
    assert aggregate(pitfalls, [1, 0], "weighted_sum") == -2.0
    assert aggregate(pitfalls, [0, 0], "all_or_nothing") == 1.0  # no pitfall made
    assert aggregate(pitfalls, [1, 0], "all_or_nothing") == 0.0
    assert aggregate(pitfalls, [1, 0], "fraction") == 0.5


def test_ordinal_and_probabilistic_verdicts():
    weights = rubric(4, 2, -1)
    met = [0.5, 1.0, 0.25]  # "partly", "yes", a 25% chance the pitfall was made
    assert aggregate(weights, met, "weighted_sum") == pytest.approx(4 * 0.5 + 2 - 0.25)
    assert aggregate(weights, met, "points") == pytest.approx((2 + 2 - 0.25) / 6)
    assert aggregate(weights, met, "all_or_nothing") == pytest.approx(0.5 * 1.0 * 0.75)
    assert aggregate(weights, met, "fraction") == pytest.approx((0.5 + 1.0 + 0.75) / 3)


def test_all_or_nothing_with_hard_verdicts():
    weights = rubric(1, 1, -1)
    assert aggregate(weights, [1, 1, 0], "all_or_nothing") == 1.0
    assert aggregate(weights, [1, 0, 0], "all_or_nothing") == 0.0
    assert aggregate(weights, [1, 1, 1], "all_or_nothing") == 0.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="verdicts for"):
        aggregate(rubric(1, 2), [1], "points")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        aggregate(rubric(1), [1.5], "points")
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(rubric(1), [1], "median")
