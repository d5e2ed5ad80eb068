"""What a reader sees of a completion, before any answer is looked for in it.

A grader must read the text the way a person reading the rendered answer does, or a policy learns
to write for the grader alone:

- invisible characters (zero-width spaces and joiners, bidirectional marks, soft hyphens) are
  dropped: ``\\box\u200bed{3}`` is read as the ``\\boxed{3}`` a reader sees;
- HTML comments and whole-line LaTeX comments are dropped: a box no reader sees is no answer;
- fenced code blocks are dropped: code and its printed output are working, not the answer
  (a tool-integrated solution states its answer after the output);
- GSM8K's calculator annotations ``<<9*2=18>>`` are dropped (solutions written in that style
  state each result right after the annotation);
- Unicode mathematics becomes LaTeX: ``½`` is ``\\frac{1}{2}``, ``x²`` is ``x^{2}``, ``×`` is
  ``\\times``, full-width digits are digits.

Every step is a single pass over the text.
"""

from __future__ import annotations

import re

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_LATEX_COMMENT_LINE = re.compile(r"^[ \t]*(?<!\\)%[^\n]*\n?", re.MULTILINE)
_ANNOTATION = re.compile(r"<<[^<>\n]{0,200}>>")
_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})", re.MULTILINE)

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


def math_unicode(text: str) -> str:
    """Unicode mathematics as LaTeX (see the module docstring); invisible characters dropped."""
    if text.isascii():
        return text
    text = _INVISIBLE.sub("", text)
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
    """``text`` without fenced code blocks; a fence that never closes hides the rest."""
    pieces, cursor, opening = [], 0, None
    for match in _FENCE_LINE.finditer(text):
        fence = match.group(1)
        if opening is None:
            pieces.append(text[cursor : match.start()])
            opening = fence
        elif fence[0] == opening[0] and len(fence) >= len(opening):
            line_end = text.find("\n", match.end())
            if text[match.end() : len(text) if line_end == -1 else line_end].strip():
                continue  # a closing fence stands alone on its line
            cursor = len(text) if line_end == -1 else line_end + 1
            opening = None
    if opening is None:
        pieces.append(text[cursor:])
    return "".join(pieces)


def reader_text(text: str) -> str:
    """The completion as a reader sees it (see the module docstring)."""
    text = math_unicode(text)
    if "<!--" in text:
        text = _HTML_COMMENT.sub(" ", text)
    if "%" in text:
        text = _LATEX_COMMENT_LINE.sub("", text)
    if "<<" in text:
        text = _ANNOTATION.sub("", text)
    if "```" in text or "~~~" in text:
        text = _without_fences(text)
    return text
