"""Is a box a statement on its own? Not when it is struck out, and not when it is an operand.

A reader reads the mathematics around a box with it: ``$-\\boxed{10}$`` says -10,
``$x \\neq \\boxed{10}$`` says x is not 10, ``$\\frac{1}{\\boxed{10}}$`` says a tenth,
``$\\boxed{1}00$`` says 100, and ``~~\\boxed{10}~~`` says nothing at all. A grader that reads only
the box content pays all of them as 10 (a red-team review did exactly that). So a box counts
only when what touches it is what an answer is written with: an ``=`` or ``:`` before it, a
formatting command or a bare group around it, prose, punctuation, a unit or a degree sign after
it. Anything else that touches it - a sign, an operator, a relation, a digit, a command that
takes it as an argument (``\\sqrt``, ``\\frac``, ``^``) - makes it an operand, and the completion
then states no answer by it.

Inside mathematics every symbol counts. Outside it, Markdown is written with the same symbols
(``**\\boxed{5}**``, ``- \\boxed{5}`` as a bullet, ``_\\boxed{5}_``), so only a sign or a relation
right before the box and a digit, an operator followed by a number, or a ``^`` right after it
count there.

Every check looks a bounded distance around one box.
"""

from __future__ import annotations

import re

from rewardlab.rewards.math.spans import MAX_GROUP_CHARS, Span, braced

#: How far around a box its neighbours are looked for.
LOOK_AROUND = 80

_STRIKE = re.compile(r"\\(?:cancel|bcancel|xcancel|sout|st|cancelto\s*\{[^{}]{0,40}\})\s*(?=\{)")
# Spacing that separates nothing: skipped when looking for a box's neighbours.
_SPACING_BEFORE = re.compile(r"(?:\s|\\[,;:! ]|\\q?quad|~|\\(?:displaystyle|large|Large|LARGE|huge|Huge))+$")
_LONGEST_SPACING = len("\\displaystyle") + 1
_SPACING_AFTER = re.compile(r"(?:\s|\\[,;:! ]|\\q?quad(?![a-zA-Z])|~)+")
# What may come right before a box: the end of an equation or a label, an implication, a list
# separator, an opening bracket or delimiter, an alignment mark or a row break.
_ALLOWED_BEFORE = re.compile(
    r"(?:=|:|,|;|\.|\(|\[|&|\$|\\\(|\\\[|\\\\|\\(?:Rightarrow|Longrightarrow|implies|therefore|to|"
    r"rightarrow|longrightarrow|approx|equiv|in|text\s*\{[^{}]*\}|textbf\s*\{[^{}]*\}|mathrm\s*\{[^{}]*\}))$"
)
# Commands whose argument a box may be: formatting, never arithmetic.
_FORMATTING = re.compile(
    r"\\(?:boxed|fbox|mathbf|textbf|bf|bm|boldsymbol|mathrm|text|textrm|textit|mathit|emph|"
    r"underline|large|Large|LARGE|huge|Huge|displaystyle|mbox|hbox|color\s*\{[^{}]*\}|"
    r"textcolor\s*\{[^{}]*\}|colorbox\s*\{[^{}]*\}|fcolorbox\s*\{[^{}]*\}\s*\{[^{}]*\})\s*$"
)
_SIGN_OR_RELATION = re.compile(
    r"(?:[-+±∓−<>≤≥≠]|\\(?:pm|mp|neq?|[lg]eq?q?|[lg]t|not|cdot|times|div|sqrt|ast))$"
)
_BULLET = re.compile(r"(?:^|\n)[ \t]*[-+*][ \t]*$")
_TAG = re.compile(r"<[a-zA-Z/!][^<>]{0,60}>$")
_OPERATOR_AFTER = re.compile(
    r"[-+*/^_!|<>≤≥≠\d]|\\(?:pm|mp|neq?|[lg]eq?q?|[lg]t|cdot|times|div|ast|[dt]?frac|sqrt)(?![a-zA-Z])"
)
#: Glued to a box inside mathematics, a letter or a bracket multiplies it or applies it.
_GLUED_AFTER = re.compile(r"[A-Za-z(\[]")
_PROSE_OPERATOR_AFTER = re.compile(
    r"\d|\^|[-+*/][ \t]*[\d\\(]|\\(?:cdot|times|div|[dt]?frac|sqrt)(?![a-zA-Z])"
)
# "$\\boxed{10}$^{2}" (an HTML superscript after the math): the box is a base.
_POWER_AFTER_DELIMITER = re.compile(r"(?:\$|\\\))\^(?!\s*\{?\s*\\circ)")
_DEGREES_AFTER = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\%|%|\\degree(?![a-zA-Z])")


def struck_spans(text: str) -> list[tuple[int, int]]:
    """Where struck-out groups (``\\cancel{...}``, ``\\sout{...}``, ...; ``~~x~~`` arrives as
    ``\\cancel{x}``) lie in ``text``, in order."""
    found: list[tuple[int, int]] = []
    for match in _STRIKE.finditer(text):
        if found and match.start() < found[-1][1]:
            continue  # inside a strike already found
        group = braced(text, match.end())
        if group is not None:
            found.append((match.start(), group.end))
    return found


def operand_of_expression(text: str, box: Span, in_math: bool) -> str | None:
    """Why the box at ``box`` is part of an expression rather than an answer, or None when it
    stands on its own (see the module docstring). ``in_math``: the box is inside a math span.
    A box cut off before its closing brace has no neighbour after it (it is refused as too long)."""
    if box.end - box.start >= MAX_GROUP_CHARS:
        return None
    window = text[max(0, box.start - LOOK_AROUND) : box.start]
    before = _without_trailing_spacing(window)
    # A line break ends what touches a box: "4 + 6 = 10\n\\boxed{10}" is a new line.
    reason = None if "\n" in window[len(before) :] else _before(before, in_math)
    if reason is not None:
        return reason
    after = text[box.end : box.end + LOOK_AROUND]
    spacing = _SPACING_AFTER.match(after)
    if spacing is not None and "\n" in spacing.group():
        return None
    glued = spacing is None
    after = after[spacing.end() :] if spacing else after
    if _DEGREES_AFTER.match(after):
        return None
    if _POWER_AFTER_DELIMITER.match(after):
        return "the box is raised to a power after its delimiter"
    if in_math:
        operator = _OPERATOR_AFTER.match(after) or (_GLUED_AFTER.match(after) if glued else None)
        if operator is not None:
            return f"the box is followed by {operator.group()!r}"
    elif (operator := _PROSE_OPERATOR_AFTER.match(after)) is not None and (glued or not after[0].isdigit()):
        return f"the box is followed by {operator.group()!r}"
    return None


def _without_trailing_spacing(text: str) -> str:
    """``text`` without the spacing that ends it. The pattern is tried on a growing tail: a search
    of the whole text tries it at every position. A run found within a token's length of the
    tail's start may begin further back, so the tail grows until it does not."""
    size = 32
    while True:
        start = max(0, len(text) - size)
        spacing = _SPACING_BEFORE.search(text, start)
        if spacing is None:
            return text
        if start == 0 or spacing.start() >= start + _LONGEST_SPACING:
            return text[: spacing.start()]
        size *= 4


def _before(before: str, in_math: bool) -> str | None:
    if not before or _ALLOWED_BEFORE.search(before):
        return None
    if before.endswith("{"):
        owner = _without_trailing_spacing(before[:-1])
        if not owner or (not owner.endswith(("}", "_", "^")) and not re.search(r"\\[a-zA-Z]+\s*$", owner)):
            return None  # a bare group: "{\\boxed{5}}"
        if _FORMATTING.search(owner):
            return None
        return f"the box is an argument of {owner[-20:].strip()!r}"
    if _SIGN_OR_RELATION.search(before):
        if not in_math and (_BULLET.search(before) or _TAG.search(before)):
            return None  # "- \\boxed{5}": a bullet; "<b>\\boxed{5}": a tag
        return f"the box follows {before[-12:].strip()!r}"
    if in_math and (before[-1].isalnum() or before[-1] in "})|!^_'"):
        return f"the box is multiplied by or glued to {before[-12:].strip()!r}"
    if not in_math and before[-1].isdigit():
        return f"the box is glued to {before[-12:].strip()!r}"
    return None
