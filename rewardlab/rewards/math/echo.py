"""Restating the question is not answering it.

"Expand $(x+1)^2$." is not answered by "$(x+1)^2$", nor "Simplify $\\frac{6}{8}$." by
"$\\frac{6}{8}$", nor "Convert 12 feet to inches." by "12 feet", though each equals the
reference in value - the task was to transform it. A policy under RL learns to echo (docs/experiments.md:
"The answer is 17 - 7." for "What is 17 - 7?"); the arithmetic-left-undone rule stops that for
numeric references, and this one for the rest: an answer written exactly as an expression of the
question (the same tree once parsed: spacing, braces and ``\\dfrac`` do not matter), that is not
also written as the reference is, is an echo.

Not echoes: a plain integer or decimal (a question that gives "0.5" may be answered "0.5"), and
an answer written as the reference (a question may contain its own answer: "Which is larger,
$\\sqrt2+\\sqrt3$ or $\\sqrt{10}$?").
"""

from __future__ import annotations

import functools
import re

from rewardlab.rewards.math.answer import Answer, Equation, Scalar, parse_answer
from rewardlab.rewards.math.spans import math_spans
from rewardlab.rewards.math.units import UNITS

#: The question is read up to this many characters from its end (the task is stated last).
QUESTION_WINDOW = 8000
#: At most this many expressions of one question are parsed.
MAX_EXPRESSIONS = 64
_QUANTITY = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*("
    + "|".join(sorted(map(re.escape, (name for name in UNITS if len(name) > 2)), key=len, reverse=True))
    + r")(?![a-zA-Z])"
)


def _parsed(text: str) -> Answer | None:
    try:
        return parse_answer(text)
    except Exception:  # noqa: BLE001 - a question's expression that does not parse is no echo
        return None


@functools.lru_cache(maxsize=1024)
def question_forms(question: str) -> frozenset[Answer]:
    """The expressions a question writes (each math span, both sides of an equation in one)
    and the quantities with units it names in prose ("12 feet"), parsed."""
    text = question[-QUESTION_WINDOW:]
    forms: set[Answer] = set()
    for span in math_spans(text)[:MAX_EXPRESSIONS]:
        parsed = _parsed(span.content)
        if isinstance(parsed, Scalar):
            forms.add(parsed)
        elif isinstance(parsed, Equation):
            forms.add(parsed)
            forms.update((Scalar(parsed.left), Scalar(parsed.right)))
    for match in list(_QUANTITY.finditer(text))[:MAX_EXPRESSIONS]:
        parsed = _parsed(f"{match.group(1)} {match.group(2)}")
        if isinstance(parsed, Scalar):
            forms.add(parsed)
    return frozenset(forms)


def _plain_numeral(answer: Answer) -> bool:
    return isinstance(answer, Scalar) and answer.unit is None and answer.node[0] == "num"


def echoes_question(question: str, gold: Answer, predicted: Answer) -> bool:
    """Whether ``predicted`` restates an expression of ``question`` that ``gold`` is not written as
    (see the module docstring). Call it only for an answer already equal to ``gold`` in value."""
    if not question or not isinstance(predicted, Scalar | Equation):
        return False
    if predicted == gold or _plain_numeral(predicted):
        return False
    # "12 feet" for "144 inches" is the question's quantity in its own unit; "12 feet" for a
    # reference without a unit, or in feet, is not an echo.
    if isinstance(predicted, Scalar) and predicted.unit is not None:
        unit = gold.unit if isinstance(gold, Scalar) else None
        if unit is None or unit == predicted.unit:
            return False
    return predicted in question_forms(question)
