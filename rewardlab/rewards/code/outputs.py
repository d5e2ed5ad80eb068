"""Whether a program's output matches the expected one (stdout text, or a returned value).

Stdout follows the rules competitive-programming judges use: trailing whitespace on a line and
trailing blank lines do not matter; if the lines still differ, the outputs are compared token by
token, and where the expected token is a decimal (``0.333333333``) a number within the tolerance
matches it. Where the expected token is an integer, only that integer does: ``1000000006`` must
not pass for ``1000000000``.

Every function here takes any value a program can return (`python_runner.decode`) and never
raises: ints of any size are compared exactly (beyond a float's range, ``math.isclose`` raises
OverflowError) and described by their size (Python refuses ``str()`` of an int of more than
4,300 digits, and the conversion is quadratic).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

_DECIMAL = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][-+]?\d+)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _tokens_match(actual: str, expected: str, tolerance: float) -> bool:
    if actual == expected:
        return True
    if not _DECIMAL.fullmatch(expected) or not _NUMBER.fullmatch(actual):
        return False
    a, b = float(actual), float(expected)
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def stdout_matches(actual: str, expected: str, tolerance: float = 1e-6) -> bool:
    """Judge-style comparison of printed output (see the module docstring)."""
    actual_lines = [line.rstrip() for line in actual.rstrip().splitlines()]
    expected_lines = [line.rstrip() for line in expected.rstrip().splitlines()]
    if actual_lines == expected_lines:
        return True
    actual_tokens, expected_tokens = actual.split(), expected.split()
    return len(actual_tokens) == len(expected_tokens) and all(
        _tokens_match(a, b, tolerance) for a, b in zip(actual_tokens, expected_tokens, strict=True)
    )


def _close(actual: int | float, expected: float, tolerance: float) -> bool:
    """``math.isclose`` with both tolerances, exact where an int is beyond a float's range."""
    try:
        return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
    except OverflowError:
        if not math.isfinite(expected):
            return False
        a, b, margin = Fraction(actual), Fraction(expected), Fraction(tolerance)
        return abs(a - b) <= max(margin * max(abs(a), abs(b)), margin)


def values_match(actual: Any, expected: Any, tolerance: float = 1e-6) -> bool:
    """Equality of a returned value and the expected one, for tests stored as JSON.

    JSON has no tuples, so a list and a tuple with equal items match; an expected float matches
    within the tolerance; an expected integer only an equal number (``123456700.0`` does not pass
    for ``123456789``); a bool never matches a number (``True`` is not ``1`` here).
    """
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        if isinstance(expected, int):
            return actual == expected
        if math.isnan(expected) or (isinstance(actual, float) and math.isnan(actual)):
            return isinstance(actual, float) and math.isnan(actual) and math.isnan(expected)
        return _close(actual, expected, tolerance)
    if isinstance(actual, list | tuple) and isinstance(expected, list | tuple):
        return len(actual) == len(expected) and all(
            values_match(a, b, tolerance) for a, b in zip(actual, expected, strict=True)
        )
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[k], expected[k], tolerance) for k in actual
        )
    return type(actual) is type(expected) and actual == expected


def call_output_matches(actual: Any, expected: Any, tolerance: float = 1e-6) -> bool:
    """`values_match`, plus APPS's convention of storing a call's return value wrapped in a
    one-element list."""
    if values_match(actual, expected, tolerance):
        return True
    return isinstance(expected, list) and len(expected) == 1 and values_match(actual, expected[0], tolerance)


#: Ints up to this many bits are written out; longer ones are described by their size.
_WRITTEN_INT_BITS = 10_000
_CONTAINERS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
    dict: ("{", "}"),
}


def _repr_pieces(value: Any, limit: int, depth: int = 0) -> Iterator[str]:
    kind = type(value)
    if kind is int and value.bit_length() > _WRITTEN_INT_BITS:
        digits = int(value.bit_length() * math.log10(2)) + 1
        yield f"<{'-' if value < 0 else ''}int of about {digits} digits>"
    elif kind is str or kind is bytes:
        yield repr(value[:limit])
    elif kind in _CONTAINERS and value:
        if depth > 8:
            yield "..."
            return
        opening, closing = _CONTAINERS[kind]
        yield opening
        for position, item in enumerate(value.items() if kind is dict else value):
            if position:
                yield ", "
            if kind is dict:
                yield from _repr_pieces(item[0], limit, depth + 1)
                yield ": "
            yield from _repr_pieces(item[1] if kind is dict else item, limit, depth + 1)
        yield ",)" if kind is tuple and len(value) == 1 else closing
    else:
        yield repr(value)


def clipped_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters, built only as far as it is shown, with ints
    too long to write in decimal described by their size."""
    pieces, length = [], 0
    for piece in _repr_pieces(value, limit):
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            return "".join(pieces)[:limit] + "..."
    return "".join(pieces)
