"""Fenced code blocks in model text, found in one linear pass over the lines.

One definition serves code extraction (`code_execution` runs a block) and answer reading (a box
in a code block is code, not an answer; a marker in one is not structure).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FencedBlock:
    """A closed fenced block: ``start``/``end`` span its opening and closing fence lines."""

    start: int
    end: int
    info: str
    body: str


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced block, in order.

    A block opens with a line that starts with a fence - three or more backticks, or three or
    more tildes - followed by an info string without backticks (``"```python sol.py"``), and
    closes at the next line that is the same fence again and nothing else but spaces or tabs.
    A tilde fence that is never closed at its written length may close at a shorter one, the
    remaining tildes joining the info string (``"~~~~ x"`` is closed by ``"~~~"`` when no
    ``"~~~~"`` follows). A block that never closes is no block; lines inside it may open others.

    One pass over the lines, then each opening line looks up the next closing line of its fence
    in an index: linear in the text, where a lazy regular expression searching for the closing
    fence from every opening line was quadratic in the number of unclosed fences.
    """
    lines = text.split("\n")
    starts, position = [], 0
    for line in lines:
        starts.append(position)
        position += len(line) + 1
    # Each line that is a fence and nothing else (trailing spaces and tabs aside) closes exactly
    # that fence: its character and its full length.
    runs = [_fence_run(line) for line in lines]
    closers: dict[tuple[str, int], list[int]] = defaultdict(list)
    for index, (char, length) in enumerate(runs):
        if length and not lines[index][length:].strip(" \t"):
            closers[char, length].append(index)
    cursor: dict[tuple[str, int], int] = defaultdict(int)
    blocks: list[FencedBlock] = []
    index = 0
    # The last line has no line break after it, so it cannot open a block.
    while index < len(lines) - 1:
        char, length = runs[index]
        line = lines[index]
        closing = None
        if length and "`" not in line[length:]:
            # A backtick fence is read at its whole length (a shorter one would leave a backtick
            # in the info string); a tilde fence at the longest length that is closed later.
            for size in range(length, 2 if char == "~" else length - 1, -1):
                found = closers.get((char, size))
                if not found:
                    continue
                at = cursor[char, size]
                while at < len(found) and found[at] <= index:
                    at += 1
                cursor[char, size] = at
                if at < len(found):
                    closing, length = found[at], size
                    break
        if closing is None:
            index += 1
            continue
        body_start = starts[index] + len(line) + 1
        end = starts[closing] + len(lines[closing])
        blocks.append(
            FencedBlock(starts[index], end, line[length:].strip(), text[body_start : starts[closing]])
        )
        index = closing + 1
    return blocks


def _fence_run(line: str) -> tuple[str, int]:
    """The fence character a line starts with and how many of it (0 when fewer than three)."""
    if not line or line[0] not in "`~":
        return "", 0
    length = len(line) - len(line.lstrip(line[0]))
    return (line[0], length) if length >= 3 else ("", 0)


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every closed fenced block, fences included, in order."""
    return [(block.start, block.end) for block in fenced_blocks(text)]


def inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether ``position`` falls inside one of ``spans`` (sorted, not overlapping)."""
    index = bisect.bisect_right(spans, (position, math.inf)) - 1
    return index >= 0 and spans[index][0] <= position < spans[index][1]
