"""The text answers are looked for in: what a reader reads, plus what is hidden from them.

A grader must not pay for what a reader would not take as the answer, and must not let hidden
text hide an answer either. So:

- invisible characters (zero-width spaces and joiners, bidirectional marks, soft hyphens) are
  dropped: ``\\box\u200bed{3}`` is read as the ``\\boxed{3}`` a reader sees;
- code is not a statement: closed fenced blocks and inline code spans are dropped (code and
  its printed output are working; a tool-integrated solution states its answer after them);
  an unclosed fence hides nothing;
- struck-out text (``~~10~~``) is read as struck out (``\\cancel{10}``), never as the value;
- text that renders invisible (``\\phantom{...}``, white text) is dropped: the reader sees what is
  around it, and so is a Markdown link's target and title; text a renderer may or may not hide
  (HTML comments, ``%`` lines) is kept: an answer stated there is still a statement, which can only
  make a completion a hedge;
- GSM8K's calculator annotations ``<<9*2=18>>`` are dropped (solutions written in that style
  state each result right after the annotation);
- Unicode mathematics becomes LaTeX: ``½`` is ``\\frac{1}{2}``, ``x²`` is ``x^{2}``, ``×`` is
  ``\\times``, full-width digits are digits.

Every step is a single pass over the text.
"""

from __future__ import annotations

import re

from rewardlab.rewards.fences import fenced_spans
from rewardlab.rewards.math.spans import braced

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
_ANNOTATION = re.compile(r"<<[^<>\n]{0,200}>>")
_INVISIBLE_GROUP = re.compile(
    r"\\(?:[hv]?phantom|textcolor\s*\{\s*white\s*\}|color\s*\{\s*white\s*\})\s*(?=\{)", re.IGNORECASE
)
# A Markdown link's target and title ("[text](url \"title\")"): not text a reader reads as prose.
_LINK_TARGET = re.compile(r"\]\([^()\n]{0,500}\)")
_INLINE_CODE = re.compile(r"`[^`\n]{1,500}`")
_STRUCK = re.compile(r"~~(?=[^~\s])([^~\n]{1,200})~~")

_VULGAR_FRACTIONS = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
    "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8),
    "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10),
}  # fmt: skip
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻]+")
_SYMBOLS = {
    "×": r"\times ", "÷": r"\div ", "·": r"\cdot ", "−": "-", "π": r"\pi ", "∞": r"\infty ",
    "≠": r"\neq ", "√": r"\sqrt ", "⁄": "/", "∕": "/",
}  # fmt: skip
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_ROOT_OF_DIGITS = re.compile(r"\\sqrt (\d+(?:\.\d+)?)")


def without_invisible(text: str) -> str:
    """``text`` without the characters a reader does not see (zero-width, bidirectional marks)."""
    return text if text.isascii() else _INVISIBLE.sub("", text)


def math_unicode(text: str) -> str:
    """Unicode mathematics as LaTeX (see the module docstring); invisible characters dropped."""
    if text.isascii():
        return text
    text = without_invisible(text)
    text = text.translate(_FULL_WIDTH)
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


def _without_invisible_groups(text: str) -> str:
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


def reader_text(text: str) -> str:
    """The completion as a reader sees it (see the module docstring)."""
    text = math_unicode(text)
    if "<<" in text:
        text = _ANNOTATION.sub("", text)
    if "```" in text or "~~~" in text:
        text = _without_fences(text)
    if "`" in text:
        text = _INLINE_CODE.sub(" ", text)
    if "](" in text:
        text = _LINK_TARGET.sub("]", text)
    if "phantom" in text or "white" in text:
        text = _without_invisible_groups(text)
    if "~~" in text:
        text = _STRUCK.sub(r"\\cancel{\1}", text)
    return text
