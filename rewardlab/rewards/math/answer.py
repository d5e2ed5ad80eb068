"""The shape of a final answer: a number or expression, an equation, a tuple, interval, set or
list, a union of intervals, a matrix, a multiple-choice letter, or plain text.

Shapes decide how two answers are compared (a set ignores order, an interval does not, a
matrix compares entry by entry), so they are recognised once, here, from the normalised text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewardlab.rewards.math.expression import Node, Unsupported, parse_expression
from rewardlab.rewards.math.normalize import Normalized, normalize

MAX_ANSWER_CHARS = 2000
MAX_ITEMS = 64

_CHOICE = re.compile(r"^\(?\s*([A-Ea-e])\s*\)?$")
_CHOICE_PREFIX = re.compile(r"^\(?([A-E])(?:\)|\.|:|\s|$)")
_MATRIX = re.compile(r"^\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$", re.DOTALL)
_HEDGE = re.compile(r"\bor\b|\\lor\b|\\vee\b")
_INFINITY = re.compile(r"^([+-]?)\s*(?:\\infty|∞|\\inf|infinity|inf)$")


class InvalidAnswer(ValueError):
    """An answer too large or too deeply nested to verify within a budget."""


@dataclass(frozen=True, slots=True)
class Scalar:
    node: Node
    percent: bool = False
    degrees: bool = False


@dataclass(frozen=True, slots=True)
class Infinity:
    sign: int


@dataclass(frozen=True, slots=True)
class Equation:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Bracketed:
    """``(a, b)``, ``[a, b)``, ... : a tuple or an interval; the brackets are part of the answer."""

    opening: str
    closing: str
    items: tuple


@dataclass(frozen=True, slots=True)
class Collection:
    """An unordered answer: ``\\{1, 2\\}`` or a bare list of solutions ``1, 2``."""

    items: tuple
    braces: bool


@dataclass(frozen=True, slots=True)
class Union:
    parts: tuple


@dataclass(frozen=True, slots=True)
class Matrix:
    rows: tuple


@dataclass(frozen=True, slots=True)
class Choice:
    letter: str


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Hedged:
    """Several alternatives offered as one answer ("2 or 3"): never a correct answer."""

    text: str


Answer = Scalar | Infinity | Equation | Bracketed | Collection | Union | Matrix | Choice | Text | Hedged


def split_top_level(text: str, separator: str) -> list[str]:
    """Split on a separator that is not inside any bracket pair."""
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(separator, index):
            parts.append(text[start:index])
            start = index + len(separator)
            index = start
            continue
        index += 1
    parts.append(text[start:])
    return parts


def _balanced_inside(text: str) -> bool:
    """True when the first character's bracket closes exactly at the last character."""
    depth = 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0 and index != len(text) - 1:
                return False
    return depth == 0


def parse_answer(raw: str, choice_expected: bool = False) -> Answer:
    """The shape and content of an answer, or raise `Unsupported` / `InvalidAnswer`."""
    if len(raw) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"answer is {len(raw)} characters, over the {MAX_ANSWER_CHARS} limit")
    cleaned = normalize(raw)
    text = cleaned.text
    if choice_expected:
        match = _CHOICE_PREFIX.match(text) or _CHOICE.match(text)
        if match:
            return Choice(match.group(1).upper())
    if _HEDGE.search(text):
        return Hedged(text)
    return _parse_shape(text, cleaned)


def _parse_shape(text: str, cleaned: Normalized) -> Answer:
    if not text:
        raise Unsupported("empty answer")
    if (match := _MATRIX.match(text)) is not None:
        rows = [row for row in re.split(r"\\\\", match.group(2)) if row.strip()]
        return Matrix(tuple(tuple(_scalar(cell) for cell in row.split("&")) for row in rows))
    if r"\cup" in text:
        return Union(
            tuple(_parse_shape(part.strip(), Normalized(part.strip())) for part in text.split(r"\cup"))
        )
    if text.startswith(r"\{") and text.endswith(r"\}"):
        inner = text[2:-2].strip()
        return Collection(tuple(_endpoint(part) for part in _list_parts(inner)) if inner else (), braces=True)
    sides = split_top_level(text, "=")
    if len(sides) == 2:
        left, right = (parse_expression(side.strip()) for side in sides)
        return Equation(left, right)
    if len(sides) > 2:
        raise Unsupported("chained equalities")
    if text[0] in "([" and text[-1] in ")]" and _balanced_inside(text):
        inner = split_top_level(text[1:-1], ",")
        if len(inner) > 1:
            return Bracketed(text[0], text[-1], tuple(_endpoint(item) for item in inner))
    parts = _list_parts(text)
    if len(parts) > 1:
        return Collection(tuple(_endpoint(part) for part in parts), braces=False)
    if (match := _INFINITY.match(text)) is not None:
        return Infinity(-1 if match.group(1) == "-" else 1)
    if r"\pm" in text or r"\mp" in text:
        plus = text.replace(r"\pm", "+").replace(r"\mp", "-")
        minus = text.replace(r"\pm", "-").replace(r"\mp", "+")
        return Collection((_scalar(plus), _scalar(minus)), braces=False)
    try:
        return Scalar(parse_expression(text), percent=cleaned.percent, degrees=cleaned.degrees)
    except Unsupported:
        if re.fullmatch(r"[A-Za-z][A-Za-z .'-]*", text) and len(text) > 1:
            return Text(text.lower())
        raise


def _list_parts(text: str) -> list[str]:
    """Items of a list written with top-level commas or "and"."""
    parts = split_top_level(text, ",")
    if len(parts) == 1:
        parts = re.split(r"\s+and\s+", text)
    if len(parts) > MAX_ITEMS:
        raise Unsupported("too many items")
    parts = [part.strip() for part in parts]
    if len(parts) > 1 and not all(parts):
        raise Unsupported("empty list item")
    return parts


def _endpoint(text: str) -> Answer:
    text = text.strip()
    if (match := _INFINITY.match(text)) is not None:
        return Infinity(-1 if match.group(1) == "-" else 1)
    return _parse_shape(text, normalize(text))


def _scalar(text: str) -> Scalar:
    cleaned = normalize(text)
    return Scalar(parse_expression(cleaned.text), percent=cleaned.percent, degrees=cleaned.degrees)
