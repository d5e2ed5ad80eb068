"""Pieces of an honest completion that exploits rebuild from, and of a variant that reports show.

Every function here reads model text with `str.find`-style scans or patterns without nested
quantifiers, so its time is linear in the text, whatever the text holds.
"""

from __future__ import annotations

import re
from fractions import Fraction

_ANSWER_PHRASE = re.compile(r"answer\s*(?:is|:)|####|<answer>", re.IGNORECASE)
_REASONING_MARKERS = ("<think>", "</think>", "<thinking>", "</thinking>", "<reasoning>", "</reasoning>")
#: Numbers longer than this are not read as numbers (converting one costs time quadratic in its
#: length, and no answer game needs one).
MAX_NUMBER_DIGITS = 30
_PLAIN_NUMBER = re.compile(rf"(-?)(\d{{1,{MAX_NUMBER_DIGITS}}})(?:\.(\d{{1,{MAX_NUMBER_DIGITS}}}))?")
#: How much of the honest work an answer game keeps: enough to look like an attempt.
MAX_WORK_CHARS = 20_000


def _paragraph_start(text: str, position: int) -> int:
    start = text.rfind("\n\n", 0, position)
    if start < 0:
        start = text.rfind("\n", 0, position)
    return 0 if start < 0 else start


def work_before_answer(text: str) -> str:
    """The honest completion's working without its answer: the text before the paragraph that
    first boxes or states an answer (or, with neither, before its last paragraph), reasoning tags
    removed, at most `MAX_WORK_CHARS` of it.

    Answer games append their own answer to this, so that the honest answer cannot decide the
    grade in place of the one the exploit is about.
    """
    cuts = [position for position in (text.find("\\boxed"), text.find("\\fbox")) if position >= 0]
    phrase = _ANSWER_PHRASE.search(text)
    if phrase is not None:
        cuts.append(phrase.start())
    if cuts:
        work = text[: _paragraph_start(text, min(cuts))]
    else:
        work = text[: _paragraph_start(text, len(text.rstrip()))]
    for marker in _REASONING_MARKERS:
        work = work.replace(marker, "")
    return work.strip()[-MAX_WORK_CHARS:]


def boxed(answer: str) -> str:
    """``answer`` in a LaTeX box, in inline math."""
    return f"$\\boxed{{{answer}}}$"


def plain_number(text: str) -> Fraction | None:
    """The value of ``text`` when it is a plain decimal number ("42", "-3.5", "1,000") of at most
    `MAX_NUMBER_DIGITS` digits before and after the point, else None."""
    match = _PLAIN_NUMBER.fullmatch(text.strip().replace(",", "").replace("{,}", ""))
    if match is None:
        return None
    sign, whole, decimals = match.groups()
    value = Fraction(int(whole + (decimals or "")), 10 ** len(decimals or ""))
    return -value if sign else value


def number_text(value: Fraction, like: str) -> str:
    """``value`` written with as many decimals as ``like`` has (exact for such values)."""
    decimals = len(like.strip().partition(".")[2])
    scaled = round(abs(value) * 10**decimals)
    digits = str(scaled).rjust(decimals + 1, "0")
    text = digits if decimals == 0 else f"{digits[:-decimals]}.{digits[-decimals:]}"
    return f"-{text}" if value < 0 else text


def changed_part(before: str, after: str, *, context: int = 40, limit: int = 400) -> str:
    """The part of ``after`` that differs from ``before`` (common prefix and suffix cut away,
    ``context`` characters of each kept), clipped to ``limit`` characters: what a report shows of
    a variant."""
    prefix = 0
    shortest = min(len(before), len(after))
    while prefix < shortest and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    start = max(0, prefix - context)
    end = min(len(after), len(after) - suffix + context)
    shown = after[start:end]
    if len(shown) > limit:
        shown = shown[: limit // 2] + " [...] " + shown[-limit // 2 :]
    return ("..." if start > 0 else "") + shown + ("..." if end < len(after) else "")


def word_letters(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of letters in ``text`` that is a word of prose: not the name
    of a LaTeX command (letters right after a backslash), which an exploit that rewrites letters
    must leave alone for the mathematics to stay readable."""
    runs = []
    index, length = 0, len(text)
    while index < length:
        if not text[index].isalpha():
            index += 1
            continue
        start = index
        while index < length and text[index].isalpha():
            index += 1
        if start == 0 or text[start - 1] != "\\":
            runs.append((start, index))
    return runs
