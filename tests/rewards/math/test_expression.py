from fractions import Fraction

import pytest

from rewardlab.rewards.math.evaluate import FUNCTION_VALUES, evaluate
from rewardlab.rewards.math.expression import (
    FUNCTIONS,
    Unsupported,
    decimal_digits,
    parse_expression,
    variables,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", Fraction(42)),
        ("-3.25", Fraction(-13, 4)),
        (r"\frac{3}{4}", Fraction(3, 4)),
        (r"\frac34", Fraction(3, 4)),
        (r"\frac{1}{2}+\frac{1}{3}", Fraction(5, 6)),
        (r"2\frac{1}{3}", Fraction(7, 3)),  # a mixed number, not 2 * 1/3
        (r"2 \cdot 3^2", Fraction(18)),
        (r"2^{-2}", Fraction(1, 4)),
        (r"\sqrt{16}", Fraction(4)),
        (r"\sqrt[3]{-27}", Fraction(-3)),
        (r"8^{2/3}", Fraction(4)),
        ("5!", Fraction(120)),
        ("1.5e3", Fraction(1500)),
        ("2(3+4)", Fraction(14)),
        (r"{-2}^{2}", Fraction(4)),
        ("-2^2", Fraction(-4)),
    ],
)
def test_exact_values(text, value):
    result = evaluate(parse_expression(text))
    assert isinstance(result, Fraction) and result == value


def test_irrational_values_are_floats():
    assert abs(evaluate(parse_expression(r"\sqrt{2}")) - 2**0.5) < 1e-15
    assert abs(evaluate(parse_expression(r"2\pi")) - 6.283185307179586) < 1e-12


@pytest.mark.parametrize(
    "text",
    [
        r"\log 8",
        r"\sum_{k=1}^{3} k",
        "2 3",
        r"\frac{1}",
        "x^",
        r"10^{10^{10}}",
        "(" * 60 + "1" + ")" * 60,
        r"\infty",
    ],
)
def test_what_it_does_not_know_is_unsupported(text):
    with pytest.raises(Unsupported):
        evaluate(parse_expression(text))


def test_variables_and_points():
    tree = parse_expression(r"x^2 + 2\alpha y_1")
    assert variables(tree) == {"x", "alpha", "y_1"}
    assert evaluate(tree, {"x": 3, "alpha": 1, "y_1": 2}) == 13
    with pytest.raises(Unsupported, match="free variable"):
        evaluate(tree)


def test_significant_digits_of_a_lone_decimal():
    assert decimal_digits(parse_expression("-0.333")) == 3
    assert decimal_digits(parse_expression("0.0083333333333")) == 11
    assert decimal_digits(parse_expression("12")) is None
    assert decimal_digits(parse_expression("0.5+1")) is None


def test_the_parser_and_the_evaluator_know_the_same_functions():
    assert set(FUNCTION_VALUES) == FUNCTIONS
