import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.rewards.code.outputs import call_output_matches, clipped_repr, stdout_matches, values_match


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


def test_huge_integers_compare_exactly():
    assert not values_match(10**400, 0.5) and not values_match(0.5, 10**400)
    assert values_match(2**1024, 1.7976931348623157e308, tolerance=1.0)  # within 100%, beyond a float
    assert not values_match(10**5000 + 1, 10**5000) and values_match(10**5000, 10**5000)
    assert clipped_repr(10**5000) == "<int of about 5001 digits>"
    assert clipped_repr([-(10**5000)]) == "[<-int of about 5001 digits>]"


class Huge:
    """Stands for an int of thousands of digits until the test builds it: hypothesis writes the
    examples it draws with repr(), which Python refuses for such an int."""

    def __init__(self, extra: int):
        self.extra = extra

    def __repr__(self) -> str:
        return f"10**5000 + {self.extra}"


def built(value):
    if isinstance(value, Huge):
        return 10**5000 + value.extra
    if isinstance(value, list | tuple):
        return type(value)(built(item) for item in value)
    if isinstance(value, dict):
        return {key: built(item) for key, item in value.items()}
    return value


#: Every value a program can send (see python_runner.encode), with ints of any size.
PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-5, 5).map(Huge) | st.floats() | st.text()
    | st.binary() | st.complex_numbers(),
    lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner)
    | st.frozensets(st.integers() | st.text()),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(PLAIN, PLAIN)
def test_judging_and_describing_never_fail(actual, expected):
    actual, expected = built(actual), built(expected)
    values_match(actual, expected)
    call_output_matches(actual, expected)
    text = clipped_repr(actual, 50)
    assert len(text) <= 53
    try:
        written = repr(actual)
    except ValueError:  # an int beyond Python's decimal conversion limit
        return
    assert text == (written if len(written) <= 50 else written[:50] + "...")
