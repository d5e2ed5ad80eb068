"""Units and currencies: converted within a dimension, never across dimensions or currencies."""

from fractions import Fraction

import pytest

from rewardlab import Sample
from rewardlab.rewards.math.reward import MathAnswerReward
from rewardlab.rewards.math.units import split_unit


@pytest.fixture(scope="module")
def reward():
    built = MathAnswerReward(execution="inline")
    yield built
    built.close()


@pytest.mark.parametrize(
    ("text", "quantity", "dimension", "scale"),
    [
        ("10 cm", "10", "length", Fraction(1, 100)),
        ("10 square feet", "10", "length^2", Fraction(3048, 10000) ** 2),
        ("10 cm^{2}", "10", "length^2", Fraction(1, 10000)),
        ("10 km/h", "10", "length/time", Fraction(1000, 3600)),
        ("10 per week", "10", "count/time", Fraction(1, 604800)),
        ("10 dollars per hour", "10", "money (USD)/time", Fraction(1, 3600)),
        ("£10", "10", "money (GBP)", Fraction(1)),
        ("10¢", "10", "money (USD)", Fraction(1, 100)),
        ("10 quarters", "10", "money (USD)", Fraction(1, 4)),
        ("10 ms", "10", "time", Fraction(1, 1000)),
        ("2 decades", "2", "time", Fraction(315576000)),
        ("3 lbs", "3", "mass", Fraction(45359237, 100000)),
    ],
)
def test_units_are_read_with_their_dimension_and_scale(text, quantity, dimension, scale):
    read, unit = split_unit(text)
    assert (read, unit.dimension, unit.scale) == (quantity, dimension, scale)


@pytest.mark.parametrize("text", ["3x + 2m", "10 apples", "x cm"])
def test_no_unit_without_a_plain_quantity_and_a_known_name(text):
    assert split_unit(text) == (text, None)


@pytest.mark.parametrize(
    ("completion", "reference", "expected"),
    [
        ("The answer is 40 quarters.", r"\$10", 1.0),
        ("The answer is 10¢.", r"\$10", 0.0),
        ("The answer is £10.", r"\$10", 0.0),
        ("The answer is €10.", "10 euros", 1.0),
        ("The answer is 70 per day.", r"490 \text{ per week}", 1.0),
        ("The answer is 10 per week.", r"10 \text{ per day}", 0.0),
        ("The answer is 10 square feet.", r"10 \text{ feet}", 0.0),
        ("The area is 24 square units.", "24", 1.0),  # a unit on one side only is dropped
        ("The answer is 2 lbs.", r"32 \text{ ounces}", 1.0),
        ("The answer is 1 decade.", r"10 \text{ years}", 1.0),
    ],
)
def test_answers_with_units(reward, completion, reference, expected):
    [score] = reward.score([Sample(completion=completion, reference=reference)])
    assert score.value == expected, score.reason
