"""Equivalence of two parsed answers without a CAS.

Every function here answers True, False, or None for "not sure". None is not a failure: it
sends the pair to the CAS, which is slower but knows more. A definite answer is only given when
the comparison is sound: exact rational arithmetic, or numeric evaluation of expressions whose
values are determined (identity testing at random points for expressions with variables).
"""

from __future__ import annotations

import cmath
import random
from collections.abc import Sequence
from fractions import Fraction

from rewardlab.rewards.math.answer import (
    Answer,
    Bracketed,
    Choice,
    Collection,
    Equation,
    Hedged,
    Infinity,
    Matrix,
    Scalar,
    Text,
    Union,
)
from rewardlab.rewards.math.expression import Node, Unsupported, evaluate, single_decimal_places, variables

#: A decimal approximation of an exact answer (0.333333 for 1/3) counts when it carries at least
#: this many decimal places and is the correctly rounded value.
MIN_APPROXIMATION_PLACES = 6
#: Floats closer than this (relatively) are equal: float noise from evaluating irrationals.
EQUAL_RELATIVE = 1e-10
EQUAL_ABSOLUTE = 1e-12
#: Floats further apart than this (relatively) are different; in between, ask the CAS.
DIFFERENT_RELATIVE = 1e-6
#: Letters that are constants as often as variables; an answer using them goes to the CAS.
AMBIGUOUS_SYMBOLS = frozenset({"e", "i"})
IDENTITY_POINTS = 4

Verdict = bool | None


def _random_points(names: frozenset[str], count: int) -> list[dict[str, complex]]:
    # Seeded by the variable names so that a verdict never changes between runs.
    generator = random.Random(",".join(sorted(names)))
    return [{name: complex(generator.uniform(0.3, 2.7)) for name in sorted(names)} for _ in range(count)]


def _close(a: complex, b: complex) -> Verdict:
    if not all(map(cmath.isfinite, (a, b))):
        return None
    difference = abs(a - b)
    scale = max(abs(a), abs(b))
    if difference <= EQUAL_ABSOLUTE or difference <= EQUAL_RELATIVE * scale:
        return True
    if difference > DIFFERENT_RELATIVE * scale:
        return False
    return None


def _approximates(decimal: Fraction | complex, places: int | None, exact: Fraction | complex) -> bool:
    """True when ``decimal`` is ``exact`` correctly rounded to ``places`` (>= the minimum)."""
    if places is None or places < MIN_APPROXIMATION_PLACES:
        return False
    bound = Fraction(1, 2 * 10**places)
    if isinstance(decimal, Fraction) and isinstance(exact, Fraction):
        return abs(decimal - exact) <= bound
    return abs(complex(decimal) - complex(exact)) <= float(bound) * (1 + 1e-9)


def _values_equal(gold: Node, pred: Node) -> Verdict:
    gold_value, pred_value = evaluate(gold), evaluate(pred)
    if isinstance(gold_value, Fraction) and isinstance(pred_value, Fraction) and gold_value == pred_value:
        return True
    if _approximates(pred_value, single_decimal_places(pred), gold_value) or _approximates(
        gold_value, single_decimal_places(gold), pred_value
    ):
        return True
    if isinstance(gold_value, Fraction) and isinstance(pred_value, Fraction):
        return False
    return _close(complex(gold_value), complex(pred_value))


def _identical_functions(gold: Node, pred: Node) -> Verdict:
    """Identity test: two expressions in variables agree at several random points."""
    names = variables(gold) | variables(pred)
    verdicts = []
    for point in _random_points(names, IDENTITY_POINTS):
        verdict = _close(complex(evaluate(gold, point)), complex(evaluate(pred, point)))
        if verdict is False:
            return False
        verdicts.append(verdict)
    return True if all(verdicts) else None


def expressions_equal(gold: Node, pred: Node) -> Verdict:
    """Equivalence of two expression trees (None when this module cannot tell)."""
    names = variables(gold) | variables(pred)
    if names & AMBIGUOUS_SYMBOLS:
        return None
    try:
        return _identical_functions(gold, pred) if names else _values_equal(gold, pred)
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return None


def _uses_pi(node: Node) -> bool:
    return node == ("const", "pi") or any(isinstance(child, tuple) and _uses_pi(child) for child in node[1:])


def _scalars_equal(gold: Scalar, pred: Scalar) -> Verdict:
    candidates = [pred.node]
    if gold.percent != pred.percent:
        # "50%" and "0.5" name the same quantity; so do "50%" and "50" when the unit is implied.
        hundred = ("num", Fraction(100), 0)
        candidates.append(("div", pred.node, hundred) if pred.percent else ("mul", pred.node, hundred))
    if gold.degrees != pred.degrees:
        degrees, radians = (gold, pred) if gold.degrees else (pred, gold)
        if _uses_pi(radians.node):
            # Degrees against a radian expression: convert only when the radian side says so (pi).
            in_radians = ("mul", degrees.node, ("div", ("const", "pi"), ("num", Fraction(180), 0)))
            return expressions_equal(in_radians, radians.node)
    verdicts = [expressions_equal(gold.node, candidate) for candidate in candidates]
    if True in verdicts:
        return True
    return None if None in verdicts else False


def _single_variable(node: Node) -> bool:
    return node[0] == "var"


def _equations_equal(gold: Equation, pred: Equation) -> Verdict:
    if _single_variable(gold.left) and gold.left == pred.left:
        return expressions_equal(gold.right, pred.right)
    # Same solution set: gold_left - gold_right is a non-zero multiple of pred_left - pred_right.
    gold_zero = ("sub", gold.left, gold.right)
    pred_zero = ("sub", pred.left, pred.right)
    names = variables(gold_zero) | variables(pred_zero)
    if not names or names & AMBIGUOUS_SYMBOLS:
        return None
    try:
        ratios = []
        for point in _random_points(names, IDENTITY_POINTS):
            gold_value, pred_value = complex(evaluate(gold_zero, point)), complex(evaluate(pred_zero, point))
            if abs(pred_value) < EQUAL_ABSOLUTE or abs(gold_value) < EQUAL_ABSOLUTE:
                return None
            ratios.append(gold_value / pred_value)
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return None
    verdicts = [_close(ratio, ratios[0]) for ratio in ratios[1:]]
    if False in verdicts:
        return False
    return True if all(verdicts) else None


def _ordered_equal(gold: Sequence[Answer], pred: Sequence[Answer]) -> Verdict:
    if len(gold) != len(pred):
        return False
    verdicts = [answers_equal(g, p) for g, p in zip(gold, pred, strict=True)]
    if False in verdicts:
        return False
    return True if all(verdicts) else None


def _unordered_equal(gold: Sequence[Answer], pred: Sequence[Answer]) -> Verdict:
    if len(gold) != len(pred):
        return False
    remaining = list(pred)
    unsure = False
    for item in gold:
        for index, candidate in enumerate(remaining):
            verdict = answers_equal(item, candidate)
            if verdict:
                del remaining[index]
                break
            unsure = unsure or verdict is None
        else:
            return None if unsure else False
    return True


def answers_equal(gold: Answer, pred: Answer) -> Verdict:
    """Equivalence of a gold answer and a predicted one, by shape."""
    if isinstance(pred, Hedged):
        return None if isinstance(gold, Hedged) else False
    if isinstance(gold, Choice):
        return isinstance(pred, Choice) and pred.letter == gold.letter
    if type(gold) is type(pred):
        return _same_shape_equal(gold, pred)
    if isinstance(gold, Equation) and isinstance(pred, Scalar) and _single_variable(gold.left):
        return _scalars_equal(Scalar(gold.right), pred)
    if isinstance(pred, Equation) and isinstance(gold, Scalar) and _single_variable(pred.left):
        return _scalars_equal(gold, Scalar(pred.right))
    shapes = {type(gold), type(pred)}
    if Scalar in shapes and shapes & {Collection, Bracketed, Matrix, Union}:
        # One value against several (or a tuple): "2, 3, 4" does not answer "3".
        return False
    return None


def _same_shape_equal(gold: Answer, pred: Answer) -> Verdict:
    if isinstance(gold, Scalar):
        return _scalars_equal(gold, pred)
    if isinstance(gold, Equation):
        return _equations_equal(gold, pred)
    if isinstance(gold, Bracketed):
        if (gold.opening, gold.closing) != (pred.opening, pred.closing):
            return False
        return _ordered_equal(gold.items, pred.items)
    if isinstance(gold, Collection):
        return _unordered_equal(gold.items, pred.items)
    if isinstance(gold, Union):
        return _unordered_equal(gold.parts, pred.parts)
    if isinstance(gold, Matrix):
        if [len(row) for row in gold.rows] != [len(row) for row in pred.rows]:
            return False
        return _ordered_equal([c for row in gold.rows for c in row], [c for row in pred.rows for c in row])
    if isinstance(gold, Infinity):
        return gold.sign == pred.sign
    if isinstance(gold, Text):
        return gold.text == pred.text or None
    return None
