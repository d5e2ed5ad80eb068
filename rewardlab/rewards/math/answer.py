"""The shape of a final answer: a number or expression, an equation, a tuple, interval, set or
list, a union of intervals, a matrix, a multiple-choice letter, or plain text.

Shapes decide how two answers are compared (a set ignores order, an interval does not, a
matrix compares entry by entry), so they are recognised once, here, from the normalised text.
Inequalities ("3 < x \\le 4", "x \\ge 0") are read as the intervals they describe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeGuard

from rewardlab.rewards.math.commitment import DOUBTS, words
from rewardlab.rewards.math.evaluate import Value, evaluate
from rewardlab.rewards.math.expression import Node, Unsupported, parse_expression, variables
from rewardlab.rewards.math.normalize import EMPTY_SET, Normalized, normalize
from rewardlab.rewards.math.units import Unit

MAX_ANSWER_CHARS = 2000
MAX_ITEMS = 64
#: "x = 1/3 \approx 0.33" is consistent; "x = 1/3 \approx 1.3" contradicts itself.
APPROXIMATION_TOLERANCE = 0.05

_CHOICE_GOLD = re.compile(r"^\(?\s*([A-E])\s*\)?$")
# A statement that opens with its option: "(C) 1/2", "C) 1/2", "C. 1/2", "C: 1/2", "C", "(b)".
_CHOICE_LEADING = re.compile(
    r"^(?:(?:option|choice)\s*)?(?:\(\s*([A-Ea-e])\s*\)|([A-E])(?:[.:)]|\s|$))", re.I
)
# Another option named after the first: "(D)", "and D", "C" standing alone, "B\\D", a lower-case
# "d" after a separator ("B, d"); not an article ("A triangle", "B, a square") nor a letter in an
# expression ("2A+B").
_ANOTHER_CHOICE = re.compile(
    r"(?<![A-Za-z0-9^_+\-*/=])\(?\s*[A-Ea-e]\s*\)|(?<![A-Za-z0-9^_+\-*/=])[A-E](?![A-Za-z0-9^_+\-*/=])(?!\s+[a-z])"
    r"|(?:[,;&\\/]|\band)\s*[a-e](?![A-Za-z0-9^_+\-*/=(])(?!\s+[a-z])"
)
# An option letter standing alone ("the correct option is C").
_LONE_LETTER = re.compile(r"(?<![A-Za-z\\])\(?([A-E])\)?(?![A-Za-z])")
_MATRIX = re.compile(r"^\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$", re.DOTALL)
_HEDGE = re.compile(r"\bor\b|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_ENVIRONMENT = re.compile(r"\\begin\{([pbvBV]?matrix|array)\}.*?\\end\{\1\}", re.DOTALL)
_SUBSCRIPT = re.compile(r"_\{[^{}]*\}")
# Notation that states several things at once (implications, cases, struck-out values, line
# breaks): a CAS would keep the last part, so such an answer is never read as one value.
_SEVERAL_STATEMENTS = re.compile(
    r"\\(?:to|rightarrow|Rightarrow|longrightarrow|implies|iff|Leftrightarrow|equiv|sim|mid|hspace|"
    r"cancel|bcancel|xcancel|sout|not)(?![a-zA-Z])|\\begin\{cases\}|:=|∨|⁄|&|\\\\"
)
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})\s*(?:([ap])\.?\s*m?\.*)?$", re.IGNORECASE)
_INFINITY = re.compile(r"^([+-]?)\s*(?:\\infty|∞|\\inf|infinity|inf)$")
_MEMBERSHIP = re.compile(r"^[a-zA-Z]\s*\\in\s+")
_RELATION = re.compile(
    r"\\leq?(?![a-zA-Z])|\\geq?(?![a-zA-Z])|\\lt(?![a-zA-Z])|\\gt(?![a-zA-Z])|<=|>=|≤|≥|<|>"
)
_LESS = {r"\le": "<=", r"\leq": "<=", r"\lt": "<", "<=": "<=", "≤": "<=", "<": "<"}
_GREATER = {r"\ge": ">=", r"\geq": ">=", r"\gt": ">", ">=": ">=", "≥": ">=", ">": ">"}


class InvalidAnswer(ValueError):
    """An answer too large to verify within a budget."""


@dataclass(frozen=True, slots=True)
class Scalar:
    node: Node
    percent: bool = False
    degrees: bool = False
    radians: bool = False
    unit: Unit | None = None


@dataclass(frozen=True, slots=True)
class Infinity:
    sign: int


@dataclass(frozen=True, slots=True)
class Equation:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Bracketed:
    """``(a, b)``, ``[a, b)``, ... : a tuple or an interval; the brackets are part of the answer.
    ``from_inequality`` marks an interval written as an inequality (``-2 < x < 1``)."""

    opening: str
    closing: str
    items: tuple
    from_inequality: bool = False


@dataclass(frozen=True, slots=True)
class Collection:
    """An unordered answer: a set ``\\{1, 2\\}`` (braces) or a bare list of solutions ``1, 2``."""

    items: tuple
    braces: bool
    text: str = ""


@dataclass(frozen=True, slots=True)
class Union:
    parts: tuple


@dataclass(frozen=True, slots=True)
class Matrix:
    rows: tuple


@dataclass(frozen=True, slots=True)
class Clock:
    """A time of day ("4:30 p.m."), as minutes after midnight."""

    minutes: int


@dataclass(frozen=True, slots=True)
class Choice:
    letter: str


@dataclass(frozen=True, slots=True)
class Words:
    text: str


@dataclass(frozen=True, slots=True)
class Hedged:
    """Several alternatives offered as one answer ("2 or 3"), or an answer that contradicts
    itself ("x = 7 = 11"): never a correct single answer.

    ``alternatives`` holds the parsed parts of an "a or b" answer, which can still match a gold
    answer that lists several solutions ("x = 2 or x = 3" for "2, 3").
    """

    text: str
    alternatives: tuple = ()


Answer = (
    Scalar | Infinity | Equation | Bracketed | Collection | Union | Matrix | Clock | Choice | Words | Hedged
)


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


def is_choice_letter(text: str) -> bool:
    """A gold answer that is a multiple-choice letter ("B", "(C)"); lower case is not (e is a number)."""
    return bool(_CHOICE_GOLD.match(text))


def _choice(text: str) -> Choice | Hedged | None:
    """The one option a statement commits to, read strictly: a statement that names two
    options ("B and C", "A, B, C, D") or doubts its option ("maybe B") is a hedge; None when
    no option is named."""
    if any(word in DOUBTS for word in words(text)):
        return Hedged(text)
    leading = _CHOICE_LEADING.match(text)
    if leading is not None:
        if _ANOTHER_CHOICE.search(text, leading.end()):
            return Hedged(text)
        return Choice((leading.group(1) or leading.group(2)).upper())
    letters = list(_LONE_LETTER.finditer(text))
    if len({letter.group(1) for letter in letters}) > 1 or (
        letters and _ANOTHER_CHOICE.search(text, letters[0].end())
    ):
        return Hedged(text)
    if letters and _listed_beside_a_value(text):
        return Hedged(text)
    return Choice(letters[0].group(1)) if letters else None


def _listed_beside_a_value(text: str) -> bool:
    """An option listed with values that are not it: "7, A" (the contents of two boxes, ``\\boxed{7}
    or \\boxed{A}``), "3528, 272, A" - every value offered at once, among them the letter. Only
    a list whose items include the lone letter counts: "(A) 7" and "42, which is option B" name
    one option with its value."""
    parts = [part.strip() for part in split_top_level(text, ",")]
    lone = [_LONE_LETTER.fullmatch(part) for part in parts]
    return len(parts) > 1 and any(lone) and not all(lone)


def _states_several(text: str) -> bool:
    """Several statements in one answer (see `_SEVERAL_STATEMENTS`); a matrix's ``&`` and ``\\\\``
    and a limit's ``_{x \\to 0}`` do not count."""
    return bool(_SEVERAL_STATEMENTS.search(_SUBSCRIPT.sub("", _ENVIRONMENT.sub(" ", text))))


def parse_answer(raw: str, choice_expected: bool = False, cleaned: Normalized | None = None) -> Answer:
    """The shape and content of an answer, or raise `Unsupported` / `InvalidAnswer`; ``cleaned``
    is ``normalize(raw)`` when the caller has it already."""
    if len(raw) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"answer is longer than the {MAX_ANSWER_CHARS}-character limit")
    cleaned = normalize(raw) if cleaned is None else cleaned
    text = cleaned.text
    if _states_several(text):
        return Hedged(text)
    if cleaned.hedged or _HEDGE.search(text):
        intervals = _inequality_union(text)
        return intervals if intervals is not None else Hedged(text, _alternatives(text))
    if choice_expected and (choice := _choice(text)) is not None:
        return choice
    return _parse_shape(text, cleaned)


def _parse_shape(text: str, cleaned: Normalized) -> Answer:
    if not text:
        raise Unsupported("empty answer")
    if text == EMPTY_SET:
        return Collection((), braces=True, text=text)
    if (clock := _CLOCK.match(text)) is not None:
        return _clock(clock)
    text = _MEMBERSHIP.sub("", text)
    if (match := _MATRIX.match(text)) is not None:
        rows = [row for row in re.split(r"\\\\", match.group(2)) if row.strip()]
        matrix = Matrix(tuple(tuple(_scalar(cell) for cell in row.split("&")) for row in rows))
        return Scalar(("num", _determinant(matrix), None)) if match.group(1) == "vmatrix" else matrix
    if r"\cup" in text:
        return Union(tuple(_item(part) for part in split_top_level(text, r"\cup")))
    if text.startswith(r"\{") and text.endswith(r"\}"):
        inner = text[2:-2].strip()
        return Collection(tuple(_item(part) for part in _list_parts(inner)) if inner else (), True, text)
    if _RELATION.search(text) and (interval := _inequality(text)) is not None:
        return interval
    if r"\approx" in text:
        return _approximation(text, cleaned)
    sides = split_top_level(text, "=")
    if len(sides) > 1 and _is_label(sides[0]):
        # "\text{Volume} = 20 \times 2 = 40", "\cos \angle RPS = -\frac{24}{25}": the left side
        # names what the value is; the rest states it.
        return _parse_shape("=".join(sides[1:]).strip(), cleaned)
    if len(sides) == 2:
        left, right = sides
        return _equation(parse_expression(left.strip()), parse_expression(right.strip()), text=text)
    if len(sides) > 2:
        return _chain([side.strip() for side in sides])
    if text[0] in "([" and text[-1] in ")]" and _balanced_inside(text):
        elements = split_top_level(text[1:-1], ",")
        if len(elements) > 1:
            return Bracketed(text[0], text[-1], tuple(_item(part) for part in elements))
    parts = _list_parts(text)
    if len(parts) > 1:
        return Collection(tuple(_item(part) for part in parts), braces=False, text=text)
    if (match := _INFINITY.match(text)) is not None:
        return Infinity(-1 if match.group(1) == "-" else 1)
    if r"\pm" in text or r"\mp" in text:
        return Collection(tuple(_scalar(item) for item in _plus_minus(text)), braces=False, text=text)
    if re.fullmatch(r"[A-Za-z]+(?:[ '.-][A-Za-z]+)*\.?", text) and re.search(r"[A-Za-z]{3,}", text):
        # Words ("east", "odd", "no real roots"), not a product of single-letter variables.
        return Words(text.lower())
    return Scalar(parse_expression(text), cleaned.percent, cleaned.degrees, cleaned.radians, cleaned.unit)


def _is_label(side: str) -> bool:
    """A left side that names a quantity rather than stating one: no digits, and a word
    ("Volume of the locker") or notation the expression parser does not read."""
    if re.search(r"\d", side) or not side.strip() or _RELATION.search(side) or side.rstrip()[-1:] in "<>!":
        return False
    if re.search(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}", side):
        return True
    try:
        parse_expression(side.strip())
    except Unsupported:
        return True
    return False


def _plus_minus(text: str) -> list[str]:
    """``1 \\pm \\sqrt{5}`` stands for two items."""
    if r"\pm" not in text and r"\mp" not in text:
        return [text]
    plus = text.replace(r"\pm", "+").replace(r"\mp", "-")
    minus = text.replace(r"\pm", "-").replace(r"\mp", "+")
    return [plus, minus]


def _clock(match: re.Match[str]) -> Clock:
    hours, minutes, half = int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()
    if minutes >= 60 or hours > 23 or (half and not 1 <= hours <= 12):
        raise Unsupported("not a time of day")
    if half:
        hours = hours % 12 + (12 if half == "p" else 0)
    return Clock(hours * 60 + minutes)


def _list_parts(text: str) -> list[str]:
    """Items of a list written with top-level commas or "and"; ``a \\pm b`` counts as two."""
    parts = split_top_level(text, ",")
    if len(parts) == 1:
        parts = re.split(r"\s+and\s+", text)
    parts = [re.sub(r"^and\s+", "", part.strip()) for part in parts]
    if len(parts) > 1 and not all(parts):
        raise Unsupported("empty list item")
    if len(parts) > 1:
        parts = [item for part in parts for item in _plus_minus(part)]
    if len(parts) > MAX_ITEMS:
        raise Unsupported("too many items")
    return parts


def _item(text: str) -> Answer:
    """An element of a tuple, set, list or union, cleaned on its own (it may carry a unit)."""
    cleaned = normalize(text)
    if (match := _INFINITY.match(cleaned.text)) is not None:
        return Infinity(-1 if match.group(1) == "-" else 1)
    return _parse_shape(cleaned.text, cleaned)


def _scalar(text: str) -> Scalar:
    cleaned = normalize(text)
    return Scalar(
        parse_expression(cleaned.text), cleaned.percent, cleaned.degrees, cleaned.radians, cleaned.unit
    )


def _determinant(matrix: Matrix) -> Fraction:
    """``\\begin{vmatrix}...\\end{vmatrix}`` is a determinant; exact, by Gaussian elimination."""
    size = len(matrix.rows)
    if any(len(row) != size for row in matrix.rows):
        raise Unsupported("the determinant of a non-square matrix")
    rows = [[evaluate(cell.node) for cell in row] for row in matrix.rows]
    if not _all_exact(rows):
        raise Unsupported("a determinant with irrational entries")
    determinant = Fraction(1)
    for column in range(size):
        pivot = next((r for r in range(column, size) if rows[r][column] != 0), None)
        if pivot is None:
            return Fraction(0)
        if pivot != column:
            rows[column], rows[pivot] = rows[pivot], rows[column]
            determinant = -determinant
        determinant *= rows[column][column]
        for below in range(column + 1, size):
            factor = rows[below][column] / rows[column][column]
            rows[below] = [a - factor * b for a, b in zip(rows[below], rows[column], strict=True)]
    return determinant


def _all_exact(rows: list[list[Value]]) -> TypeGuard[list[list[Fraction]]]:
    return all(isinstance(value, Fraction) for row in rows for value in row)


def _numeric(node: Node) -> complex | None:
    try:
        return complex(evaluate(node))
    except (Unsupported, ZeroDivisionError, OverflowError, ValueError):
        return None


def _alternatives(text: str) -> tuple:
    """The parts of "a or b", parsed; empty when any part is not a plain answer."""
    alternatives = []
    for part in _HEDGE.split(text):
        try:
            parsed = _parse_shape(part.strip(), normalize(part.strip()))
        except (Unsupported, ValueError, ZeroDivisionError, OverflowError):
            return ()
        if not isinstance(parsed, Scalar | Equation):
            return ()
        alternatives.append(parsed)
    return tuple(alternatives)


def _equation(left: Node, right: Node, text: str) -> Answer:
    """``x = 5`` is an equation; ``7 - 5 = 2`` is the value 2, and ``100 = 2`` contradicts itself."""
    if variables(left) or variables(right):
        return Equation(left, right)
    left_value, right_value = _numeric(left), _numeric(right)
    if left_value is None or right_value is None:
        return Equation(left, right)
    if abs(left_value - right_value) > 1e-9 * max(1.0, abs(left_value)):
        return Hedged(text)
    return Scalar(right)


def _chain(sides: list[str]) -> Answer:
    """``x = 5+5+1 = 11``: every value in the chain must agree, and the last one is the answer;
    ``7 = 5 = 5`` contradicts itself."""
    nodes = [parse_expression(side) for side in sides]
    values = [_numeric(node) for node in (nodes if not variables(nodes[0]) else nodes[1:])]
    known = [value for value in values if value is not None]
    if any(abs(value - known[0]) > 1e-9 * max(1.0, abs(known[0])) for value in known[1:]):
        return Hedged("=".join(sides))
    if len(known) != len(values):
        raise Unsupported("chained equalities with unknowns")
    return Equation(nodes[0], nodes[-1]) if variables(nodes[0]) else Scalar(nodes[-1])


def _approximation(text: str, cleaned: Normalized) -> Answer:
    """``1/3 \\approx 0.33``: the exact part is the answer, if the approximations agree with it."""
    exact, *approximations = (part.strip() for part in text.split(r"\approx"))
    if re.fullmatch(r"[a-zA-Z]", exact) and len(approximations) == 1:
        # "x \approx 11" states the value 11, like "x = 11".
        return Equation(parse_expression(exact), parse_expression(approximations[0]))
    answer = _parse_shape(
        exact, Normalized(exact, cleaned.percent, cleaned.degrees, cleaned.radians, cleaned.unit)
    )
    node = (
        answer.right if isinstance(answer, Equation) else answer.node if isinstance(answer, Scalar) else None
    )
    value = None if node is None else _numeric(node)
    for approximation in approximations:
        approximate = _numeric(parse_expression(approximation))
        inconsistent = (
            value is not None
            and approximate is not None
            and (abs(approximate - value) > APPROXIMATION_TOLERANCE * max(abs(value), 1e-12))
        )
        if inconsistent:
            return Hedged(text)
    return answer


def _endpoint(text: str) -> tuple[Node | None, str | None]:
    """One side of an inequality: (bound or None for the variable, variable name or None)."""
    text = text.strip()
    if re.fullmatch(r"[a-zA-Z]", text):
        return None, text
    return parse_expression(text), None


def _inequality(text: str) -> Bracketed | None:
    """The interval described by ``a < x \\le b``, ``x \\ge a`` or ``b > x``; None if not one."""
    operators = _RELATION.findall(text)
    pieces = _RELATION.split(text)
    if len(pieces) not in (2, 3):
        return None
    try:
        sides = [_endpoint(piece) for piece in pieces]
    except Unsupported:
        return None
    names = [name for _, name in sides if name is not None]
    if len(names) != 1:
        return None
    if all(op in _GREATER for op in operators):
        sides, operators = sides[::-1], [{">": "<", ">=": "<="}[_GREATER[op]] for op in operators[::-1]]
    elif all(op in _LESS for op in operators):
        operators = [_LESS[op] for op in operators]
    else:
        return None
    low: Scalar | Infinity = Infinity(-1)
    high: Scalar | Infinity = Infinity(1)
    opening, closing = "(", ")"
    variable_at = next(index for index, (_, name) in enumerate(sides) if name is not None)
    before = sides[variable_at - 1][0] if variable_at > 0 else None
    after = sides[variable_at + 1][0] if variable_at < len(sides) - 1 else None
    if before is not None:
        low, opening = Scalar(before), "[" if operators[variable_at - 1] == "<=" else "("
    if after is not None:
        high, closing = Scalar(after), "]" if operators[variable_at] == "<=" else ")"
    return Bracketed(opening, closing, (low, high), from_inequality=True)


def _inequality_union(text: str) -> Union | None:
    """``x < 2 \\text{ or } x > 3`` is a union of intervals, not a hedge."""
    parts = [part.strip() for part in _HEDGE.split(text)]
    intervals = [_inequality(part) if _RELATION.search(part) else None for part in parts]
    return Union(tuple(intervals)) if all(intervals) else None
