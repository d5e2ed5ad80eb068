"""Equivalence of two parsed answers without a CAS.

Every function here answers True, False, or None for "not sure". None is not a failure: it
sends the pair to the CAS, which is slower but knows more. A definite answer is only given when
the comparison is sound: exact rational arithmetic, or numeric evaluation of expressions whose
values are determined (identity testing at random points for expressions with variables).

Policies (each one a choice a grader has to make, stated once):

- Decimals are exact: 0.5 = 1/2, but 0.333 != 1/3 and 3.14 != pi. A decimal with at least
  `APPROXIMATION_DIGITS` significant digits may stand for a value with no finite decimal
  expansion that it rounds or cuts off (0.3333333333 for 1/3); a printed float (`FLOAT_DIGITS`
  digits) for what it is within float noise of. 419.9999999 is not 420.
- An inequality is an interval, but ``(a, b)`` with two numbers may be an ordered pair, so
  ``-2 < x < 1`` answers ``[-2, 1)``-style intervals and not ``(-2, 1)``.
- A numeral in a base is answered by its digits, not by its value (``17_8`` is not 15).
- Percent: "50%" equals 50/100 and also a bare "50" (datasets often drop the sign).
- Angles: degrees and radians are converted only when the radian side says so (pi, or "rad").
- Units: dropped when one side has none; converted when both sides state one.
"""

from __future__ import annotations

import cmath
import math
import random
import re
from collections.abc import Sequence
from fractions import Fraction

from rewardlab.rewards.math.answer import (
    Answer,
    Bracketed,
    Choice,
    Clock,
    Collection,
    Equation,
    Hedged,
    Infinity,
    Matrix,
    Scalar,
    Union,
    Words,
)
from rewardlab.rewards.math.evaluate import TooLarge, evaluate
from rewardlab.rewards.math.expression import Node, Unsupported, decimal_digits, decimal_places, variables
from rewardlab.rewards.math.normalize import THOUSANDS

APPROXIMATION_DIGITS = 10
#: Decimals this long are printed floats, equal to what they are within float noise of.
FLOAT_DIGITS = 15
FLOAT_RELATIVE = 4e-15
#: Floats closer than this (relatively) are equal: float noise from evaluating irrationals.
EQUAL_RELATIVE = 1e-13
EQUAL_ABSOLUTE = 1e-12
#: Floats further apart than this (relatively) are different; in between, ask the CAS.
DIFFERENT_RELATIVE = 1e-6
IDENTITY_POINTS = 4

Verdict = bool | None


def _random_points(names: frozenset[str], count: int, mixed_signs: bool) -> list[dict[str, complex]]:
    # Seeded by the variable names so that a verdict never changes between runs.
    generator = random.Random(",".join(sorted(names)) + str(mixed_signs))
    points = []
    for _ in range(count):
        point = {}
        for name in sorted(names):
            sign = generator.choice((-1, 1)) if mixed_signs else 1
            point[name] = complex(sign * generator.uniform(0.3, 2.7))
        points.append(point)
    return points


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


def _terminates(value: Fraction) -> bool:
    """Whether a rational number has a finite decimal expansion (its denominator is 2^a 5^b)."""
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator == 1


def _approximates(decimal: Fraction | complex, node: Node, exact: Fraction | complex) -> bool:
    """True when a long decimal literal stands for an exact value (see the module policies).

    A printed float (`FLOAT_DIGITS` significant digits or more) stands for what it is within
    float noise of. Otherwise the decimal must have `APPROXIMATION_DIGITS` significant digits and
    be the exact value rounded or cut off at its last place, and the exact value must have no
    finite decimal expansion: 420 and 0.15 are written exactly, so 419.9999999 and 0.1500000001
    are other numbers.
    """
    digits, places = decimal_digits(node), decimal_places(node)
    if digits is None or places is None or digits < APPROXIMATION_DIGITS:
        return False
    if digits >= FLOAT_DIGITS and abs(complex(decimal) - complex(exact)) <= FLOAT_RELATIVE * abs(
        complex(exact)
    ):
        return True
    if isinstance(exact, Fraction):
        if _terminates(exact):
            return False
        scaled = exact * 10**places
        return decimal * 10**places in (math.floor(scaled), math.ceil(scaled))
    return abs(complex(decimal) - exact) <= 10.0**-places and abs(exact.imag) < EQUAL_ABSOLUTE


def _values_equal(gold: Node, pred: Node) -> Verdict:
    gold_value, pred_value = evaluate(gold), evaluate(pred)
    if isinstance(gold_value, Fraction) and isinstance(pred_value, Fraction) and gold_value == pred_value:
        return True
    if _approximates(pred_value, pred, gold_value) or _approximates(gold_value, gold, pred_value):
        return True
    if isinstance(gold_value, Fraction) and isinstance(pred_value, Fraction):
        return False
    if decimal_digits(gold) is not None or decimal_digits(pred) is not None:
        return False  # a finite decimal is exact, and a short one is no printed float (3.14159 != pi)
    return _close(complex(gold_value), complex(pred_value))


def _agree_at(gold: Node, pred: Node, points: list[dict[str, complex]]) -> Verdict:
    verdicts = [_close(complex(evaluate(gold, point)), complex(evaluate(pred, point))) for point in points]
    if False in verdicts:
        return False
    return True if all(verdicts) else None


def _identical_functions(gold: Node, pred: Node) -> Verdict:
    """Identity test: two expressions in variables agree at several random points.

    Positive points first; an identity that only holds for positive values (sqrt(x^2) = x)
    fails at mixed-sign points and is left to the CAS.
    """
    names = variables(gold) | variables(pred)
    positive = _agree_at(gold, pred, _random_points(names, IDENTITY_POINTS, mixed_signs=False))
    if positive is not True:
        return positive
    return True if _agree_at(gold, pred, _random_points(names, 2, mixed_signs=True)) else None


def expressions_equal(gold: Node, pred: Node) -> Verdict:
    """Equivalence of two expression trees (None when this module cannot tell)."""
    try:
        if variables(gold) | variables(pred):
            return _identical_functions(gold, pred)
        return _values_equal(gold, pred)
    except TooLarge:
        # One side is beyond evaluation (1000000!, 2^{2^{30}}): it cannot equal a side that
        # evaluates; two such sides are left to the CAS.
        return False if _evaluates(gold) != _evaluates(pred) else None
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return None


def _evaluates(node: Node) -> bool:
    """Whether a tree has a finite value (at one point, for a tree with variables)."""
    point = dict.fromkeys(variables(node), complex(1.3))
    try:
        return cmath.isfinite(complex(evaluate(node, point)))
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return False


def uses_pi(node: Node) -> bool:
    return node == ("const", "pi") or any(isinstance(child, tuple) and uses_pi(child) for child in node[1:])


def _scaled(node: Node, factor: Fraction) -> Node:
    return node if factor == 1 else ("mul", node, ("num", factor, 0))


def _same_numeral(gold: Node, pred: Node) -> bool:
    """A numeral in a base is answered by the same digits, in the same base or written bare
    (``17_8`` by ``17``), never by its value in another base (``17_8`` is not ``15``)."""
    if gold[0] == "based" and pred[0] == "based":
        return gold[1].lstrip("0") == pred[1].lstrip("0") and gold[2] == pred[2]
    based, other = (gold, pred) if gold[0] == "based" else (pred, gold)
    bare = other[0] == "num" and other[2] == 0 and other[1] >= 0
    if not bare:
        return False
    same_digits = str(int(other[1])) == (based[1].lstrip("0") or "0")
    return same_digits if based is gold else same_digits and based[2] == 10


def _scalars_equal(gold: Scalar, pred: Scalar) -> Verdict:
    if "based" in (gold.node[0], pred.node[0]):
        return _same_numeral(gold.node, pred.node)
    if gold.unit is not None and pred.unit is not None:
        if gold.unit.dimension != pred.unit.dimension:
            return False
        return expressions_equal(_scaled(gold.node, gold.unit.scale), _scaled(pred.node, pred.unit.scale))
    if gold.degrees != pred.degrees:
        degrees, radians = (gold, pred) if gold.degrees else (pred, gold)
        if radians.radians or uses_pi(radians.node):
            in_radians = ("mul", degrees.node, ("div", ("const", "pi"), ("num", Fraction(180), 0)))
            return expressions_equal(in_radians, radians.node)
    hundred = ("num", Fraction(100), 0)
    candidates = [pred.node]
    if gold.percent and not pred.percent:
        # "50%" is answered by "0.5", and by "50" with the unit implied.
        candidates.append(("mul", pred.node, hundred))
    elif pred.percent and not gold.percent:
        # "50%" answers a gold of 0.5, and a gold of 50 stored without its sign. A gold of 1 or
        # less is a fraction: "0.5%" (= 0.005) must not pass for 0.5.
        candidates = [("div", pred.node, hundred)]
        if _magnitude(gold.node) > 1:
            candidates.append(pred.node)
    verdicts = [expressions_equal(gold.node, candidate) for candidate in candidates]
    if True in verdicts:
        return True
    return None if None in verdicts else False


def _magnitude(node: Node) -> float:
    try:
        return abs(complex(evaluate(node)))
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return 0.0


def _single_variable(node: Node) -> bool:
    return node[0] == "var"


def _equations_equal(gold: Equation, pred: Equation) -> Verdict:
    if _single_variable(gold.left) and gold.left == pred.left:
        return expressions_equal(gold.right, pred.right)
    # Same solution set: gold_left - gold_right is a non-zero multiple of pred_left - pred_right.
    gold_zero = ("sub", gold.left, gold.right)
    pred_zero = ("sub", pred.left, pred.right)
    names = variables(gold_zero) | variables(pred_zero)
    if not names:
        return None
    try:
        ratios = []
        for point in _random_points(names, IDENTITY_POINTS, mixed_signs=False):
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


def _distinct(items: Sequence[Answer]) -> list[Answer] | None:
    """A set's elements without repeats ({1, 1, 2} is {1, 2}); None when unsure."""
    kept: list[Answer] = []
    for item in items:
        verdicts = [answers_equal(seen, item) for seen in kept]
        if None in verdicts:
            return None
        if True not in verdicts:
            kept.append(item)
    return kept


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


def _collections_equal(gold: Collection, pred: Collection) -> Verdict:
    if gold.braces and pred.braces:
        gold_items, pred_items = _distinct(gold.items), _distinct(pred.items)
        if gold_items is None or pred_items is None:
            return None
        return _unordered_equal(gold_items, pred_items)
    return _unordered_equal(gold.items, pred.items)


def _as_thousands(collection: Collection) -> Scalar | None:
    """ "32, 349" read as the number 32349 rather than a list of two."""
    digits = re.sub(r",\s+", ",", collection.text)
    if collection.braces or not THOUSANDS.match(digits):
        return None
    return Scalar(("num", Fraction(digits.replace(",", "")), 0))


def _real(answer: Answer) -> float | None:
    if isinstance(answer, Infinity):
        return float("inf") * answer.sign
    if isinstance(answer, Scalar) and not variables(answer.node):
        try:
            value = complex(evaluate(answer.node))
        except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
            return None
        return value.real if abs(value.imag) < EQUAL_ABSOLUTE else None
    return None


def _canonical_intervals(answer: Answer) -> list[tuple[float, bool, float, bool]] | None:
    """A union of intervals as sorted, merged (low, closed, high, closed) pieces; None if the
    answer is not a union of numeric intervals."""
    parts = answer.parts if isinstance(answer, Union) else (answer,)
    pieces = []
    for part in parts:
        if not (isinstance(part, Bracketed) and len(part.items) == 2):
            return None
        low, high = (_real(item) for item in part.items)
        if low is None or high is None or low > high:
            return None
        pieces.append((low, part.opening == "[", high, part.closing == "]"))
    pieces.sort(key=lambda piece: (piece[0], not piece[1]))
    merged = [pieces[0]]
    for low, low_closed, high, high_closed in pieces[1:]:
        last_low, last_low_closed, last_high, last_high_closed = merged[-1]
        # Overlapping, or touching at a point that one of the two includes: one interval.
        if low < last_high or (low == last_high and (low_closed or last_high_closed)):
            if high > last_high or (high == last_high and high_closed):
                merged[-1] = (
                    last_low,
                    last_low_closed,
                    high,
                    high_closed or (high == last_high and last_high_closed),
                )
        else:
            merged.append((low, low_closed, high, high_closed))
    return merged


def _interval_sets_equal(gold: Answer, pred: Answer) -> Verdict:
    gold_pieces, pred_pieces = _canonical_intervals(gold), _canonical_intervals(pred)
    if gold_pieces is None or pred_pieces is None:
        return None
    if len(gold_pieces) != len(pred_pieces):
        return False
    for (gl, glc, gh, ghc), (pl, plc, ph, phc) in zip(gold_pieces, pred_pieces, strict=True):
        if (glc, ghc) != (plc, phc) or not _same_endpoint(gl, pl) or not _same_endpoint(gh, ph):
            return False
    return True


def _same_endpoint(a: float, b: float) -> bool:
    if a == b:
        return True
    return abs(a - b) <= EQUAL_RELATIVE * max(abs(a), abs(b))


def _solutions(alternatives: tuple) -> tuple:
    """ "x = 2 or x = 3" as the solutions 2 and 3."""
    return tuple(
        Scalar(a.right) if isinstance(a, Equation) and _single_variable(a.left) else a for a in alternatives
    )


def _may_be_a_point(answer: Bracketed) -> bool:
    """``(a, b)`` with two finite values: an open interval, or an ordered pair."""
    return (answer.opening, answer.closing) == ("(", ")") and all(isinstance(i, Scalar) for i in answer.items)


def answers_equal(gold: Answer, pred: Answer) -> Verdict:
    """Equivalence of a gold answer and a predicted one, by shape."""
    if isinstance(pred, Hedged):
        if isinstance(gold, Collection) and len(gold.items) > 1 and pred.alternatives:
            # "x = 2 or x = 3" lists solutions when the question has several.
            return _unordered_equal(gold.items, _solutions(pred.alternatives))
        return None if isinstance(gold, Hedged) else False
    if isinstance(gold, Choice):
        return isinstance(pred, Choice) and pred.letter == gold.letter
    if type(gold) is type(pred):
        return _same_shape_equal(gold, pred)
    return _mixed_shapes_equal(gold, pred)


def _mixed_shapes_equal(gold: Answer, pred: Answer) -> Verdict:
    if {type(gold), type(pred)} == {Union, Bracketed}:
        return _interval_sets_equal(gold, pred)
    if isinstance(gold, Equation) and isinstance(pred, Scalar) and _single_variable(gold.left):
        return _scalars_equal(Scalar(gold.right), pred)
    if isinstance(pred, Equation) and isinstance(gold, Scalar) and _single_variable(pred.left):
        return _scalars_equal(gold, Scalar(pred.right))
    for one, other in ((gold, pred), (pred, gold)):
        if isinstance(one, Collection) and one.braces and len(one.items) == 1 and isinstance(other, Scalar):
            # A singleton solution set and its element answer the same question.
            return answers_equal(one.items[0], other) if one is gold else answers_equal(other, one.items[0])
    if isinstance(gold, Scalar) and isinstance(pred, Collection) and (number := _as_thousands(pred)):
        return _scalars_equal(gold, number)
    if isinstance(pred, Scalar) and isinstance(gold, Collection) and (number := _as_thousands(gold)):
        return _scalars_equal(number, pred)
    shapes = {type(gold), type(pred)}
    if shapes in ({Scalar, Infinity}, {Scalar, Words}):
        return False
    if Scalar in shapes and shapes & {Collection, Bracketed, Matrix, Union}:
        # One value against several (or a tuple): "2, 3, 4" does not answer "3".
        return False
    if shapes == {Bracketed, Collection} and any(
        isinstance(a, Collection) and a.braces for a in (gold, pred)
    ):
        return False  # a tuple or interval is not a set
    return None


def _same_shape_equal(gold: Answer, pred: Answer) -> Verdict:
    """Equivalence of two answers of the same type (the caller checked ``type(gold) is type(pred)``)."""
    if isinstance(gold, Scalar) and isinstance(pred, Scalar):
        return _scalars_equal(gold, pred)
    if isinstance(gold, Equation) and isinstance(pred, Equation):
        return _equations_equal(gold, pred)
    if isinstance(gold, Bracketed) and isinstance(pred, Bracketed):
        if (gold.opening, gold.closing) != (pred.opening, pred.closing):
            return False
        if gold.from_inequality != pred.from_inequality and _may_be_a_point(
            pred if gold.from_inequality else gold
        ):
            return False
        return _ordered_equal(gold.items, pred.items)
    if isinstance(gold, Collection) and isinstance(pred, Collection):
        return _collections_equal(gold, pred)
    if isinstance(gold, Union) and isinstance(pred, Union):
        verdict = _interval_sets_equal(gold, pred)
        return verdict if verdict is not None else _unordered_equal(gold.parts, pred.parts)
    if isinstance(gold, Matrix) and isinstance(pred, Matrix):
        if [len(row) for row in gold.rows] != [len(row) for row in pred.rows]:
            return False
        return _ordered_equal([c for row in gold.rows for c in row], [c for row in pred.rows for c in row])
    if isinstance(gold, Infinity) and isinstance(pred, Infinity):
        return gold.sign == pred.sign
    if isinstance(gold, Words) and isinstance(pred, Words):
        return gold.text == pred.text
    if isinstance(gold, Clock) and isinstance(pred, Clock):
        return gold.minutes == pred.minutes
    return None
