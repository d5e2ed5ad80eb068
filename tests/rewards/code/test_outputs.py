import math

from rewardlab.rewards.code.outputs import call_output_matches, stdout_matches, values_match


def test_stdout_whitespace_rules():
    assert stdout_matches("1 2\n3  \n\n\n", "1 2\n3")
    assert stdout_matches("1  2\n3", "1 2 3")  # token-wise when lines differ
    assert not stdout_matches("1 2", "1 2 3")
    assert not stdout_matches("12", "1 2")


def test_stdout_float_tolerance():
    assert stdout_matches("0.3333333", "0.333333333")
    assert not stdout_matches("0.334", "0.333333333")
    assert not stdout_matches("abc", "abd")


def test_value_rules():
    assert values_match((1, [2.0000000001]), [1, (2.0,)])  # JSON has no tuples
    assert not values_match(True, 1) and not values_match(1, True)
    assert values_match({"a": 1.0}, {"a": 1})
    assert not values_match({"a": 1}, {"b": 1})
    assert values_match(math.nan, math.nan) and not values_match(math.nan, 1.0)
    assert not values_match("1", 1)


def test_apps_wraps_call_results_in_a_list():
    assert call_output_matches(5, [5])
    assert call_output_matches([5], [5])
    assert not call_output_matches(6, [5])


def test_tolerance_only_for_expected_decimals():
    assert not stdout_matches("1000000006", "1000000000")  # within 1e-6 relative, but an integer
    assert not stdout_matches("1e9 2_000", "1000000000 2000")
    assert stdout_matches("2.0000000001", "2.0")
    assert not values_match(123456700.0, 123456789)
    assert values_match(3.0, 3) and values_match(3, 3.0000000001)
