"""Find the final answer in a completion.

Sources, tried in a fixed order so that the rule is predictable:

1. ``\\boxed{...}`` / ``\\fbox{...}`` with nested braces. Which box counts is a setting: the last
   one, the first one, or (default) every distinct box in the final paragraph, joined as a list.
   The default means "\\boxed{2} or \\boxed{3}" is the answer "2, 3", which matches neither 2 nor 3,
   while an intermediate result boxed in an earlier paragraph does not count.
2. "The (final) answer is ..." / "Answer: ..." (the last occurrence).
3. A math span (``$...$``, ``\\(...\\)``, ``\\[...\\]``) on the final line.
4. The final line itself, when it is short or states a conclusion ("Therefore, there are 12 ...").
5. Only if asked for: the last number anywhere in the text.

A sentence found by 2 or 4 is narrowed to its answer: a math span that is the whole sentence,
else what follows its last "is" / "are" / "equals", else its last math span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

BoxChoice = Literal["last", "first", "final_paragraph"]

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_PHRASE = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:(?:is|:|=)\s*:?\s*|(?=\$|\\\(|\\\[))", re.IGNORECASE
)
_MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
_CLAUSE = re.compile(r"\b(?:is|are|equals|was|were)\s+|=\s*", re.IGNORECASE)
_CONCLUSION = re.compile(
    r"\b(?:therefore|thus|so|hence|in total|in conclusion|finally)\b,?\s*", re.IGNORECASE
)
_LONE_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:\s*\\?%)?(?![\w.]*\d)")
_VERB = re.compile(r"\b(?:is|are|equals|was|were|be)\s+", re.IGNORECASE)
_HEDGE_WORDS = re.compile(r"\b(?:or|otherwise|alternatively|either|unless)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[^\s.])\.\s+(?=[A-Z])")
MAX_CONCLUSION_LINE = 300
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_PLACEHOLDER = re.compile(r"^\s*(?:\\phantom\{[^{}]*\}|\\quad|\\;|\s)*$")
MAX_FINAL_LINE = 80
MAX_BOX_CONTENT = 4096
MAX_BOXES = 64
#: Answer phrases and final lines are looked for in the completion's last this many characters,
#: which bounds the work a flood of text can cause.
TAIL_WINDOW = 8000


@dataclass(frozen=True, slots=True)
class Extraction:
    """The answer found in a completion and where it came from."""

    answer: str | None
    method: str
    candidates: tuple[str, ...] = ()


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """Content of the brace group opening at ``start`` and the index after it.

    The scan stops after `MAX_BOX_CONTENT` characters (no answer is that long), so that text
    full of unclosed boxes costs linear time; the content is then the cut-off text.
    """
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    end = min(len(text), start + MAX_BOX_CONTENT)
    for index in range(start, end):
        char = text[index]
        if char == "\\":
            continue
        if char == "{" and text[index - 1] != "\\":
            depth += 1
        elif char == "}" and text[index - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    return (text[start + 1 : end], end) if end - start >= MAX_BOX_CONTENT else None


def boxed_answers(text: str) -> list[tuple[str, int]]:
    """Every boxed content with its position; ``\\boxed 5`` (no braces) counts as "5"."""
    found = []
    matches = list(_BOX.finditer(text))
    if len(matches) > MAX_BOXES:
        # Only the first and last boxes can be chosen; skip the middle of a box flood.
        matches = matches[: MAX_BOXES // 8] + matches[-(MAX_BOXES - MAX_BOXES // 8) :]
    for match in matches:
        group = _braced(text, match.end())
        if group is not None:
            content = group[0]
        elif text.startswith("{", match.end()):
            continue  # a box cut off before its closing brace holds no answer
        else:
            bare = re.match(r"[^\s$]+", text[match.end() :])
            if bare is None:
                continue
            content = bare.group()
        if not _PLACEHOLDER.match(content):
            found.append((content.strip(), match.start()))
    return found


def _choose_boxes(text: str, boxes: list[tuple[str, int]], choice: BoxChoice) -> str:
    if choice == "first":
        return boxes[0][0]
    if choice == "last":
        return boxes[-1][0]
    final_paragraph_start = text.rfind("\n\n", 0, boxes[-1][1]) + 1
    distinct: list[str] = []
    for content, position in boxes:
        if position >= final_paragraph_start and content not in distinct:
            distinct.append(content)
    return ", ".join(distinct)


def _span_content(match: re.Match[str]) -> str:
    return next(group for group in match.groups() if group is not None).strip()


def _is_prose(text: str) -> bool:
    """Words without any mathematics ("the solution", "our answer")."""
    return not re.search(r"[\d\\$=^]", text) and len(re.findall(r"[A-Za-z]{3,}", text)) >= 2


def narrow(sentence: str) -> str:
    """The answer inside a sentence that states it (see the module docstring)."""
    sentence = sentence.strip().rstrip(".").strip()
    whole = _MATH_SPAN.fullmatch(sentence)
    if whole is not None:
        return _span_content(whole)
    # Clauses outside math only: the "=" in "$x = 3$" is part of the answer.
    outside_math = _MATH_SPAN.sub(lambda span: "#" * len(span.group()), sentence)
    clauses = list(_CLAUSE.finditer(outside_math))
    if clauses and clauses[-1].end() == len(sentence):
        # "9 + 9 + 8 =", "The result is": a statement cut off before its value states nothing.
        # Taken whole, the unevaluated expression would match the answer it never gave - a hack
        # a policy under RL was seen to find.
        return ""
    if clauses and clauses[-1].end() < len(sentence):
        tail = narrow(sentence[clauses[-1].end() :])
        if not _is_prose(tail):
            return tail
        # "Therefore $x \ge 5$ is the solution": the answer comes before the clause.
        sentence = sentence[: clauses[-1].start()].strip()
    spans = list(_MATH_SPAN.finditer(sentence))
    if spans:
        return _span_content(spans[-1])
    numbers = _LONE_NUMBER.findall(sentence)
    if len(numbers) == 1 and len(sentence.split()) >= 4:
        # "Jane started growing it 3 hours ago": a conclusion that names one number states it.
        return numbers[0].strip()
    return sentence


def _whole_statement(line: str) -> str | None:
    """A line that offers several values ("$2$ or $3$", "$x=2$ and $x=3$") is answered by all of
    it, with the math unwrapped, not by one of its spans; None for a line with one value."""
    outside_math = _MATH_SPAN.sub(lambda span: "#" * len(span.group()), line)
    if len(list(_MATH_SPAN.finditer(line))) < 2 and not _HEDGE_WORDS.search(outside_math):
        return None
    # "The solutions are $x=2$ or $x=3$": what follows the first "is"/"are" states the values.
    verb = _VERB.search(outside_math)
    if verb is not None:
        line = line[verb.end() :]
    return _MATH_SPAN.sub(lambda span: f" {_span_content(span)} ", line).strip().rstrip(".")


def _after_phrase(text: str) -> str | None:
    matches = list(_PHRASE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end() :]
    # The answer's sentence ends at the line end or at a full stop before a new sentence.
    line = _SENTENCE_END.split(rest.split("\n", 1)[0], maxsplit=1)[0]
    if (statement := _whole_statement(line)) is not None:
        return statement or None
    span = _MATH_SPAN.match(rest)
    if span is not None:
        # A math span may run over several lines ("Answer: $\n 9 \n$").
        return _span_content(span) or None
    return narrow(line) or None


def final_line(text: str) -> str | None:
    """The last line that is not blank, stripped; None for a blank text."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def extract_answer(
    text: str,
    *,
    box_choice: BoxChoice = "final_paragraph",
    use_phrases: bool = True,
    use_final_line: bool = True,
    last_number_fallback: bool = False,
) -> Extraction:
    """The final answer in ``text`` (see the module docstring for the order of sources)."""
    boxes = boxed_answers(text)
    if boxes:
        return Extraction(_choose_boxes(text, boxes, box_choice), "boxed", tuple(b for b, _ in boxes))
    tail = text[-TAIL_WINDOW:]
    if use_phrases and (answer := _after_phrase(tail)) is not None:
        return Extraction(answer, "answer_phrase")
    line = final_line(tail)
    if use_final_line and line is not None:
        conclusions = list(_CONCLUSION.finditer(line))
        if conclusions and len(line) <= MAX_CONCLUSION_LINE:
            return Extraction(narrow(line[conclusions[-1].end() :]) or None, "final_line")
        spans = list(_MATH_SPAN.finditer(line))
        if (statement := _whole_statement(line)) is not None:
            return Extraction(statement, "final_math")
        if spans:
            return Extraction(_span_content(spans[-1]), "final_math")
        if len(line) <= MAX_FINAL_LINE:
            return Extraction(narrow(line) or None, "final_line")
    if last_number_fallback:
        numbers = _NUMBER.findall(text)
        if numbers:
            return Extraction(numbers[-1], "last_number")
    return Extraction(None, "none")


def reference_answer(reference: str) -> str:
    """The gold answer inside a reference: a boxed answer, the part after GSM8K's "####", or the
    whole reference when it is already a bare answer."""
    boxes = boxed_answers(reference)
    if boxes:
        return boxes[-1][0]
    if "####" in reference:
        return reference.rsplit("####", 1)[1].strip()
    return reference.strip()
