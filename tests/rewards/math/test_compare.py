"""Fast-path verdicts. The expected values are mathematical facts worked out by hand; None means
the fast path must defer to the CAS instead of guessing."""

import pytest

from rewardlab.rewards.math.answer import parse_answer
from rewardlab.rewards.math.compare import answers_equal


def verdict(gold, prediction):
    return answers_equal(parse_answer(gold), parse_answer(prediction))


@pytest.mark.parametrize(
    ("gold", "prediction", "expected"),
    [
        ("3,250", "3250", True),
        ("1\\,000", "1000", True),
        (r"\frac{1}{9}", "0.111111", True),  # six places, correctly rounded
        (r"\frac{1}{9}", "0.11", False),  # too coarse to count as the exact answer
        (r"\frac{2}{3}", "0.666666", False),  # wrongly rounded
        (r"12\frac{3}{5}", "12.6", True),
        (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt2}", True),
        (r"3\sqrt{2}", r"\sqrt{18}", True),
        ("4a-2", "2(2a-1)", True),
        ("4a-2", "4x-2", False),  # different variable
        ("x^2+2x+1", "(x+1)^2", True),
        ("x^2-1", "(x-1)^2", False),
        ("50\\%", "0.5", True),
        ("50\\%", "50", True),
        ("50\\%", "5", False),
        (r"90^\circ", r"\frac{\pi}{2}", True),
        (r"90^\circ", "90", True),
        (r"\frac{\pi}{2}", "90", False),  # no unit stated on the prediction
        ("1.2 \\times 10^{3}", "1200", True),
        ("-4", "-4.0", True),
        ("5 \\text{ cm}", "5", True),
        ("\\$18", "18 dollars", True),
    ],
)
def test_scalars(gold, prediction, expected):
    assert verdict(gold, prediction) is expected


@pytest.mark.parametrize(
    ("gold", "prediction", "expected"),
    [
        ("(1,2]", "(1, 2]", True),
        ("(1,2]", "(1,2)", False),
        ("(1,2)", "(2,1)", False),
        (r"\{1,2,3\}", r"\{3,2,1\}", True),
        ("1, 2", "2, 1", True),
        ("1, 2", "1, 2, 2", False),
        (r"[0,\infty)", r"[0, \infty)", True),
        (r"(-\infty, 1) \cup (2, \infty)", r"(2,\infty)\cup(-\infty,1)", True),
        (r"3 \pm \sqrt{2}", r"3-\sqrt2, 3+\sqrt2", True),
        ("x=5", "5", True),
        ("5", "x = 5", True),
        ("y=2x+1", "y = 1+2x", True),
        ("x^2+y^2=1", "2y^2+2x^2=2", True),
        ("x^2+y^2=1", "x^2+y^2=2", False),
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{bmatrix}1&2\\3&4\end{bmatrix}", True),
        (r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", r"\begin{pmatrix}1&2\\3&5\end{pmatrix}", False),
    ],
)
def test_structures(gold, prediction, expected):
    assert verdict(gold, prediction) is expected


@pytest.mark.parametrize(
    ("gold", "prediction"),
    [("3", "2 or 3"), ("3", "2, 3, 4"), ("3", r"3 \text{ or } 4"), ("B", "B or C"), ("(1,2)", "1")],
)
def test_hedging_and_stuffing_never_pass(gold, prediction):
    assert verdict(gold, prediction) is False


def test_multiple_choice_letters():
    choice = lambda gold, pred: answers_equal(parse_answer(gold, True), parse_answer(pred, True))  # noqa: E731
    assert choice("B", r"\text{(B)}") is True
    assert choice("B", "B) 42") is True
    assert choice("B", "C") is False


@pytest.mark.parametrize(
    ("gold", "prediction"),
    [(r"e^{i\pi}", "-1"), (r"10^{10^{10}}", "1"), (r"\log_2 8", "3"), (r"\binom{5}{2}", "10")],
)
def test_the_fast_path_defers_what_it_cannot_settle(gold, prediction):
    try:
        result = verdict(gold, prediction)
    except ValueError:
        result = None
    assert result is None
