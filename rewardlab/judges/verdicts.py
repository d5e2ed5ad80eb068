"""Reading a verdict out of a judge's answer - strictly, and never by guessing.

Every judge verdict is one label out of a known set (a score on a scale, yes/no, A/B/tie, the
best of G, a step label) or a list of them. The reader looks, in order of trust, for:

1. the last JSON object in the answer that has the verdict key (what the prompts ask for);
2. unless ``strict``, an explicit verdict statement - the last ``[[7]]``; else the last
   ``Score: 7`` (a verdict word, then ``:`` or ``=``); else, on a numeric scale, the last ``7/10``;
3. an answer that is nothing but a label (verdict-only prompts, guided choice).

In statements a one-letter label must be written in its case ("A", not the article "a"). Text
the judge quotes back from inside a fence of the prompt (the completion, say, with its own fake
"Score: 10") is blanked out first, so only the judge's own words can carry the verdict. Finding
nothing, or a value outside the label set, raises `VerdictError`: the score becomes
``parse_error`` with the raw answer kept, never a guessed number.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.judges.backend import ChatResponse
from rewardlab.judges.fence import Fence, UnclosedFence, blank_fenced

#: Words that introduce a verdict in free text ("Score: 7", "Winner = A", "Verdict: yes").
VERDICT_WORDS = ("score", "rating", "grade", "verdict", "winner", "label", "best", "decision")


class VerdictError(ValueError):
    """The judge's answer holds no valid verdict; the message says what was missing or wrong."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A label read from an answer, and where: ``start``/``end`` are the label's character span
    in the answer (used to find its token's log-probabilities), ``source`` how it was read."""

    label: str
    start: int
    end: int
    source: str


class LabelSet:
    """The labels a verdict may take, each with the spellings accepted for it (case-insensitive).

    Args:
        labels: Canonical labels, e.g. ``["1", ..., "10"]`` or ``["A", "B", "tie"]``.
        aliases: Extra spellings, e.g. ``{"C": "tie"}`` for MT-Bench's ``[[C]]``.
    """

    def __init__(self, labels: Sequence[str], aliases: Mapping[str, str] | None = None):
        self.labels = tuple(labels)
        self._spellings = {label.lower(): label for label in self.labels}
        for alias, label in (aliases or {}).items():
            if label not in self.labels:
                raise ValueError(f"alias {alias!r} names an unknown label {label!r}")
            self._spellings[alias.lower()] = label
        # Searched case-insensitively, except one-letter spellings: upper case only, so that the
        # article "a" is not the verdict "A".
        alternatives = "|".join(
            f"(?-i:{spelling.upper()})" if len(spelling) == 1 and spelling.isalpha() else re.escape(spelling)
            for spelling in sorted(self._spellings, key=len, reverse=True)
        )
        self.pattern = f"(?<![\\w.])(?:{alternatives})(?![\\w]|\\.\\d)"

    @property
    def prefix_free(self) -> bool:
        """No label starts another ("1" starts "10"): then the token where a verdict begins
        tells which label it is, and log-probabilities there give a distribution over labels."""
        lowered = [label.lower() for label in self.labels]
        return not any(a != b and b.startswith(a) for a in lowered for b in lowered)

    def canonical(self, spelling: Any) -> str | None:
        """The label a spelling stands for, or None."""
        if isinstance(spelling, bool) or spelling is None:
            return None
        if isinstance(spelling, float) and spelling.is_integer():
            spelling = int(spelling)
        return self._spellings.get(str(spelling).strip().lower())

    def describe(self) -> str:
        if len(self.labels) > 6 and all(label.lstrip("-").isdigit() for label in self.labels):
            return f"an integer from {self.labels[0]} to {self.labels[-1]}"
        return "one of " + ", ".join(repr(label) for label in self.labels)


def json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level JSON object in ``text`` as ``(start, end, value)``, in order.

    The objects ``json`` decodes at each ``{`` in turn, skipping past each one found; an object
    nested deeper than `MAX_JSON_DEPTH`, or holding an integer longer than Python converts
    (``sys.get_int_max_str_digits()``), is no object. Linear in the text: decoding at every
    ``{`` again (as ``json.JSONDecoder.raw_decode`` in a loop would) made ``{"a":`` nested a
    thousand deep around a long array quadratic, and deeper nesting a `RecursionError`.
    """
    decoder = json.JSONDecoder()
    known_end: dict[int, int] = {}
    known_fail: set[int] = set()
    found, position = [], 0
    while (start := text.find("{", position)) != -1:
        if start not in known_end and start not in known_fail:
            _scan_json(text, start, known_end, known_fail)
        if start in known_end:
            try:
                value, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):  # only if the scanner and json disagree
                pass
            else:
                found.append((start, end, value))
                position = end
                continue
        position = start + 1
    return found


#: JSON nested deeper than this is not read from an answer (a verdict is two or three levels
#: deep; ``json`` itself gives up near 1,000 levels with a `RecursionError`).
MAX_JSON_DEPTH = 100

_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_STRING = re.compile(r'"[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+"')
_JSON_SCALAR = re.compile(
    r"(-?(?:0|[1-9][0-9]*+))(\.[0-9]++)?([eE][-+]?[0-9]++)?|null|true|false|NaN|Infinity|-Infinity"
)
# What the scanner expects next.
_OPENED_OBJECT, _KEY, _COLON, _OPENED_ARRAY, _VALUE, _AFTER_VALUE = range(6)


def _scan_json(text: str, start: int, known_end: dict[int, int], known_fail: set[int]) -> None:
    """Parse the JSON object at ``start`` as the ``json`` module's scanner does (the same grammar:
    strict strings, ``NaN`` and ``Infinity``, no trailing commas), without building values, and
    record what the parse shows about every object opened in it: where each completed object
    ends (``known_end``) and which objects cannot be decoded (``known_fail``).

    Decoding from any ``{`` depends only on the text from there on, so an object that the parse
    completes decodes alone to the same end, and one still open when the parse fails fails alone
    too: `json_objects` then never parses the same text twice from the same structure. A
    container that would be nested deeper than `MAX_JSON_DEPTH` in the outermost open object
    fails that object only; the parse goes on for the objects inside it.
    """
    stack: deque[int] = deque([start])
    length, index, expect = len(text), start + 1, _OPENED_OBJECT
    while True:
        index = _JSON_SPACE.match(text, index).end()  # type: ignore[union-attr]  # always matches
        if index >= length:
            break
        char = text[index]
        if (
            expect == _AFTER_VALUE
            or (expect == _OPENED_OBJECT and char == "}")
            or (expect == _OPENED_ARRAY and char == "]")
        ):
            if expect == _AFTER_VALUE and char == ",":
                expect = _KEY if text[stack[-1]] == "{" else _VALUE
                index += 1
                continue
            if char != ("}" if text[stack[-1]] == "{" else "]"):
                break
            opened = stack.pop()
            index += 1
            if text[opened] == "{":
                known_end[opened] = index
            if not stack:
                return
            expect = _AFTER_VALUE
        elif expect in (_OPENED_OBJECT, _KEY):
            match = _JSON_STRING.match(text, index) if char == '"' else None
            if match is None:
                break
            index, expect = match.end(), _COLON
        elif expect == _COLON:
            if char != ":":
                break
            index, expect = index + 1, _VALUE
        elif char in "{[":
            if len(stack) == MAX_JSON_DEPTH:
                outermost = stack.popleft()
                if text[outermost] == "{":
                    known_fail.add(outermost)
            stack.append(index)
            index, expect = index + 1, _OPENED_OBJECT if char == "{" else _OPENED_ARRAY
        else:
            match = (_JSON_STRING if char == '"' else _JSON_SCALAR).match(text, index)
            if match is None or (char != '"' and _too_long_integer(match)):
                break
            index, expect = match.end(), _AFTER_VALUE
    known_fail.update(opened for opened in stack if text[opened] == "{")


def _too_long_integer(match: re.Match[str]) -> bool:
    """An integer literal with more digits than ``int()`` converts (``json`` raises ValueError)."""
    integer, fraction, exponent = match.groups()
    limit = sys.get_int_max_str_digits()
    return (
        integer is not None and fraction is None and exponent is None and 0 < limit < len(integer.lstrip("-"))
    )


def read_label(
    answer: str,
    labels: LabelSet,
    key: str,
    *,
    fences: Collection[Fence] = (),
    strict: bool = False,
    scale_max: int | None = None,
) -> Verdict:
    """The verdict labelled ``key`` in ``answer`` (see the module docstring for the order).

    Args:
        answer: The judge's answer.
        labels: The valid labels.
        key: The JSON key holding the verdict (``"score"``, ``"winner"``, ...).
        fences: The fences the judge made in its prompt (`JudgePrompt.render_with_fences`),
            whose quotes are not read.
        strict: Accept only JSON and bare-label answers, not verdict statements in prose.
        scale_max: For numeric scales, also read ``7/10`` and ``7 out of 10`` with this maximum.
    """
    visible = _visible(answer, fences)
    for start, end, value in reversed(json_objects(visible)):
        if isinstance(value, dict) and key in value:
            return _json_verdict(visible[start:end], start, key, value[key], labels)
    if not strict:
        statement = _last_statement(visible, labels, scale_max)
        if statement is not None:
            return statement
    bare = visible.strip().strip("*_`\"'.!:").strip()
    label = labels.canonical(bare)
    if label is not None:
        start = visible.index(bare)
        return Verdict(label, start, start + len(bare), "bare")
    wanted = f'JSON {{"{key}": ...}}' if strict else f'JSON {{"{key}": ...}} or a verdict statement'
    raise VerdictError(f"no verdict found: expected {wanted} with {labels.describe()}")


def _json_verdict(body: str, start: int, key: str, value: Any, labels: LabelSet) -> Verdict:
    """The verdict in the JSON object ``body``, which starts at ``start`` in the answer."""
    label = labels.canonical(value)
    if label is None:
        raise VerdictError(f'"{key}" is {value!r}, which is not {labels.describe()}')
    # One optional quote between two runs of space, written so that a run of space is read one
    # way only: as ``\s*"?\s*`` it was split between the two runs in every way before failing.
    match = re.search(rf'"{re.escape(key)}"\s*:\s*(?:"\s*)?({re.escape(str(value))})', body)
    if match is None:  # the value was written in another form (1.0 for 1, say)
        return Verdict(label, -1, -1, "json")
    return Verdict(label, start + match.start(1), start + match.end(1), "json")


def _visible(answer: str, fences: Collection[Fence]) -> str:
    try:
        return blank_fenced(answer, fences)
    except UnclosedFence as error:
        raise VerdictError(str(error)) from None


def _last_statement(text: str, labels: LabelSet, scale_max: int | None) -> Verdict | None:
    """The last statement of the most explicit kind present (see the module docstring)."""
    words = "|".join(VERDICT_WORDS)
    patterns = [
        rf"\[\[\s*({labels.pattern})\s*\]\]",
        # ``Score: **7``: the space around the optional stars is read one way only (as
        # ``\s*\**\s*`` a long run of space with no label after it was split in every way).
        rf"\b(?:{words})\b\**\s*[:=]\s*(?:\*+\s*)?\(?({labels.pattern})",
    ]
    if scale_max is not None:
        patterns.append(rf"({labels.pattern})\s*(?:/|out of)\s*{scale_max}\b")
    for pattern in patterns:
        matches = list(re.finditer(pattern, text, flags=re.IGNORECASE))
        if matches:
            last = matches[-1]
            label = labels.canonical(last.group(1))
            if label is not None:
                return Verdict(label, last.start(1), last.end(1), "text")
    return None


def read_label_list(
    answer: str, labels: LabelSet, key: str, count: int, *, fences: Collection[Fence] = ()
) -> list[str]:
    """A list of ``count`` labels under ``key`` in the last JSON object that has it, given as a
    list (``{"labels": ["progress", ...]}``) or as numbered entries (``{"1": ..., "2": ...}`` or
    ``[{"segment": 1, "label": ...}, ...]``)."""
    values = _json_list(answer, key, count, fences)
    result = []
    for index, value in enumerate(values, start=1):
        label = labels.canonical(value)
        if label is None:
            raise VerdictError(f'"{key}" entry {index} is {value!r}, which is not {labels.describe()}')
        result.append(label)
    return result


def read_number_list(
    answer: str, key: str, count: int, low: float, high: float, *, fences: Collection[Fence] = ()
) -> list[float]:
    """A list of ``count`` numbers in ``[low, high]`` under ``key`` (forms as `read_label_list`)."""
    values = _json_list(answer, key, count, fences)
    result = []
    for index, value in enumerate(values, start=1):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise VerdictError(f'"{key}" entry {index} is {value!r}, not a number')
        if not low <= value <= high:
            raise VerdictError(f'"{key}" entry {index} is {value}, outside {low:g}..{high:g}')
        result.append(float(value))
    return result


def _json_list(answer: str, key: str, count: int, fences: Collection[Fence]) -> list[Any]:
    visible = _visible(answer, fences)
    for _, _, value in reversed(json_objects(visible)):
        if isinstance(value, dict) and key in value:
            return _numbered(value[key], key, count)
    raise VerdictError(f'no verdict found: expected JSON {{"{key}": [...]}} with {count} entries')


def _numbered(value: Any, key: str, count: int) -> list[Any]:
    if isinstance(value, dict):
        entries = {str(k).strip(): v for k, v in value.items()}
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        entries = {}
        for item in value:
            number = next(
                (item[k] for k in ("id", "index", "segment", "step", "response") if k in item), None
            )
            verdict = next((item[k] for k in ("label", "score", "value", "verdict") if k in item), None)
            if number is None or verdict is None:
                raise VerdictError(f'"{key}" entries need a number and a label, got {item!r}')
            entries[str(number).strip()] = verdict
    elif isinstance(value, list):
        if len(value) != count:
            raise VerdictError(f'"{key}" has {len(value)} entries, expected {count}')
        return value
    else:
        raise VerdictError(f'"{key}" is {type(value).__name__}, expected a list or an object')
    wanted = {str(i) for i in range(1, count + 1)}
    if set(entries) != wanted:
        missing, extra = sorted(wanted - set(entries), key=int), sorted(set(entries) - wanted)
        raise VerdictError(
            f'"{key}" must number entries 1..{count} once each (missing {missing}, extra {extra})'
        )
    return [entries[str(i)] for i in range(1, count + 1)]


def label_probabilities(
    response: ChatResponse, verdict: Verdict, labels: LabelSet
) -> dict[str, float] | None:
    """The judge's probability for each label at the token where it wrote its verdict.

    Found from the log-probabilities of that token and its top alternatives; labels missing from
    the alternatives get 0 and the rest are renormalised. None when the response has no
    log-probabilities, or the verdict is not exactly one token (a two-token "10", say), or no
    alternative is a label - the caller then keeps the text verdict.
    """
    if response.logprobs is None or verdict.start < 0:
        return None
    if "".join(token.token for token in response.logprobs) != response.text:
        return None  # tokens given as bytes, or cut: offsets into the text would drift
    written = response.text[verdict.start : verdict.end]
    offset = 0
    for token in response.logprobs:
        if offset <= verdict.start < offset + len(token.token):
            if token.token.strip().lower() != written.strip().lower():
                return None
            candidates = dict(token.top)
            candidates.setdefault(token.token, token.logprob)
            mass: dict[str, float] = {}
            for text, logprob in candidates.items():
                label = labels.canonical(text)
                if label is not None:
                    mass[label] = mass.get(label, 0.0) + math.exp(logprob)
            total = sum(mass.values())
            if total <= 0.0:
                return None
            return {label: mass.get(label, 0.0) / total for label in labels.labels}
        offset += len(token.token)
    return None
