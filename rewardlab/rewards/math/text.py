"""The text answers are looked for in: what a reader reads, plus what is hidden from them.

A grader must not pay for what a reader would not take as the answer, and must not let hidden
text hide an answer either. So:

- invisible characters (zero-width spaces and joiners, bidirectional marks, soft hyphens) are
  dropped: ``\\box\u200bed{3}`` is read as the ``\\boxed{3}`` a reader sees;
- code is not a statement: closed fenced blocks and inline code spans are dropped (code and
  its printed output are working; a tool-integrated solution states its answer after them).
  Both are found as CommonMark finds them (`rewardlab.rewards.fences`; an inline span closes
  at a run of as many backticks, and an escaped backtick opens none), so no text a reader sees
  as prose is dropped as code; an unclosed fence hides nothing;
- struck-out text (``~~10~~``, ``<s>``, ``<del>``, ``<strike>``) is read as struck out
  (``\\cancel{10}``), never as the value;
- what renders invisible is dropped: ``\\phantom{...}`` and white text, and what markup hides
  (`rewardlab.rewards.markup`: HTML comments, elements that never render or are styled invisible,
  tag attributes, images, the target and title of a well-formed Markdown link, a ``%`` comment
  inside mathematics); ``[note](Actually it is 7)`` is no link and renders as written, and a
  ``%`` outside mathematics is a character; a right-to-left override is read as it is shown;
- GSM8K's calculator annotations ``<<9*2=18>>`` are dropped (solutions written in that style
  state each result right after the annotation); only arithmetic ending in its number is one;
- Unicode mathematics becomes LaTeX: ``½`` is ``\\frac{1}{2}``, ``x²`` is ``x^{2}``, ``×`` is
  ``\\times``, full-width digits are digits.

Every step is a single pass over the text.
"""

from __future__ import annotations

import re

from rewardlab.rewards.fences import fenced_spans
from rewardlab.rewards.markup import (
    visual_order,
    without_code_elements,
    without_math_comments,
    without_unseen_markup,
)
from rewardlab.rewards.math.spans import braced

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u2060-\u2064\u206a-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
# Arithmetic ending in its result; any other "<<...>>" is text (read after `math_unicode`,
# which has written "×" as "\\times").
_ANNOTATION = re.compile(r"<<(?:[\d\s.+\-*/()^%,x]|\\(?:times|div|cdot) ?){1,200}=\s*-?[\d.,]+(?:/\d+)?\s*>>")
_WHITE = (
    r"\{\s*(?:white|transparent|#?f{3}(?:f{3})?|1\s*,\s*1\s*,\s*1"
    r"|(?:rgb\s*\(\s*)?255\s*,\s*255\s*,\s*255\s*\)?)\s*\}"
)
_INVISIBLE_GROUP = re.compile(
    rf"\\(?:[hv]?phantom|textcolor\s*(?:\[[a-zA-Z]*\])?\s*{_WHITE}|color\s*(?:\[[a-zA-Z]*\])?\s*{_WHITE})\s*(?=\{{)",
    re.IGNORECASE,
)
_STRUCK = re.compile(r"~~(?=[^~\s])([^~\n]{1,200})~~|<(s|del|strike)>([^<>]{1,200})</\2>")
#: An inline code span is at most this long (CommonMark sets no limit; no real one is longer).
MAX_INLINE_CODE = 500
_BLANK_LINE = re.compile(r"\n[ \t]*\n")

_VULGAR_FRACTIONS = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
    "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8),
    "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10),
}  # fmt: skip
#: The vulgar fractions with a finite decimal, as the digits after the point.
_DECIMAL_PARTS = {"½": ".5", "¼": ".25", "¾": ".75", "⅕": ".2", "⅖": ".4", "⅗": ".6", "⅘": ".8", "⅛": ".125",
                  "⅜": ".375", "⅝": ".625", "⅞": ".875", "⅒": ".1"}  # fmt: skip
_MIXED_DECIMAL = re.compile("(\\d)([" + "".join(_DECIMAL_PARTS) + "])")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻]+")
_SYMBOLS = {
    "×": r"\times ", "÷": r"\div ", "·": r"\cdot ", "−": "-", "π": r"\pi ", "∞": r"\infty ",
    "≠": r"\neq ", "√": r"\sqrt ", "⁄": "/", "∕": "/",
}  # fmt: skip
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
# str.translate looks every character up in the table (about 0.1 µs each, 1 ms on a long
# completion); only the runs of full-width forms are translated.
_FULL_WIDTH_RUN = re.compile("[\uff01-\uff5e]+")
_ROOT_OF_DIGITS = re.compile(r"\\sqrt (\d+(?:\.\d+)?)")


def without_invisible(text: str) -> str:
    """``text`` without the characters a reader does not see (zero-width, bidirectional marks),
    in the order a reader sees it (`markup.visual_order`: an override is read reversed, as shown)."""
    return text if text.isascii() else _INVISIBLE.sub("", visual_order(text))


def math_unicode(text: str) -> str:
    """Unicode mathematics as LaTeX (see the module docstring); invisible characters dropped."""
    if text.isascii():
        return text
    text = without_invisible(text)
    text = _FULL_WIDTH_RUN.sub(lambda run: run.group().translate(_FULL_WIDTH), text)
    if _MIXED_DECIMAL.search(text):
        # "2½" is 2.5: a mixed number read as one value even in prose, where "2\frac{1}{2}" is not.
        text = _MIXED_DECIMAL.sub(lambda m: m.group(1) + _DECIMAL_PARTS[m.group(2)], text)
    for char, (numerator, denominator) in _VULGAR_FRACTIONS.items():
        if char in text:
            text = text.replace(char, rf"\frac{{{numerator}}}{{{denominator}}}")
    text = _SUPERSCRIPT_RUN.sub(lambda run: "^{" + run.group().translate(_SUPERSCRIPTS) + "}", text)
    for char, latex in _SYMBOLS.items():
        if char in text:
            text = text.replace(char, latex)
    return _ROOT_OF_DIGITS.sub(r"\\sqrt{\1}", text)


def _without_fences(text: str) -> str:
    """``text`` without its closed fenced code blocks."""
    pieces, cursor = [], 0
    for start, end in fenced_spans(text):
        pieces.append(text[cursor:start])
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def without_invisible_groups(text: str) -> str:
    """``text`` without the brace groups that render invisible (``\\phantom{...}``, white text)."""
    pieces, cursor = [], 0
    for match in _INVISIBLE_GROUP.finditer(text):
        if match.start() < cursor:
            continue
        group = braced(text, match.end())
        if group is None:
            continue
        pieces.append(text[cursor : match.start()])
        cursor = group.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _without_inline_code(text: str) -> str:
    """``text`` without its inline code spans, found as CommonMark finds them: a run of backticks
    not escaped by a backslash opens a span that the next run of exactly as many backticks
    closes, within one paragraph. One pass over the backtick runs: each run length keeps a
    queue of where runs of that length occur."""
    runs = [(match.start(), match.end()) for match in re.finditer(r"`+", text)]
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    cursors = dict.fromkeys(by_length, 0)
    pieces, cursor, index = [], 0, 0
    while index < len(runs):
        start, end = runs[index]
        length = end - start
        escaped = start > 0 and text[start - 1] == "\\"
        same = by_length[length]
        at = cursors[length]
        while at < len(same) and same[at] <= index:
            at += 1
        cursors[length] = at
        closing = same[at] if at < len(same) and not escaped else None
        if closing is not None:
            close_start, close_end = runs[closing]
            body = text[end:close_start]
            if len(body) <= MAX_INLINE_CODE and not _BLANK_LINE.search(body):
                pieces.append(text[cursor:start])
                pieces.append(" ")
                cursor = close_end
                index = closing + 1
                continue
        index += 1
    pieces.append(text[cursor:])
    return "".join(pieces)


def _struck(match: re.Match[str]) -> str:
    return "\\cancel{" + (match.group(1) if match.group(1) is not None else match.group(3)) + "}"


def reader_text(text: str) -> str:
    """The completion as a reader sees it (see the module docstring)."""
    text = math_unicode(text)
    if "<<" in text:
        text = _ANNOTATION.sub("", text)
    if "```" in text or "~~~" in text:
        text = _without_fences(text)
    if "`" in text:
        text = _without_inline_code(text)
    if "~~" in text or "</" in text:
        text = _STRUCK.sub(_struck, text)
    text = without_unseen_markup(without_math_comments(without_code_elements(text)))
    if "phantom" in text or "color" in text:
        text = without_invisible_groups(text)
    return text
