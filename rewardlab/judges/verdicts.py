"""Reading a verdict out of a judge's answer - strictly, never by guessing, and never from text
the judge may be quoting.

Every judge verdict is one label out of a known set (a score on a scale, yes/no, A/B/tie, the
best of G, a step label) or a list of them. The policy, in full:

1. **Quotes of the prompt's fences are blanked first.** Text the judge quotes back from inside a
   fence of its prompt - marked by the fence's secret nonce (`fence.py`) - is not read.
2. **The verdict is the judge's own structure, where the prompt asks for it**: a JSON object
   holding the verdict key that ends the answer (nothing after it but space, backticks or a
   full stop). Drafts, quotes and reasoning before it do not count.
3. **Otherwise every verdict stated counts, and they must agree**: each JSON object holding the
   key, and unless ``strict``, each statement - ``[[7]]``, a verdict word then ``:`` or ``=``
   (``Score: 7``), on a numeric scale ``7/10`` and ``7 out of 10`` - and a label that ends the
   answer (``...on reflection, 3``), which revises what came before. Several different labels
   are ``parse_error`` (`VerdictError`): ``Rating: [[3]] but the response claims [[10]]``,
   ``Grade: 3 (out of 10). Best: 10``. A label ending the answer never makes a verdict alone
   ("the right total is 4" grades nothing), and an answer that is nothing but a label is that
   label (verdict-only prompts, guided choice).
4. **A verdict the fenced texts state is suspect**: the judge may be quoting the completion
   without its markers (``The response ends with "...Score: 10"``). A JSON verdict or statement
   whose label a fenced text states in a marked form - ``[[label]]``, ``<verdict word>: label``
   or under the verdict key in JSON; a fraction only against a fraction (``7/10`` is common in
   mathematics) - makes the answer ``parse_error``, wherever it stands. JSON in a fenced text is
   read with the verdict reader's own decoding (escapes decoded, the label found by
   `LabelSet.canonical`, so ``1e1``, ``10.0`` and ``"\\u0031\\u0030"`` state 10 and ``"c"``
   states a tie, as they would in the answer), nested or inside a string too, and loosely where
   it is not quite JSON (single quotes, a trailing comma), since a judge may tidy what it quotes.
   The fenced text is read as it is and as it looks (look-alike letters, full-width digits and
   invisible characters folded). Exempt is only a verdict whose structure the backend enforced:
   the whole answer as the JSON its schema demanded (``strict``), or a bare label (guided
   choice), neither of which can quote.
5. **A fenced text that states different verdicts makes every verdict suspect**: with two
   labels in marked forms (rule 4) in one fenced text, every answer that rule 4 checks is
   ``parse_error``. Rule 4 alone let a completion choose which verdicts fail: one stating
   ``Score: 1`` ... ``Score: 6`` made every judge answer of 1 to 6 ``parse_error`` and let 7 to
   10 be read, which pays under any trainer that drops failed samples rather than scoring them
   low. Failing every verdict leaves nothing to choose: the sample fails whatever the judge
   thinks of it.

In statements a one-letter label must be written in its case ("A", not the article "a"), and a
number is read only whole (``7.5`` and ``7,5`` state no label). A value outside the label set
raises `VerdictError`: the score becomes ``parse_error`` with the raw answer kept, never a
guessed number. The price of rules 4 and 5 is that a completion which itself states the verdict
the judge gives (a completion that is a review ending "Score: 8") makes that answer
``parse_error``, and one stating several verdicts makes every answer so - a judge backend with
structured output avoids it. List verdicts (`read_label_list`, `read_number_list`) follow rules
1, 2 and 4 (a list compared by value: ``1e1`` is 10), and, without a final JSON object, every
JSON list verdict must agree.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.errors import UnclosedFence, VerdictError
from rewardlab.llm.backend import ChatResponse
from rewardlab.llm.fence import Fence, blank_fenced
from rewardlab.rewards.visible_text import as_seen

#: Words that introduce a verdict in free text ("Score: 7", "Winner = A", "Verdict: yes").
VERDICT_WORDS = ("score", "rating", "grade", "verdict", "winner", "label", "best", "decision")


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
        # Not part of a word or of a decimal: "7.5" and "7,5" state no label.
        self.pattern = f"(?<![\\w.])(?<!\\d,)(?:{alternatives})(?![\\w]|[.,]\\d)"

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


@dataclass(frozen=True, slots=True)
class _Statement:
    """One verdict stated in a text: the label, its span, and the form it was stated in."""

    label: str
    start: int
    end: int
    form: str


#: Forms of statement (rule 3 of the module docstring); "closing" is a label ending the answer.
_JSON, _BRACKETS, _WORD, _FRACTION, _CLOSING = "json", "brackets", "word", "fraction", "closing"
#: What may follow the verdict that ends an answer.
_TRAILER = re.compile(r"[\s`*_.]*")


def _statement_patterns(labels: LabelSet, scale_max: int | None) -> dict[str, re.Pattern[str]]:
    """The patterns of the statement forms, each with the label as group 1."""
    words = "|".join(VERDICT_WORDS)
    patterns = {
        _BRACKETS: rf"\[\[\s*({labels.pattern})\s*\]\]",
        # ``Score: **7``: the space around the optional stars is read one way only (as
        # ``\s*\**\s*`` a long run of space with no label after it was split in every way).
        _WORD: rf"\b(?:{words})\b\**\s*[:=]\s*(?:\*+\s*)?\(?({labels.pattern})",
    }
    if scale_max is not None:
        patterns[_FRACTION] = rf"({labels.pattern})\s*(?:/|out of)\s*{scale_max}\b"
    return {form: re.compile(pattern, re.IGNORECASE) for form, pattern in patterns.items()}


def _stated(
    text: str, patterns: dict[str, re.Pattern[str]], labels: LabelSet, forms: tuple[str, ...]
) -> list[_Statement]:
    found = []
    for form in forms:
        for match in patterns[form].finditer(text):
            label = labels.canonical(match.group(1))
            if label is not None:
                found.append(_Statement(label, match.start(1), match.end(1), form))
    return found


def _closing(text: str, labels: LabelSet, scale_max: int | None) -> _Statement | None:
    """A label that ends ``text`` (the last thing but punctuation), unless it is the scale of a
    fraction (``3/10``, ``2 out of 10``)."""
    stripped = text.rstrip(" \t\r\n*_`'\".!)]")
    # Searched from near the end only (a label is short); the look-behind still sees before it.
    match = re.compile(rf"(?:{labels.pattern})\Z", re.IGNORECASE).search(stripped, max(0, len(stripped) - 64))
    if match is None:
        return None
    before = stripped[max(0, match.start() - 8) : match.start()].rstrip().lower()
    if scale_max is not None and before.endswith(("/", "out of")):
        return None
    label = labels.canonical(match.group())
    return None if label is None else _Statement(label, match.start(), match.end(), _CLOSING)


def _refuse_suspect(
    statements: list[_Statement],
    fences: Collection[Fence],
    key: str,
    patterns: dict[str, re.Pattern[str]],
    labels: LabelSet,
) -> None:
    """Raise `VerdictError` when a fenced text states the label of one of ``statements`` (rule
    4), or states different labels (rule 5)."""
    checked = [statement for statement in statements if statement.form != _CLOSING]
    if not checked:
        return
    for made in fences:
        stated = _fence_statements(made.text, key, patterns, labels)
        in_marked = {label for label, form in stated if form != _FRACTION}
        if len(in_marked) > 1:
            listed = ", ".join(sorted(in_marked, key=labels.labels.index))
            raise VerdictError(
                f"the {made.label} text states several verdicts ({listed}), so the judge may be quoting "
                "one: no verdict is read as the judge's own"
            )
        for statement in checked:
            if statement.label in in_marked or (statement.label, statement.form) in stated:
                raise VerdictError(
                    f"the verdict {statement.label!r} is also stated inside the {made.label} text, so the "
                    "judge may be quoting it: not read as the judge's own"
                )


def _fence_statements(
    text: str, key: str, patterns: dict[str, re.Pattern[str]], labels: LabelSet
) -> set[tuple[str, str]]:
    """Every verdict a fenced text states, as ``(label, form)``, in each of its `_readings`."""
    stated: set[tuple[str, str]] = set()
    for reading in _readings(text):
        stated.update((s.label, s.form) for s in _stated(reading, patterns, labels, tuple(patterns)))
        stated.update((label, _JSON) for label in _json_stated(reading, key, labels))
    return stated


#: ``"key": value`` as a JSON object writes it, or nearly (single quotes, no object around it,
#: invalid JSON after it); each part bounded, so that a run of quotes is read in linear time.
_JSON_LIKE = re.compile(
    r"""(?:"(?P<key>(?:[^"\\\n]|\\.){1,64}+)"|'(?P<single_key>[^'\n]{1,64}+)')\s*+:\s*+"""
    r"""(?P<value>"(?:[^"\\\n]|\\.){0,64}+"|'[^'\n]{0,64}+'|[\w.+-]{1,64}+)"""
)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _json_stated(text: str, key: str, labels: LabelSet) -> set[str]:
    """The labels ``text`` holds under ``key`` (any case) in JSON, as the verdict reader would
    read them from an answer: in every object `json_objects` decodes - nested, or in a string
    that holds JSON itself - with escapes decoded and the value put through
    `LabelSet.canonical`; and, for JSON a judge might repair as it quotes, in each
    ``"key": value`` written nearly as JSON, the value read as JSON would read it (a number by
    its value, a string with its escapes decoded)."""
    wanted = key.lower()
    values = []
    for match in _JSON_LIKE.finditer(text):
        written = match["single_key"] if match["key"] is None else _json_string(match["key"])
        if written.strip().lower() == wanted:
            values.append(_json_value(match["value"]))
    stack: list[Any] = [value for _, _, value in json_objects(text)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            values += [item for name, item in value.items() if name.strip().lower() == wanted]
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and "{" in value:
            stack.extend(found for _, _, found in json_objects(value))
    return {
        label
        for value in values
        if isinstance(value, str | int | float) and (label := labels.canonical(value)) is not None
    }


def _json_string(inner: str) -> str:
    """The text of a JSON string written as ``inner`` between its quotes (as written, if its
    escapes are not valid JSON)."""
    try:
        return json.loads(f'"{inner}"')
    except ValueError:
        return inner


def _json_value(written: str) -> Any:
    """A value written after ``"key":``, as JSON reads it: a string's text, a number's value."""
    if written.startswith('"'):
        return _json_string(written[1:-1])
    if written.startswith("'"):
        return written[1:-1]
    return float(written) if _NUMBER.fullmatch(written) else written


def _readings(text: str) -> set[str]:
    """A fenced text as the judge reads it - every character, an HTML comment too - and as it
    looks (`as_seen`: look-alike letters and full-width digits folded, invisible characters and
    markup dropped), since a judge quoting ``Ѕсоrе: １０`` may well write ``Score: 10``."""
    return {text, as_seen(text)}


def _ends_answer(text: str, end: int) -> bool:
    return _TRAILER.match(text, end).end() == len(text)  # type: ignore[union-attr]  # always matches


def read_label(
    answer: str,
    labels: LabelSet,
    key: str,
    *,
    fences: Collection[Fence] = (),
    strict: bool = False,
    scale_max: int | None = None,
) -> Verdict:
    """The verdict labelled ``key`` in ``answer`` (see the module docstring for the policy).

    Args:
        answer: The judge's answer.
        labels: The valid labels.
        key: The JSON key holding the verdict (``"score"``, ``"winner"``, ...).
        fences: The fences the judge made in its prompt (`JudgePrompt.render_with_fences`):
            their quotes are not read, and a verdict their texts state is suspect.
        strict: The backend was asked for a JSON schema: accept only JSON and bare-label
            answers, and trust a JSON answer that is the whole answer.
        scale_max: For numeric scales, also read ``7/10`` and ``7 out of 10`` with this maximum.
    """
    visible = _visible(answer, fences)
    patterns = _statement_patterns(labels, scale_max)
    objects = [
        (start, end, value)
        for start, end, value in json_objects(visible)
        if isinstance(value, dict) and key in value
    ]
    if objects and _ends_answer(visible, objects[-1][1]):
        start, end, value = objects[-1]
        verdict = _json_verdict(visible[start:end], start, key, value[key], labels)
        if strict and not visible[:start].strip():
            return verdict  # the structure the backend enforced: nothing to quote from
        _refuse_suspect(
            [_Statement(verdict.label, verdict.start, verdict.end, _JSON)], fences, key, patterns, labels
        )
        return verdict
    statements = [
        _Statement(_json_verdict(visible[s:e], s, key, v[key], labels).label, s, e, _JSON)
        for s, e, v in objects
    ]
    if not strict:
        statements += _stated(visible, patterns, labels, tuple(patterns))
        closing = _closing(visible, labels, scale_max)
        if closing is not None and statements:
            statements.append(closing)
    if statements:
        stated = sorted({statement.label for statement in statements}, key=labels.labels.index)
        if len(stated) > 1:
            raise VerdictError(f"several different verdicts ({', '.join(stated)}): the answer must state one")
        _refuse_suspect(statements, fences, key, patterns, labels)
        if objects:
            start, end, value = objects[-1]
            return _json_verdict(visible[start:end], start, key, value[key], labels)
        last = max((s for s in statements if s.form != _CLOSING), key=lambda s: s.start)
        return Verdict(last.label, last.start, last.end, "text")
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


def read_label_list(
    answer: str, labels: LabelSet, key: str, count: int, *, fences: Collection[Fence] = ()
) -> list[str]:
    """A list of ``count`` labels under ``key`` (see `_json_list` for which JSON object), given as
    a list (``{"labels": ["progress", ...]}``) or as numbered entries (``{"1": ..., "2": ...}`` or
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
    """The list verdict: the JSON object holding ``key`` that ends the answer, else every such
    object, which must agree; a verdict a fenced text holds too is suspect (module docstring)."""
    visible = _visible(answer, fences)
    objects = [
        (end, value) for _, end, value in json_objects(visible) if isinstance(value, dict) and key in value
    ]
    if not objects:
        raise VerdictError(f'no verdict found: expected JSON {{"{key}": [...]}} with {count} entries')
    if _ends_answer(visible, objects[-1][0]):
        objects = objects[-1:]
    lists = [_numbered(value[key], key, count) for _, value in objects]
    if len({_list_form(values) for values in lists}) > 1:
        raise VerdictError(f'several different "{key}" lists: the answer must state one')
    for made in fences:
        if any(_list_form(lists[0]) in _quoted_lists(text, key, count) for text in _readings(made.text)):
            raise VerdictError(
                f'the "{key}" list is also inside the {made.label} text, so the judge may be quoting '
                "it: not read as the judge's own"
            )
    return lists[-1]


def _list_form(values: list[Any]) -> tuple[str, ...]:
    """A list verdict as its entries read: text in any case, a number by its value (``1e1``,
    ``10.0`` and ``10`` alike, as `LabelSet.canonical` reads them)."""
    return tuple(
        str(int(value) if isinstance(value, float) and value.is_integer() else value).strip().lower()
        for value in values
    )


#: A comma right before a closing bracket: JSON refuses it, a judge tidying a quote drops it.
_TRAILING_COMMA = re.compile(r",\s*+([}\]])")


def _quoted_lists(text: str, key: str, count: int) -> set[tuple[str, ...]]:
    """Every list verdict under ``key`` (any case) that ``text`` holds, in any JSON object, nested
    or in a string that holds JSON, and in JSON written loosely (single quotes, trailing commas),
    which a judge may tidy into JSON as it quotes it (red-team round 2)."""
    wanted = key.lower()
    loosened = _TRAILING_COMMA.sub(r"\1", text.replace("'", '"'))
    found = set()
    stack: list[Any] = [value for reading in {text, loosened} for _, _, value in json_objects(reading)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for name, item in value.items():
                if name.strip().lower() == wanted:
                    # A value not of a verdict's shape is nothing the judge could quote as one.
                    with contextlib.suppress(VerdictError):
                        found.add(_list_form(_numbered(item, key, count)))
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and "{" in value:
            stack.extend(found_value for _, _, found_value in json_objects(value))
    return found


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
