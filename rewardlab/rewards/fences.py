"""Where fenced code blocks are in model text: one linear pass over the lines.

A block opens with a line that starts (after at most three spaces) with three or more backticks
or tildes and closes at the next line made of the same character, at least as many of it, and
nothing else. A fence that never closes opens no block: the text after it stays text, so an
unclosed fence cannot hide what follows it from a grader.
"""

from __future__ import annotations

import bisect
import math
import re

_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})", re.MULTILINE)


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every closed fenced block, fences included, in order."""
    spans: list[tuple[int, int]] = []
    opening: re.Match[str] | None = None
    for match in _FENCE_LINE.finditer(text):
        fence = match.group(1)
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end == -1 else line_end
        alone = not text[match.end() : line_end].strip()
        if opening is None:
            opening = match
        elif fence[0] == opening.group(1)[0] and len(fence) >= len(opening.group(1)) and alone:
            spans.append((opening.start(), line_end))
            opening = None
    return spans


def inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether ``position`` falls inside one of ``spans`` (sorted, not overlapping)."""
    index = bisect.bisect_right(spans, (position, math.inf)) - 1
    return index >= 0 and spans[index][0] <= position < spans[index][1]
