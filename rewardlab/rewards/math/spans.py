"""Brace groups, boxes and math spans in model text, found by linear scans.

Why scanners and not regular expressions: a lazy ``\\$(.+?)\\$`` restarted at every dollar sign is
quadratic on text full of unmatched dollars, and completions are written by a policy that finds
such things. Every function here visits each character a bounded number of times.

Math spans follow pandoc's rule for ``$``, because models write money in prose: a closing ``$``
has a non-space character right before it (unless the span opened with a space, ``$ 9 $``) and
no digit right after it. So in "Janet makes 9 * $2 = $18 every day." there is no math, while
``$x = 3$`` and ``$18$`` are math. Inline math does not run over a blank line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

#: No answer is longer; a scan for a closing brace or delimiter stops after this many characters,
#: so that text full of unclosed openers costs linear time.
MAX_GROUP_CHARS = 4096
# \bbox[options]{...} is MathJax's box.
_BOX = re.compile(r"\\(?:boxed|fbox|framebox|bbox(?:\[[^\[\]{}]{0,60}\])?)(?![a-zA-Z])\s*")
_BARE_BOX_ARGUMENT = re.compile(r"[^\s$]{1,64}")
_BRACE_OR_ESCAPE = re.compile(r"[{}\\]")
_PLACEHOLDER = re.compile(r"(?:\\phantom\{[^{}]{0,64}\}|\\quad|\\;|\s)*")


@dataclass(frozen=True, slots=True)
class Span:
    """A delimited piece of text: ``start``/``end`` include the delimiters, ``content`` does not."""

    start: int
    end: int
    content: str


def braced(text: str, start: int) -> Span | None:
    """The brace group opening at ``start`` (nested braces balanced, ``\\{`` and ``\\}`` skipped).

    None when there is no group there or the text ends before it closes. A group still open
    after `MAX_GROUP_CHARS` is cut there: no answer is that long, and the cut content is
    refused as too long by whoever reads it.
    """
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    skip_to = start
    for match in _BRACE_OR_ESCAPE.finditer(text, start, min(len(text), start + MAX_GROUP_CHARS)):
        if match.start() < skip_to:
            continue  # the character after a backslash
        char = match.group()
        if char == "\\":
            skip_to = match.start() + 2
        elif char == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return Span(start, match.end(), text[start + 1 : match.start()])
    limit = start + MAX_GROUP_CHARS
    return Span(start, limit, text[start + 1 : limit]) if limit < len(text) else None


def box_count(text: str) -> int:
    """How many boxes the text opens (a cheap count, to refuse a flood before scanning it)."""
    return text.count("\\boxed") + text.count("\\fbox") + text.count("\\framebox") + text.count("\\bbox")


def boxes(text: str) -> list[Span]:
    """Every ``\\boxed{...}`` / ``\\fbox{...}`` with its content; ``\\boxed 5`` (no braces) boxes
    "5". A box cut off before its closing brace, or one holding only spacing, holds no answer."""
    found = []
    for match in _BOX.finditer(text):
        group = braced(text, match.end())
        if group is None:
            if text.startswith("{", match.end()):
                continue
            bare = _BARE_BOX_ARGUMENT.match(text, match.end())
            if bare is None:
                continue
            group = Span(match.end(), bare.end(), bare.group())
        if not _PLACEHOLDER.fullmatch(group.content):
            found.append(Span(match.start(), group.end, group.content.strip()))
    return found


def _positions(text: str, needle: str) -> list[int]:
    found, start = [], text.find(needle)
    while start != -1:
        found.append(start)
        start = text.find(needle, start + len(needle))
    return found


def _escaped(text: str, index: int) -> bool:
    """Whether the character at ``index`` follows an odd run of backslashes."""
    count = 0
    while index - count - 1 >= 0 and text[index - count - 1] == "\\" and count < 64:
        count += 1
    return count % 2 == 1


class _Closers:
    """Sorted positions of one closing delimiter, found on first use and searched by bisection."""

    def __init__(self, text: str, needle: str):
        self.text, self.needle = text, needle
        self._positions: list[int] | None = None

    def after(self, index: int, limit: int, count: int) -> list[int]:
        """The first ``count`` positions in ``[index, limit]``."""
        if self._positions is None:
            self._positions = _positions(self.text, self.needle)
        start = bisect.bisect_left(self._positions, index)
        stop = min(bisect.bisect_right(self._positions, limit), start + count)
        return self._positions[start:stop]


#: What can open a span, and the backslash escapes to step over (``\\$`` is a dollar sign).
_OPENER = re.compile(r"\\[(\[]|\\.|\$\$|\$", re.DOTALL)


def math_spans(text: str) -> list[Span]:
    """Every math span (``$$...$$``, ``$...$``, ``\\(...\\)``, ``\\[...\\]``), in order, not nested.

    The scan jumps from one possible opener to the next (a regular expression finds them), so
    plain prose costs next to nothing; the closers of each kind are collected once, on first use.
    """
    if "$" not in text and "\\(" not in text and "\\[" not in text:
        return []
    closers = {
        "$$": _Closers(text, "$$"),
        "$": _Closers(text, "$"),
        "\\(": _Closers(text, "\\)"),
        "\\[": _Closers(text, "\\]"),
    }
    blank_lines = _Closers(text, "\n\n")
    spans: list[Span] = []
    cursor = 0
    for match in _OPENER.finditer(text):
        opener, index = match.group(), match.start()
        if index < cursor or opener not in closers:
            continue  # inside a span already found, or an escaped character
        if opener == "$":
            paragraph_end = next(iter(blank_lines.after(index, len(text), 1)), len(text))
            limit = min(paragraph_end, index + MAX_GROUP_CHARS)
            spaced = index + 1 < len(text) and text[index + 1].isspace()
            accept = _spaced_inline_closer if spaced else _inline_closer
            span = _first_closed(text, index, 1, closers["$"], accept=accept, limit=limit)
        else:
            span = _first_closed(text, index, 2, closers[opener], accept=_unescaped_closer)
        if span is not None:
            spans.append(span)
            cursor = span.end
    return spans


def _unescaped_closer(text: str, position: int, opening_end: int) -> bool:
    return position >= opening_end and not _escaped(text, position)


def _inline_closer(text: str, position: int, opening_end: int) -> bool:
    """Pandoc's closing ``$``: after the content, not escaped, not part of ``$$``, a non-space
    before it and no digit after it."""
    return (
        position > opening_end
        and not text[position - 1].isspace()
        and not _escaped(text, position)
        and not text.startswith("$$", position)
        and text[position - 1] != "$"
        and not (position + 1 < len(text) and text[position + 1].isdigit())
    )


def _spaced_inline_closer(text: str, position: int, opening_end: int) -> bool:
    """The closing ``$`` of a span that opens with a space (``$ 9 $``): a space may precede it."""
    return (
        position > opening_end
        and bool(text[opening_end:position].strip())
        and not _escaped(text, position)
        and not text.startswith("$$", position)
        and not (position + 1 < len(text) and text[position + 1].isdigit())
    )


#: How many candidate closers one opener looks at before it is taken as a literal character.
_MAX_CANDIDATES = 16


def _first_closed(
    text: str,
    start: int,
    width: int,
    closers: _Closers,
    *,
    accept: Callable[[str, int, int], bool],
    limit: int | None = None,
) -> Span | None:
    opening_end = start + width
    limit = min(len(text), start + MAX_GROUP_CHARS) if limit is None else limit
    for position in closers.after(opening_end, limit, _MAX_CANDIDATES):
        if accept(text, position, opening_end):
            closing_width = width if text[position] != "\\" else 2
            return Span(start, position + closing_width, text[opening_end:position].strip())
    return None


def mask_math(text: str) -> str:
    """``text`` with every math span replaced by ``#`` characters of the same length, so that
    words and positions outside math can be read without the math's own symbols."""
    pieces, cursor = [], 0
    for span in math_spans(text):
        pieces.append(text[cursor : span.start])
        pieces.append("#" * (span.end - span.start))
        cursor = span.end
    pieces.append(text[cursor:])
    return "".join(pieces)
