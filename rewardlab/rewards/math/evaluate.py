"""Values of the trees `expression.parse_expression` builds.

Values are exact (`fractions.Fraction`) whenever the arithmetic allows, and complex floats
otherwise (irrational roots, pi, transcendental functions). Every exact operation is bounded, so
that an answer of a couple of thousand characters cannot make the fast path compute for minutes:
what would exceed the bounds raises `Unsupported` and goes to the CAS, which runs with a budget.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from rewardlab.rewards.math.expression import Node, Unsupported


class DivisionByZero(Unsupported):
    """The expression divides by zero: it has no value (an answer "0/0" states nothing)."""


class TooLarge(Unsupported):
    """A value too large to evaluate (a factorial of millions, a power tower): astronomically
    larger than any value that can be evaluated, which is how it compares with one."""


Value = Fraction | complex

MAX_EXACT_EXPONENT = 512
#: Decimal digits past which a value is astronomically large: no answer to compare is that big.
MAX_MAGNITUDE = 300
MAX_EXACT_BITS = 4096
MAX_FACTORIAL = 3000
#: Exact intermediate results larger than this many bits are refused: a 2,000-character answer
#: can otherwise multiply its way to megabit integers.
MAX_RESULT_BITS = 1 << 16
CONSTANTS: Mapping[str, complex] = {"pi": complex(math.pi), "e": complex(math.e), "i": 1j}
FUNCTION_VALUES: Mapping[str, Callable[[complex], complex]] = {
    "sin": cmath.sin,
    "cos": cmath.cos,
    "tan": cmath.tan,
    "sec": lambda x: 1 / cmath.cos(x),
    "csc": lambda x: 1 / cmath.sin(x),
    "cot": lambda x: 1 / cmath.tan(x),
    "arcsin": cmath.asin,
    "arccos": cmath.acos,
    "arctan": cmath.atan,
    "sinh": cmath.sinh,
    "cosh": cmath.cosh,
    "tanh": cmath.tanh,
    "ln": cmath.log,
    "exp": cmath.exp,
}


def evaluate(node: Node, point: Mapping[str, complex] | None = None) -> Value:
    """Value of a tree, exact where possible; variables take their values from ``point``."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "based":
        return Fraction(int(node[1], node[2]))
    if kind == "var":
        if point is None or node[1] not in point:
            raise Unsupported(f"free variable {node[1]}")
        return point[node[1]]
    if kind == "const":
        return CONSTANTS[node[1]]
    if kind == "neg":
        return -evaluate(node[1], point)
    if kind == "func":
        return FUNCTION_VALUES[node[1]](complex(evaluate(node[2], point)))
    if kind == "fact":
        return _factorial(evaluate(node[1], point))
    if kind == "abs":
        value = evaluate(node[1], point)
        return abs(value) if isinstance(value, Fraction) else complex(abs(value))
    if kind == "binom":
        return _binomial(evaluate(node[1], point), evaluate(node[2], point))
    if kind == "root":
        return _root(evaluate(node[1], point), evaluate(node[2], point))
    left, right = evaluate(node[1], point), evaluate(node[2], point)
    if kind == "add":
        return _bounded(left + right)
    if kind == "sub":
        return _bounded(left - right)
    if kind == "mul":
        return _bounded(left * right)
    if kind == "div":
        if right == 0:
            raise DivisionByZero("division by zero")
        if isinstance(left, Fraction) and isinstance(right, Fraction):
            return left / right
        return complex(left) / complex(right)
    if kind == "pow":
        return _power(left, right)
    raise Unsupported(f"unknown node {kind}")


def _factorial(value: Value) -> Value:
    if isinstance(value, Fraction) and value.denominator == 1 and 0 <= value <= MAX_FACTORIAL:
        return _bounded(Fraction(math.factorial(int(value))))
    if isinstance(value, Fraction) and value.denominator == 1 and value > MAX_FACTORIAL:
        raise TooLarge(f"{value}! has more than 9,000 digits")
    raise Unsupported("factorial of a non-integer")


def _bounded(value: Value) -> Value:
    if (
        isinstance(value, Fraction)
        and max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_RESULT_BITS
    ):
        raise Unsupported("exact value too large to evaluate here")
    return value


def _binomial(top: Value, bottom: Value) -> Value:
    """C(n, k) for a whole k, as the falling factorial n (n-1) ... (n-k+1) / k!, so that a
    variable n (identity tests) works as well as a number."""
    whole = top if isinstance(top, Fraction) and top.denominator == 1 else None
    if (
        whole is not None
        and isinstance(bottom, Fraction)
        and bottom.denominator == 1
        and 0 <= whole - bottom < bottom
    ):
        bottom = whole - bottom  # C(n, k) = C(n, n - k): the smaller index keeps the product short
    if not (isinstance(bottom, Fraction) and bottom.denominator == 1 and 0 <= bottom <= MAX_FACTORIAL):
        if (
            whole is not None
            and isinstance(bottom, Fraction)
            and bottom.denominator == 1
            and whole >= bottom > MAX_FACTORIAL
        ):
            raise TooLarge("a binomial coefficient of more than 900 digits")
        raise Unsupported("binomial coefficient with a non-integer or huge lower index")
    result: Value = Fraction(1)
    for offset in range(int(bottom)):
        result = _bounded(result * (top - offset))
    return result / math.factorial(int(bottom))


def _exact_root(value: Fraction, degree: int) -> Fraction | None:
    if value < 0 and degree % 2 == 0:
        return None
    sign = -1 if value < 0 else 1
    roots = []
    for part in (abs(value.numerator), value.denominator):
        root = round(part ** (1 / degree)) if part.bit_length() < 1000 else None
        if root is None:
            return None
        # Float roots are off by one near perfect powers; check the neighbours exactly.
        for candidate in (root - 1, root, root + 1):
            if candidate >= 0 and candidate**degree == part:
                roots.append(candidate)
                break
        else:
            return None
    return sign * Fraction(roots[0], roots[1])


def _root(value: Value, degree: Value) -> Value:
    if isinstance(degree, Fraction) and degree.denominator == 1 and 2 <= degree <= 64:
        if isinstance(value, Fraction):
            exact = _exact_root(value, int(degree))
            if exact is not None:
                return exact
            if value < 0 and degree % 2 == 1:
                return -complex(float(-value) ** (1 / float(degree)))
        return _power(value, 1 / degree)
    return _power(value, 1 / degree if isinstance(degree, Fraction) else 1 / complex(degree))


def _power(base: Value, exponent: Value) -> Value:
    if isinstance(base, Fraction) and isinstance(exponent, Fraction):
        if exponent.denominator == 1:
            power = int(exponent)
            size = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
            if abs(power) <= MAX_EXACT_EXPONENT and size * abs(power) <= MAX_EXACT_BITS:
                if base == 0 and power < 0:
                    raise DivisionByZero("division by zero")
                return base**power
            if base != 0 and power * math.log10(abs(base)) > MAX_MAGNITUDE:
                raise TooLarge(f"a power of more than {MAX_MAGNITUDE} digits")
        if exponent.denominator <= 64 and exponent.numerator.bit_length() < 16:
            root = _exact_root(base, exponent.denominator) if base != 0 else Fraction(0)
            if root is not None:
                return _power(root, Fraction(exponent.numerator))
    try:
        result = complex(base) ** complex(exponent)
    except ZeroDivisionError as error:
        raise Unsupported(f"power out of range: {error}") from None
    except OverflowError:
        raise TooLarge("a power beyond floating point") from None
    if not (math.isfinite(result.real) and math.isfinite(result.imag)):
        raise TooLarge("a power beyond floating point")
    return result
