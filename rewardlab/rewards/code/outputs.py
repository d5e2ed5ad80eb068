"""Whether a program's output matches the expected one (stdout text, or a returned value).

Stdout follows the rules competitive-programming judges use: trailing whitespace on a line and
trailing blank lines do not matter; if the lines still differ, the outputs are compared token by
token, and where the expected token is a decimal (``0.333333333``) a number within the tolerance
matches it. Where the expected token is an integer, only that integer does: ``1000000006`` must
not pass for ``1000000000``.
"""

from __future__ import annotations

import math
import re
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
        return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
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
