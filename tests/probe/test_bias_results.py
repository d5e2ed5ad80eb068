"""Wilson intervals against an independent computation (inverting the score test by bisection)
and Newcombe's published values, and the flip tallies' arithmetic."""

from __future__ import annotations

import math

import pytest

from rewardlab.probe.bias_results import FlipCount, ProbeFlips, SelfPreference, wilson_interval

Z = 1.959963984540054  # the 97.5% normal quantile


def score_test_bounds(k: int, n: int) -> tuple[float, float]:
    """Wilson's interval by its definition: the proportions p that the score test does not reject,
    |k/n - p| <= z * sqrt(p (1 - p) / n), found by bisection on each side of k/n."""
    observed = k / n

    def rejected(p: float) -> bool:
        return abs(observed - p) > Z * math.sqrt(p * (1 - p) / n)

    def edge(outside: float, inside: float) -> float:
        for _ in range(200):
            middle = (outside + inside) / 2
            outside, inside = (middle, inside) if rejected(middle) else (outside, middle)
        return inside

    low = 0.0 if not rejected(0.0) or k == 0 else edge(0.0, observed)
    high = 1.0 if not rejected(1.0) or k == n else edge(1.0, observed)
    return low, high


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (0, 24), (4, 24), (10, 24), (24, 24), (7, 50), (333, 1000)]
)
def test_wilson_interval_inverts_the_score_test(k, n):
    low, high = wilson_interval(k, n)
    expected_low, expected_high = score_test_bounds(k, n)
    assert low == pytest.approx(expected_low, abs=1e-9)
    assert high == pytest.approx(expected_high, abs=1e-9)


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_interval_matches_newcombe_1998(k, n, expected):
    # Newcombe, "Two-sided confidence intervals for the single proportion: comparison of seven
    # methods", Statistics in Medicine 17 (1998), table II, method 3 (score, no continuity
    # correction), to four decimals.
    assert wilson_interval(k, n) == pytest.approx(expected, abs=5e-5)


def test_wilson_interval_by_hand():
    # k = 5, n = 10: centre 0.5; half-width z * sqrt(0.025 + z²/400) / (1 + z²/10).
    half = Z * math.sqrt(0.25 / 10 + Z * Z / 400) / (1 + Z * Z / 10)
    assert wilson_interval(5, 10) == pytest.approx((0.5 - half, 0.5 + half))
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


def test_no_trials_no_interval_and_impossible_counts_refused():
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="11 successes in 10 trials"):
        wilson_interval(11, 10)


def test_a_tally_leaves_ties_and_failures_out_of_the_rate():
    count = FlipCount(flips=3, held=9, ties=2, skipped=1)
    count.failed["parse_error"] = 4
    assert (count.decided, count.pairs) == (12, 18)
    assert count.rate == 0.25
    assert count.to_dict()["interval_95"] == pytest.approx(list(wilson_interval(3, 12)))


def test_a_probe_fails_above_the_threshold_only():
    probe = ProbeFlips("length", "pads", flips=FlipCount(flips=1, held=3))
    assert probe.fails(0.2) and not probe.fails(0.25)
    assert not ProbeFlips("length", "pads").fails(0.0)  # no decided pair: nothing to fail


def test_examples_keep_the_first_flipped_pairs():
    count = FlipCount()
    for index in range(8):
        count.add(f"pair-{index}", "flip")
    for verdict in ("held", "tie", "skipped", "parse_error", "parse_error"):
        count.add("other", verdict)
    assert count.flips == 8 and count.examples == [f"pair-{index}" for index in range(5)]
    assert (count.held, count.ties, count.skipped, count.failed) == (1, 1, 1, {"parse_error": 2})


def test_self_preference_rates():
    result = SelfPreference(family=("gpt",), own_wins=6, other_wins=2, ties=1, labelled=9, label_own_wins=3)
    assert result.own_win_rate == 0.75 and result.label_own_win_rate == pytest.approx(1 / 3)
    assert result.to_dict()["interval_95"] == pytest.approx(list(wilson_interval(6, 8)))
