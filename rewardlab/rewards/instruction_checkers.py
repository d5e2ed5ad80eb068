"""Linear-time versions of five if-verifiable checkers that take quadratic time on some responses.

Each gives exactly the result of the reference checker it replaces (the tests compare the two on
random text), in one pass over the text instead of a pattern retried at every position or a list
shrunk one element at a time:

- IFEval ``detectable_content:number_placeholders``: ``re.findall(r"\\[.*?\\]", value)`` scans to
  the end of the line from every ``[``: 16 s on 40 kB of ``[``.
- IFEval ``detectable_format:title``: ``<<[^\\n]+>>`` backtracks from every ``<<``: 1.5 s on 40 kB.
- IFEval ``detectable_content:postscript``: ``\\s*p\\.\\s?s\\..*$`` retried at every position of a
  run of spaces: 3.8 s on 40 kB.
- IFBench ``format:line_indent`` and ``format:newline``: ``list.remove`` in a loop over the
  lines: 4.9 s and 2.1 s on 40 kB of blank lines.

`install` puts them in place of the reference methods when the registries are loaded.
"""

from __future__ import annotations

import itertools
import re
import string
from collections import defaultdict, deque
from typing import Any

_PUNCTUATION = str.maketrans("", "", string.punctuation)


def count_placeholders(value: str) -> int:
    """How many ``[...]`` placeholders ``re.findall(r"\\[.*?\\]", value)`` finds: on each line, from
    the first ``[`` to the first ``]`` after it, again after that ``]``; a ``[`` with no ``]``
    after it on its line ends the line's count."""
    count = 0
    for line in value.split("\n"):
        position = line.find("[")
        while position != -1:
            closing = line.find("]", position + 1)
            if closing == -1:
                break
            count += 1
            position = line.find("[", closing + 1)
    return count


def has_title(value: str) -> bool:
    """Whether ``<<[^\\n]+>>`` finds a title with text in it: the greedy match on a line runs from
    its first ``<<`` to its last ``>>`` (at least one character between), once per line."""
    for line in value.split("\n"):
        start, end = line.find("<<"), line.rfind(">>")
        if start != -1 and end >= start + 3 and line[start : end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


def _placeholders(self: Any, value: str) -> bool:
    return count_placeholders(value) >= self._num_placeholders


def _title(self: Any, value: str) -> bool:
    return has_title(value)


def _postscript(self: Any, value: str) -> bool:
    # "\s*MARKER.*$" matches somewhere exactly when MARKER does: the leading \s* may be empty and
    # ".*$" always reaches the end of the line.
    value = value.lower()
    if self._postscript_marker == "P.P.S":
        marker = r"p\.\s?p\.\s?s"
    elif self._postscript_marker == "P.S.":
        marker = r"p\.\s?s\."
    else:
        marker = self._postscript_marker.lower()
    return re.search(marker, value) is not None


def reference_blank_removal(lines: list[str]) -> list[str]:
    """What is left of ``lines`` after the reference's loop::

        for line in lines:
            if not line.strip():
                lines.remove(line)

    Each ``remove`` takes out the *first* line equal to the blank one (which may be an earlier
    blank it skipped), and the iteration then skips the line after. Simulated exactly, with a
    Fenwick tree over the lines still there to find the n-th one in logarithmic time.
    """
    size = len(lines)
    tree = [0] * (size + 1)
    for index in range(1, size + 1):  # every line present: a tree of ones, built in linear time
        tree[index] += 1
        parent = index + (index & -index)
        if parent <= size:
            tree[parent] += tree[index]
    waiting: dict[str, deque[int]] = defaultdict(deque)  # blank value -> its lines still there
    for index, line in enumerate(lines):
        if not line.strip():
            waiting[line].append(index)
    removed = [False] * size
    present, position = size, 0
    while position < present:
        line = lines[_nth_present(tree, size, position)]
        if not line.strip():
            first = waiting[line].popleft()
            removed[first] = True
            present -= 1
            index = first + 1
            while index <= size:
                tree[index] -= 1
                index += index & -index
        position += 1
    return [line for line, gone in zip(lines, removed, strict=True) if not gone]


def _nth_present(tree: list[int], size: int, nth: int) -> int:
    """The index of the ``nth`` (from 0) line still present."""
    index, step = 0, 1 << size.bit_length()
    remaining = nth + 1
    while step:
        if index + step <= size and tree[index + step] < remaining:
            index += step
            remaining -= tree[index]
        step >>= 1
    return index


def _indent_stairs(self: Any, value: str) -> bool:
    lines = reference_blank_removal(value.split("\n"))
    return all(
        len(after) - len(after.lstrip(" ")) > len(before) - len(before.lstrip(" "))
        for before, after in itertools.pairwise(lines)
    )


def _new_line_words(self: Any, value: str) -> bool:
    value = value.translate(_PUNCTUATION)
    lines = [line for line in value.strip().split("\n") if line != ""]
    return len(lines) == len(value.strip().split())


def install(ifeval_instructions: Any, ifbench_instructions: Any) -> None:
    """Put the linear checkers in place of the reference ones."""
    ifeval_instructions.PlaceholderChecker.check_following = _placeholders
    ifeval_instructions.TitleChecker.check_following = _title
    ifeval_instructions.PostscriptChecker.check_following = _postscript
    ifbench_instructions.IndentStairsChecker.check_following = _indent_stairs
    ifbench_instructions.NewLineWordsChecker.check_following = _new_line_words
