"""Find the final answer a completion commits to.

The policy, in one place:

1. The text is read as a reader sees it (`text.reader_text`: no invisible characters, comments
   or code blocks), inside the answer region the reward chose (reasoning is not the answer).
2. **Explicit answer statements**, anywhere in that text, in order:

   - ``\\boxed{...}`` and ``\\fbox{...}``; the distinct boxes of one paragraph are one statement
     (several different boxes there are a list, which matches no single answer);
   - answer phrases: "The (final / correct / ...) answer is ...", "Answer: ...", "**Answer:**
     ...", "ANSWER: ...", Minerva's "Final Answer: The final answer is $X$. I hope it is
     correct."; the value is read from the rest of the phrase's sentence; a phrase whose
     sentence holds a box is that box's statement, and one inside a condition ("if the answer
     is 5") states nothing;
   - GSM8K's "#### X";
   - "A: X" as the final line.

3. Without any explicit statement, **the final line** (after pleasantries such as "I hope this
   helps!"), when it concludes ("Therefore, ..."), holds mathematics, or is short.
4. Only if asked for: the last number anywhere.

What the reward does with them: **every** explicit statement must be the reference's answer,
so a completion that states two different answers ("\\boxed{5}. Wait, I made an error. The
correct answer is 7.") earns nothing, whichever is right. A negated statement ("it cannot be
5") states nothing (`commitment`). Words after the last statement that take it back ("Wait, I
made an error in step 2.") leave no answer.

Every scan is linear in the text and every sentence is read to a bounded length, so no
completion can make extraction slow.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from rewardlab.rewards.fences import inside
from rewardlab.rewards.math.box_context import operand_of_expression, struck_spans
from rewardlab.rewards.math.commitment import (
    MAX_SENTENCE_CHARS,
    TAKEN_BACK_AFTER,
    Reading,
    admits_failure,
    conditional,
    disowned,
    doubted,
    doubted_after,
    doubted_before,
    mask_math,
    mentions_any,
    read_predicate,
    read_sentence,
    retraction,
    words,
)
from rewardlab.rewards.math.spans import MAX_GROUP_CHARS, Span, box_count, boxes, math_spans
from rewardlab.rewards.math.text import reader_text

# Starts with the word itself, so that the scan skips ahead to each "answer" (an optional
# adjective first made it try every position): "The (final) answer is", "Answer:", "ANSWER:".
_PHRASE = re.compile(
    r"answers?(?:\s+to\s+(?:the|this)\s+(?:question|problem))?\**[ \t]*"
    r"(?:(?:is|are|would\s+be|should\s+be|will\s+be|must\s+be|remains)\b[ \t]*:?|[:=])\**[ \t]*"
    r"|answer[ \t]*(?=\$|\\\(|\\\[)",
    re.IGNORECASE,
)
_HASHES = re.compile(r"####[ \t]*(?=[-+$\\(\d.])")
# "A: X" opening the final line, or after its last sentence ("... in one week. A: 77").
_LABEL_LINE = re.compile(r"(?:^|(?<=[.!?:\])$]\s))\**A\**\s*:\**\s*(?=\S)")
_CONCLUSION = re.compile(
    r"\b(?:therefore|thus|so|hence|in\s+total|in\s+conclusion|finally|altogether|overall|actually|"
    r"on\s+second\s+thought|(?:the|my|our)\s+final)\b,?\s*",
    re.IGNORECASE,
)
_SIGN_OFF = re.compile(
    r"^(?:i\s+hope\b|hope\s+(?:this|it|that)\b|let\s+me\s+know\b|feel\s+free\b|if\s+you\s+have\b|"
    r"please\s+let\b|good\s+luck\b|happy\s+to\s+help\b|thank\s+you\b|thanks\b|cheers\b|[-*_=#\s]+$)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\.(?<=[^\s.]\.)(?:\s+(?=[A-Z\\$])|\s*$)|\n|\?")
_SENTENCE_BREAK = re.compile(r"[.?!](?<=[A-Za-z)][.?!])\s")
# "add up to", "comes to": a total, not a bound ("up to 5").
_SUMS_TO = re.compile(r"\b(?:adds?|added|adding|sums?|summed|comes?|came|amounts?)(?:\s+up)?\s+to\b", re.I)
# A hedge written in mathematics right after a box: "$\\boxed{10} \\quad (\\text{or } 7)$".
_TEXT_HEDGE = re.compile(
    r"(?:\s|\\[,;: ]|\\q?quad|[($])*\\(?:text|textrm|mathrm)\s*\{\s*"
    r"(?:or|and/or|maybe|possibly|perhaps|probably)\b"
    r"|(?:\s|\\[,;: ]|\\q?quad)*\\tag\*?\s*\{\s*(?:wrong|incorrect|false|not|maybe|guess|unsure|invalid)\b"
)
# What may stand before a box that starts its own line: delimiters, spacing, display style.
_BOX_LINE_START = re.compile(r"(?:\s|\$|\\[\[(,;:! ]|\\q?quad|\\displaystyle|\\[lL]arge|\*\*)*")
#: A question mark this close after a box makes it a question: "\\boxed{10}?", "\\boxed{10} (?)".
_QUESTION_REACH = 12
# Right before a box: "it is not \\boxed{5}", "cannot be \\boxed{5}", "the wrong answer is \\boxed{5}";
# not "the ways that are not adjacent is \\boxed{12}".
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|\bnever|n['’]t|\bcannot)(?:\s+(?:be|equal|equals|exactly|quite|really))*[\s:=]*$"
    r"|\b(?:wrong|incorrect|false|invalid|erroneous|mistaken)\s+(?:answer|result|value|solution|choice|option)s?"
    r"(?:\s+(?:is|was|would\s+be))?[\s:=]*$",
    re.IGNORECASE,
)
#: A word every `_NEGATED_BEFORE` match holds ("cannot" holds "not").
_NEGATION_WORDS = (
    "not", "never", "n't", "n’t", "wrong", "incorrect", "false", "invalid", "erroneous", "mistaken",
)  # fmt: skip
#: Right after a statement: "or D", "and/or D" continue it into a hedge.
_ALTERNATIVE_NEXT = re.compile(r"\s*(?:or|and/or|nor)\b", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
#: Words that name an answer, in the languages models answer in.
_ANSWER_WORD = re.compile(
    r"\b(?:answers?|ans|results?|respuesta|r[ée]ponse|resposta|risposta|antwort|ответ)\b|答案|答え|정답",
    re.IGNORECASE,
)
# "Ans: 7", "Result: 7", "Answer (alt): 7": a label that names an answer; not "Note: ...".
_LABEL = re.compile(
    r"^[^\d:\n]{0,30}\b(?:answers?|ans|results?|final|total|solution|correction|options?|candidates?|alt"
    r"|alternatives?|respuesta|r[ée]ponse|antwort|ответ)\b[^\d:\n]{0,20}:\s*\S",
    re.IGNORECASE,
)
_OPTION_LETTER = re.compile(r"\(?[A-E]\)?")
#: A digit or a command: what a value written after an answer holds.
_VALUED = re.compile(r"\d|\\[a-zA-Z]")
_COMMAND = re.compile(r"\\[a-zA-Z]+")
#: After an answer, words that revise it ("However, ... the true count must be 7"): read as a
#: conclusion is.
_REVISION = re.compile(
    r"\b(?:however|instead|in\s+fact|recount\w*|recheck\w*|re-?examin\w*|on\s+reflection"
    r"|(?:true|real|correct|actual|right)\s+(?:answer|count|value|total|number|result))\b",
    re.IGNORECASE,
)
#: After an answer, a line that offers another value with doubt ("I'd go with 7 though", "My gut
#: says 7", "(7 if counting only the red ones)") restates one: a hedge.
_HEDGING = re.compile(
    r"\b(?:though|although|gut|torn|go\s+with|prefer|likely|probably|possibly|perhaps|maybe|might|could|think"
    r"|guess|believe|suspect"
    r"|alternatively|otherwise|if|unless|or)\b",
    re.IGNORECASE,
)
#: A word answer restated after a box is at most this many words (`string_match`).
MAX_WORD_VALUE = 4
_DESCRIBES_WRONG = re.compile(
    r"\b(?:mistakes?|errors?|wrong|incorrect|pitfalls?|traps?|misconceptions?)\b", re.I
)
_ALSO = re.compile(r"\b(?:too|also|as\s+well|equally|instead|rather)\b", re.IGNORECASE)
_CONTRAST = re.compile(r"\b(?:not|rather\s+than|instead\s+of)\b", re.IGNORECASE)
# Words that open a line without saying anything of their own: "So", "Thus", "Wait,", "Hmm".
_LEADING_FILLER = re.compile(
    r"^(?:\W*\b(?:so|thus|therefore|hence|then|finally|overall|altogether|actually|wait|hmm+|sorry|oops|ok|okay"
    r"|well|no|nope|correction)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
_INTERJECTION = re.compile(
    r"^\W*(?:wait|hmm+|sorry|oops|no|nope|actually|correction|hold\s+on|on\s+second\s+thought|edit|update"
    r"|erratum|errata|revised|revision|option|candidate|alternative|alt)\b|\\cancel\s*\{",
    re.IGNORECASE,
)
# The quantity a question asks for, named in a restating line: "So the total is 7".
_ASKED_FOR = re.compile(
    r"\b(?:total|count|sum|amount|final|value|number)\b(?:\s+\w+){0,3}?\s*(?:is|was|are|=|equals|comes\s+to)(?!\w)",
    re.IGNORECASE,
)
#: The end of the sentence a statement is in: the sentences after it are read on their own.
_AFTER_SENTENCE = re.compile(r"[.!?;](?:\s+|$)|\n")
MAX_CONCLUSION_LINE = 300
MAX_FINAL_LINE = 80
MAX_STATEMENTS = 32
#: More boxes or answer phrases than this is no answer anyone wrote to be read.
MAX_MARKERS = 256
#: Final lines are looked for in the text's last this many characters.
TAIL_WINDOW = 8000
#: A conclusion's result is looked for this far before it.
RESULT_WINDOW = 2000


@dataclass(frozen=True, slots=True)
class Statement:
    """One explicit answer: the value read, how it was found, the text it was read from (a box's
    content or the sentence after an answer phrase; multiple-choice letters are read from it),
    and where it starts and ends in the text."""

    answer: str
    method: str
    sentence: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Extraction:
    """The statements a completion makes, or why it makes none (``refusal``)."""

    statements: tuple[Statement, ...] = ()
    refusal: str | None = None

    @property
    def answers(self) -> tuple[str, ...]:
        """The distinct answers stated, in order."""
        return tuple(dict.fromkeys(statement.answer for statement in self.statements))

    @property
    def answer(self) -> str | None:
        """The last answer stated (the only one, when the completion commits)."""
        return self.statements[-1].answer if self.statements else None

    @property
    def method(self) -> str:
        return self.statements[-1].method if self.statements else "none"


def _sentence_start(text: str, position: int) -> int:
    """Where the sentence holding ``position`` starts (bounded look-back): after a line break, or
    after a full stop, question or exclamation mark that ends a word ("5! = 120" is a factorial)."""
    window_start = max(0, position - MAX_SENTENCE_CHARS)
    window = text[window_start:position]
    line = window.rfind("\n")
    ends = list(_SENTENCE_BREAK.finditer(window, line + 1))
    cut = ends[-1].end() - 1 if ends else line
    return window_start + cut + 1 if cut != -1 else window_start


def _sentence_after(text: str, start: int) -> str:
    """The rest of the sentence from ``start``: to the line end or the full stop before a new
    sentence; a math span that opens at ``start`` may run over lines ("Answer: $\\n 9 \\n$")."""
    window = text[start : start + MAX_SENTENCE_CHARS]
    leading = len(window) - len(window.lstrip())
    spans = math_spans(window) if window[leading : leading + 1] in ("$", "\\") else []  # what opens one
    skip = spans[0].end if spans and spans[0].start == leading else 0
    end = _SENTENCE_END.search(window, skip)
    return window[: end.start() if end else len(window)]


def _standing_boxes(text: str, found: list[Span]) -> tuple[list[Span], list[str], str | None]:
    """The boxes that are statements, why the others are not (struck out), and why the
    completion states no answer at all: a box that is an operand of an expression
    (`box_context`), where the reader reads another value than the box holds."""
    struck = struck_spans(text) if found else []
    standing, refusals = [], []
    for box in found:
        if inside(struck, box.start):
            refusals.append(f"the boxed answer {box.content[:40]!r} is struck out")
            continue
        # Read as if in mathematics first (the stricter reading): only a box that reading
        # refuses needs to know whether it is in mathematics at all.
        reason = operand_of_expression(text, box, in_math=True)
        if reason is not None and not _in_math(text, box):
            reason = operand_of_expression(text, box, in_math=False)
        if reason is not None:
            return [], [], f"a box inside an expression states another value: {reason}"
        standing.append(box)
    return standing, refusals, None


def _in_math(text: str, box: Span) -> bool:
    """Whether a box is inside a math span of its paragraph (a bounded stretch of text around it:
    inline math does not cross a blank line, and no display holding a box does in practice)."""
    start = text.rfind("\n\n", max(0, box.start - MAX_GROUP_CHARS), box.start)
    start = max(0, box.start - MAX_GROUP_CHARS) if start == -1 else start
    end = text.find("\n\n", box.end, box.end + MAX_GROUP_CHARS)
    end = min(len(text), box.end + MAX_GROUP_CHARS) if end == -1 else end
    return any(span.start < box.start - start < span.end for span in math_spans(text[start:end]))


def _phrase_matches(text: str) -> list[re.Match[str]]:
    """`_PHRASE`'s matches, as ``finditer`` finds them. Every match starts with "answer": in ASCII
    text (where lower-casing keeps positions) the pattern is tried only where that word starts, a
    seventh of the time of a scan that tries every position."""
    if not text.isascii():
        return list(_PHRASE.finditer(text))
    lowered, found = text.lower(), []
    start = lowered.find("answer")
    while start != -1:
        match = _PHRASE.match(text, start)
        if match is not None:
            found.append(match)
        start = lowered.find("answer", match.end() if match is not None else start + 1)
    return found


def _box_statements(text: str, found: list[Span]) -> tuple[list[Statement], list[str]]:
    """One statement per paragraph holding boxes, and the refusals among them.

    A box is read in its sentence, as a phrase is: negated right before it ("it is not
    \\boxed{5}") or called wrong anywhere in the sentence, it states nothing; inside a condition,
    an example or a question ("Suppose the answer is \\boxed{5}", "Is it \\boxed{5}?"), it states
    nothing either; doubted or bounded around it ("at least \\boxed{5}", "\\boxed{5} or more"), it
    is a hedge.
    """
    statements, refusals = [], []
    paragraphs: dict[int, list[Span]] = {}
    for box in found:
        paragraph_start = text.rfind("\n\n", 0, box.start)
        paragraphs.setdefault(paragraph_start, []).append(box)
    for group in paragraphs.values():
        contents = list(dict.fromkeys(box.content for box in group))
        start, trail = _sentence_start(text, group[0].start), _sentence_after(text, group[-1].end)
        raw_lead = text[start : group[0].start]
        # Masked as one piece, so that a box inside mathematics ("$$3 \times 5 = \boxed{15}$$")
        # has the mathematics around it masked too, and only prose is read as words.
        masked = mask_math(text[start : group[-1].end + len(trail)])
        lead, masked_trail = masked[: len(raw_lead)], masked[group[-1].end - start :]
        if (
            (mentions_any(lead, _NEGATION_WORDS) and _NEGATED_BEFORE.search(lead))
            or TAKEN_BACK_AFTER.search(masked_trail)
            or disowned(lead)
        ):
            refusals.append(
                f"the boxed answer is negated or called wrong: {(raw_lead + '...' + trail)[-80:]!r}"
            )
            continue
        if _asked(text, group[-1].end):
            refusals.append(f"the boxed answer is asked, not stated: {(raw_lead + '...' + trail)[-80:]!r}")
            continue
        if conditional(lead):
            continue  # a hypothesis or an example states no answer
        answer = ", ".join(contents)
        # The box's own math delimiter ("$" before "\\boxed") is masked as "#": not a word before it.
        spoken = _SUMS_TO.sub(" is ", lead.rstrip("# "))
        if doubted_before(spoken + " "):
            answer = f"{' '.join(words(lead)[-3:])} {answer}"
        if doubted_after("# " + masked_trail) or _TEXT_HEDGE.match(text, group[-1].end):
            # "\\boxed{5} or more": the words go with the value, which then reads as the hedge it is.
            answer = f"{answer} {trail.strip()}"
        statements.append(Statement(answer, "boxed", answer, group[0].start, group[-1].end))
    return statements, refusals


def _asked(text: str, end: int) -> bool:
    """Whether a question mark follows a box closely, within its sentence: "\\boxed{10}?",
    "\\boxed{10} (?)", "\\boxed{10} (7?)"."""
    window = text[end : end + _QUESTION_REACH].split("\n", 1)[0]
    mark = window.find("?")
    return mark != -1 and not re.search(r"[.!]\s", window[:mark])


def _phrase_statements(
    text: str, matches: list[re.Match[str]], box_starts: list[int]
) -> tuple[list[Statement], list[str]]:
    statements: list[Statement] = []
    refusals: list[str] = []
    for index, match in enumerate(matches):
        sentence = _sentence_after(text, match.end())
        end = match.end() + len(sentence)
        following = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        boxed = bisect.bisect_left(box_starts, match.end()) < bisect.bisect_left(box_starts, end)
        if following < end or boxed or not sentence.strip():
            continue  # a later phrase or a box in the same sentence states it, or nothing does
        lead = text[_sentence_start(text, match.start()) : match.start()]
        if disowned(mask_math(lead)):
            refusals.append(f"the answer is disowned: {(lead + match.group() + sentence)[-80:]!r}")
            continue
        if conditional(lead) or text.startswith("?", end):
            continue
        # "the answer is X" is followed by its value; "Answer: The largest n is 34." by a sentence.
        labelled = match.group().rstrip(" \t*").endswith(":")
        _add(
            statements,
            refusals,
            read_sentence(sentence) if labelled else read_predicate(sentence),
            method="answer_phrase",
            sentence=sentence,
            at=match.end(),
        )
    return statements, refusals


def _add(
    statements: list[Statement], refusals: list[str], reading: Reading, *, method: str, sentence: str, at: int
) -> None:
    if reading.answer is not None and not _is_prose(reading.answer):
        statements.append(Statement(reading.answer, method, sentence.strip(), at, at + len(sentence)))
    elif reading.refusal is not None:
        refusals.append(reading.refusal)


def _is_prose(text: str) -> bool:
    """Words without any mathematics ("the sum of the roots"); a one-word answer ("east") is not."""
    return not re.search(r"[\d\\$=^]", text) and len(re.findall(r"[A-Za-z]{3,}", text)) >= 2


# Braces that are not escaped (``\{`` is a literal brace, for sets).
_OPEN_BRACE = re.compile(r"(?<!\\)\{")
_CLOSE_BRACE = re.compile(r"(?<!\\)\}")
# "\[" opening a display; not the "\\[4pt]" of a line break with spacing.
_DISPLAY_OPEN = re.compile(r"(?<!\\)\\\[")
# A line ending where it cannot end: an operator, an opening bracket, a comma, a command that
# takes an argument, or a word that needs what follows ("the", "of", "if"; not "a", a variable).
_DANGLING_END = re.compile(
    r"(?:[-+*/=^_,(\[{]|\\(?:cdot|times|div|frac|dfrac|sqrt|left|pm))\s*$"
    r"|\b(?:the|an|of|to|and|or|if|is|are|was|were|be|by|for|with|that|than|on|at|from|as|into)\s*$",
    re.IGNORECASE,
)


def _final_line(text: str) -> tuple[int, str] | None:
    """The last non-blank line and where it starts; closing pleasantries ("I hope this helps!")
    and rules ("---") after it are passed over."""
    end, passed = len(text), 0
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].strip()
        end = start - 1
        if not line:
            continue
        if _SIGN_OFF.match(line) and passed < 3:
            passed += 1
            continue
        return start, line
    return None


def _labelled_final_line(text: str) -> Statement | None:
    """A final line "A: X" (the answer line of GSM8K-style few-shot prompts)."""
    final = _final_line(text)
    labels = [] if final is None else list(_LABEL_LINE.finditer(final[1]))
    if final is None or not labels:
        return None
    stated = final[1][labels[-1].end() :]
    reading = read_predicate(stated)
    if reading.answer is None:
        return None
    return Statement(
        reading.answer, "answer_label", stated, final[0] + labels[-1].start(), final[0] + len(final[1])
    )


def _final_line_statement(text: str, givens: frozenset[str]) -> tuple[Statement | None, str | None]:
    """The final line's statement, or why it makes none (``givens``: the question's numbers).

    A text that stops mid-way - inside a display or a brace, after an operator, or on a word
    that needs a continuation ("... if she does the") - has no final line: what its last line
    holds is working cut short (a generation that hit its token limit), and reading a number out
    of it paid cut-off rollouts whose last line happened to hold the reference."""
    offset = max(0, len(text) - TAIL_WINDOW)
    final = _final_line(text[offset:])
    if final is None:
        return None, None
    if cut_off := _cut_off(text, final[1]):
        return None, f"the completion stops mid-way ({cut_off}): {final[1][-60:]!r}"
    return _line_statement(text, final[0] + offset, final[1], givens)


def _cut_off(text: str, line: str) -> str | None:
    """How ``text``, whose last line is ``line``, visibly stops before its end; None when it
    does not. Single dollars are not counted (they are also currency)."""
    braces = len(_OPEN_BRACE.findall(line)) - len(_CLOSE_BRACE.findall(line))
    if braces > 0:
        return "an unclosed brace"
    opened = [match.start() for match in _DISPLAY_OPEN.finditer(text)]
    if (opened and opened[-1] > text.rfind("\\]")) or text.count("$$") % 2:
        return "an unclosed display"
    if _DANGLING_END.search(line[-40:]):  # the line's last words: a bounded search
        return "a dangling operator or word"
    return None


def _line_statement(
    text: str,
    position: int,
    line: str,
    givens: frozenset[str],
    *,
    after_statement: bool = False,
    final: bool = True,
    word_values: bool = False,
) -> tuple[Statement | None, str | None]:
    """What the line at ``position`` states, or why it states nothing.

    A line that concludes ("So the result is 11.") states the value of its conclusion; another
    line, when it is short or mathematics, states the value it reads as. ``after_statement``: the
    line follows an explicit statement, and is read only when it restates a value the way an
    answer is restated (`_restates`; ``final``: it is the last line, ``word_values``: a word is a
    value, as for `string_match`).
    """
    conclusions = list(_CONCLUSION.finditer(line))
    if after_statement:
        conclusions = sorted([*conclusions, *_REVISION.finditer(line)], key=lambda match: match.end())
        # Read after the last such word that a value follows ("Hmm, I think it's 7 instead.").
        conclusions = [match for match in conclusions if _VALUED.search(line, match.end())]
    said = line
    if conclusions and len(line) <= MAX_CONCLUSION_LINE:
        said = line[conclusions[-1].end() :]
        reading = read_sentence(said)
    elif len(line) <= (MAX_CONCLUSION_LINE if math_spans(line) else MAX_FINAL_LINE):
        reading = read_sentence(line)
    else:
        return None, None
    if after_statement:
        restates = reading.answer is not None and _restates(
            line, said, reading.answer, final=final, word_values=word_values
        )
        if not restates or reading.answer is None:
            return None, None
        reading = Reading(_restated_value(line, reading.answer))
    if reading.answer is None or _is_prose(reading.answer):
        return None, reading.refusal
    concluded_at = position + (conclusions[-1].start() if conclusions else 0)
    if len(_NUMBER.findall(reading.answer)) > 1 and (
        restated := _restated_result(text, concluded_at, reading, givens)
    ):
        return Statement(restated, "final_line", line, position, position + len(line)), None
    method = "final_math" if math_spans(line) and not conclusions else "final_line"
    return Statement(reading.answer, method, line, position, position + len(line)), None


def _restated_value(line: str, answer: str) -> str:
    """The value a restating line gives: after its label ("Ans: 7"), its one number among words
    ("Wait, 7.", "final answer 7"), or its words after an interjection ("Wait, London."); a
    doubted one stays whole, a hedge."""
    masked = mask_math(answer)
    if doubted(masked, None):
        return answer
    label = _LABEL.match(mask_math(line))
    if label is not None:
        return read_predicate(line[line.index(":") + 1 :]).answer or answer
    numbers = _NUMBER.findall(masked)
    if len(numbers) == 1 and not math_spans(answer):
        return numbers[0]
    return _LEADING_FILLER.sub("", answer).strip(" .!,;:") or answer


def _restates(line: str, said: str, answer: str, *, final: bool, word_values: bool) -> bool:
    """Whether a line after an answer restates one, rather than describing something else ("So
    Janet sells 9 eggs a day.", "His sister is 7.", "This is approximately 3.46."). It must hold a
    value and no other number, and say it as an answer is said: naming the answer or the
    quantity asked for ("The right answer is 7", "So the total is 7", "Result: 7"), revising or
    interjecting ("Wait, 7.", "However, ... the true count must be 7"), offering it with doubt
    ("I'd go with 7 though"), or - on the last line - as a bare value ("7.", "$$x = 7$$", "So
    x = 7.", "D"). ``said`` is the part of the line read for the value (after its conclusion
    word); a number after a contrast there ("7 rather than 10") is the one given up."""
    stripped = line.strip().rstrip(".!").strip()
    spans = math_spans(stripped)
    whole_math = len(spans) == 1 and spans[0].start == 0 and spans[0].end == len(stripped)
    short_words = word_values and len(answer.split()) <= MAX_WORD_VALUE
    option = _OPTION_LETTER.fullmatch(answer.strip())
    valued = whole_math or short_words or bool(_VALUED.search(answer) or option)
    contrast = _CONTRAST.search(said)
    said = said[: contrast.start()] if contrast else said
    if not valued or sorted(_NUMBER.findall(said)) != sorted(_NUMBER.findall(answer)):
        return False
    masked = mask_math(stripped)
    if _DESCRIBES_WRONG.search(masked):
        return False  # "Note: a common mistake is to answer 7" names a wrong answer, not another
    rest = _LEADING_FILLER.sub("", masked)
    if word_values:
        rest = rest.replace(_LEADING_FILLER.sub("", answer).strip(" .!,;:"), " ")
    bare = not any(len(word) > 1 for word in words(_NUMBER.sub(" ", rest)))
    return (
        (bare and final)
        or bool(_ANSWER_WORD.search(masked) or _LABEL.match(masked) or _ASKED_FOR.search(masked))
        or bool(_REVISION.search(masked) or _INTERJECTION.match(masked) or _HEDGING.search(masked))
    )


_RESULT = re.compile(r"=\s*\\?\$?\s*(-?\d[\d,]*(?:\.\d+)?)")


#: An answer block's content up to this long, on one line, is read as a box in its place.
MAX_BARE_BLOCK = 200


def block_in_place(content: str) -> Callable[[str], str] | None:
    """How to read an answer block in its place in the text, so that the words around it count
    ("It is not <answer>10</answer>", "<answer>10</answer> or 7", a retraction after it): a bare
    answer becomes a box there; content with its own statements (a box, "The answer is") stands
    there as a paragraph. None for other content (a whole solution in the block), which is read
    on its own."""
    stripped = content.strip()
    if box_count(stripped) or _PHRASE.search(stripped) or _HASHES.search(stripped):
        return lambda block: f"\n\n{block}\n\n"
    return (lambda block: f"\\boxed{{{block.strip()}}}") if bare_answer(stripped) else None


def bare_answer(content: str) -> bool:
    """Whether an answer block holds just an answer: one short line, braces balanced, no
    statement of its own."""
    stripped = content.strip()
    if not stripped or "\n" in stripped or len(stripped) > MAX_BARE_BLOCK:
        return False
    if box_count(stripped) or _PHRASE.search(stripped) or _HASHES.search(stripped):
        return False
    return stripped.count("{") == stripped.count("}")


def offers_another(text: str) -> bool:
    """Whether a line of ``text`` (what follows an answer) offers another answer in words: with
    doubt, an interjection or a revision ("Though London is equally likely.", "Hmm, London, I
    think.", "London works too."). For answers in words, where no value can be compared."""
    for line in text[-TAIL_WINDOW:].split("\n"):
        said = mask_math(line.strip())
        if not said or _SIGN_OFF.match(said):
            continue
        if _HEDGING.search(said) or _INTERJECTION.match(said) or _REVISION.search(said) or _ALSO.search(said):
            return True
    return False


def concluding_statement(text: str, question: str = "") -> Statement | None:
    """The final line of ``text`` when it concludes ("Thus x = 7.") and states one value; the
    text around an answer block is read for this as well as for explicit statements."""
    text = reader_text(text)
    offset = max(0, len(text) - TAIL_WINDOW)
    final = _final_line(text[offset:])
    if final is None or not _CONCLUSION.search(final[1]):
        return None
    statement, _ = _line_statement(text, final[0] + offset, final[1], _givens(question))
    return statement if statement is not None and not _several_in_prose(statement.answer) else None


def _givens(question: str) -> frozenset[str]:
    return frozenset(n.replace(",", "") for n in _NUMBER.findall(question[-TAIL_WINDOW:]))


def _restated_result(text: str, concluded_at: int, reading: Reading, givens: frozenset[str]) -> str | None:
    """The one number of a concluding sentence with several ("So she spends 34 hours in 4
    weeks.") that the work before it computed last ("... = 34 hours"), when every other number
    in it is one of the question's ``givens``; None otherwise.

    A conclusion restates its result among the question's givens; the last computation tells
    which number is the result, where picking the last number would pick a given. Without the
    question (no ``givens``) a conclusion with several numbers states no single one.
    """
    if reading.answer is None or not re.search(r"[A-Za-z]{2,}", reading.answer):
        return None  # several numbers in one expression ("2/3") are one value, not a choice
    if doubted(mask_math(reading.answer), None):
        return None
    results = list(_RESULT.finditer(text, max(0, concluded_at - RESULT_WINDOW), concluded_at))
    if not results:
        return None
    result = results[-1].group(1).replace(",", "")
    numbers = [n.replace(",", "") for n in _NUMBER.findall(reading.answer)]
    others = [n for n in numbers if n != result]
    if numbers.count(result) != 1 or not others or not all(n in givens for n in others):
        return None
    return result


def extract_answer(
    text: str,
    *,
    question: str = "",
    use_phrases: bool = True,
    use_final_line: bool = True,
    last_number_fallback: bool = False,
    word_values: bool = False,
) -> Extraction:
    """The answers ``text`` commits to (see the module docstring); ``question`` is the prompt,
    whose numbers tell a conclusion's result from the givens it repeats; ``word_values``: a word
    restated after the answer is a value ("\\boxed{Paris}. Wait, London."), for answers in words."""
    text = reader_text(text)
    givens = _givens(question)
    if box_count(text) > MAX_MARKERS or text.count("####") > MAX_MARKERS:
        return Extraction(refusal=f"more than {MAX_MARKERS} boxes or #### marks: no single answer")
    found, struck, embedded = _standing_boxes(text, boxes(text))
    if embedded is not None:
        return Extraction(refusal=embedded)
    phrases: list[re.Match[str]] = []
    for match in _phrase_matches(text) if use_phrases else ():
        if match.start() and text[match.start() - 1].isalpha():
            continue  # part of a longer word ("unanswered")
        if len(phrases) == MAX_MARKERS:
            return Extraction(refusal=f"more than {MAX_MARKERS} answer phrases: no single answer")
        phrases.append(match)
    statements, refusals = _box_statements(text, found)
    refusals = struck + refusals
    if use_phrases:
        phrased, refused = _phrase_statements(text, phrases, [box.start for box in found])
        statements += phrased
        refusals += refused
        for match in _HASHES.finditer(text):
            if match.start() and not text[match.start() - 1].isspace():
                continue  # "#####" or "a####": not GSM8K's marker
            sentence = _sentence_after(text, match.end())
            _add(
                statements,
                refusals,
                read_predicate(sentence),
                method="hash",
                sentence=sentence,
                at=match.end(),
            )
        if not statements and (labelled := _labelled_final_line(text)) is not None:
            statements = [labelled]
    statements.sort(key=lambda statement: statement.start)
    if len(statements) > MAX_STATEMENTS:
        return Extraction(refusal=f"more than {MAX_STATEMENTS} answer statements: no single answer")
    if statements:
        return _committed(text, statements, givens, use_final_line=use_final_line, word_values=word_values)
    if refusals:
        # Every explicit statement was negated or called wrong: the final line, which may hold
        # one of them, is not read again as a fresh answer.
        return Extraction(refusal=refusals[-1])
    if use_final_line:
        statement, refusal = _final_line_statement(text, givens)
        if statement is not None:
            return Extraction((statement,))
        if refusal is not None:
            refusals.append(refusal)
    if last_number_fallback and (number := _last_number(text)) is not None:
        return Extraction((number,))
    return Extraction(refusal=refusals[-1] if refusals else None)


def _committed(
    text: str, statements: list[Statement], givens: frozenset[str], *, use_final_line: bool, word_values: bool
) -> Extraction:
    """The explicit statements, unless what follows the last one takes it back or goes on to
    another: a retraction, "or D" right after it, or a concluding final line ("So the result
    is 11.") that states a value of its own, which then counts as one more statement."""
    last = statements[-1]
    following = text[last.end :]
    if _ALTERNATIVE_NEXT.match(following):
        hedge = f"{last.answer} {_sentence_after(following.lstrip(), 0).strip()}"
        statements = [*statements[:-1], Statement(hedge, last.method, hedge, last.start, last.end)]
    taken_back = retraction(following)
    before_box = _line_before_box(text, last)
    if taken_back is None and before_box is not None:
        taken_back = admits_failure(before_box[1])  # "I could not solve this problem.\n\n\\boxed{10}"
    if taken_back is not None:
        return Extraction(refusal=f"the completion takes its answer back ({taken_back!r})")
    if use_final_line:
        lead_in = _lead_in(text, last, givens)
        restated = _restatements(text, last, givens, word_values=word_values)
        statements = [*([lead_in] if lead_in else []), *statements, *restated]
    return Extraction(tuple(statements))


def _line_before_box(text: str, last: Statement) -> tuple[int, str] | None:
    """For a box that stands alone on its lines, the line before it (before its display, when
    the box opens one) and where that line starts; None otherwise."""
    line_start = text.rfind("\n", 0, last.start) + 1
    if (
        last.method != "boxed"
        or not _BOX_LINE_START.fullmatch(text[line_start : last.start])
        or line_start == 0
    ):
        return None
    before = text[max(0, line_start - MAX_CONCLUSION_LINE) : line_start].rstrip()
    line = before[before.rfind("\n") + 1 :].strip()
    if line in ("\\[", "$$"):  # the box opens a display: the line before the display leads in
        before = before[: before.rfind("\n")].rstrip()
        line = before[before.rfind("\n") + 1 :].strip()
    return (text.rfind(line, 0, line_start), line) if line else None


def _lead_in(text: str, last: Statement, givens: frozenset[str]) -> Statement | None:
    """For a box that stands alone on its lines ("Thus the count is 7.\n\n\\boxed{10}"), the
    line before it when it concludes with a value of its own: a reader reads that line as the
    box's lead-in, and two values there are two answers."""
    found = _line_before_box(text, last)
    if found is None or found[1].endswith(":"):
        return None
    position, line = found
    said = mask_math(line)
    leads = _CONCLUSION.search(line) or _INTERJECTION.match(line)
    if not (leads or _HEDGING.search(said) or _LABEL.match(said)):
        return None
    statement, _ = _line_statement(text, position, line, givens)
    if statement is None or (
        _several_in_prose(statement.answer) and not doubted(mask_math(statement.answer), None)
    ):
        return None  # "So Tom has 4 apples and Ana has 6." describes; "Honestly, 7 or 10." hedges
    return replace(statement, answer=_restated_value(line, statement.answer), method="lead_in")


def _restatements(
    text: str, last: Statement, givens: frozenset[str], *, word_values: bool = False
) -> list[Statement]:
    """The lines after the last statement that state a value of their own (see
    `_line_statement`) in the text's last `TAIL_WINDOW` characters, the sentences after the
    statement's own on its line included ("\\boxed{10}. Wait, 7."). Each counts as one more
    statement (a hedged one makes the completion a hedge); a line with several numbers that is not
    a conclusion's restated result does not count."""
    start = max(last.end, len(text) - TAIL_WINDOW)
    lines: list[tuple[int, str]] = []
    position = start
    for piece in text[start:].split("\n"):
        lines.append((position, piece))
        position += len(piece) + 1
    if lines and text.rfind("\n", 0, start) < last.start:
        # The rest of the statement's own line: only the sentences after the statement's.
        boundary = _AFTER_SENTENCE.search(lines[0][1])
        lines[0] = (lines[0][0] + boundary.end(), lines[0][1][boundary.end() :]) if boundary else (0, "")
    found = []
    said = [i for i, (_, piece) in enumerate(lines) if piece.strip() and not _SIGN_OFF.match(piece.strip())]
    last_line = said[-1] if said else -1
    for index, (line_start, piece) in enumerate(lines):
        line = piece.strip()
        if not line or _SIGN_OFF.match(line):
            continue
        at = line_start + piece.index(line[0])
        statement, _ = _line_statement(
            text, at, line, givens, after_statement=True, final=index == last_line, word_values=word_values
        )
        if statement is not None and not _several_in_prose(statement.answer):
            found.append(replace(statement, method="restated"))
    return found


def _several_in_prose(answer: str) -> bool:
    """Several numbers among words ("34 hours in 4 weeks"): a sentence, not one value ("7/2",
    "\\frac{7}{2}" and "x = 7" are one)."""
    return len(_NUMBER.findall(answer)) > 1 and bool(words(_COMMAND.sub(" ", answer)))


def _last_number(text: str) -> Statement | None:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    last = numbers[-1]
    return Statement(last.group(), "last_number", last.group(), last.start(), last.end())


def reference_answer(reference: str) -> str | None:
    """The gold answer inside a reference: a bare answer as it is; from a whole solution, its
    boxed answer (the last box), GSM8K's "#### X" or final "A: X", or the answer it states.
    None when a solution states no answer."""
    text = reader_text(reference).strip()
    found = boxes(text) if box_count(text) <= MAX_MARKERS else []
    if found:
        return found[-1].content
    hashes = list(_HASHES.finditer(text))
    if hashes:
        return _sentence_after(text, hashes[-1].end()).strip() or None
    if "\n" not in text and len(text) <= MAX_CONCLUSION_LINE and not _PHRASE.search(text):
        return text or None
    extraction = extract_answer(text)
    if len(extraction.answers) != 1 or not re.search(r"[\d\\]", extraction.answers[0]):
        return None  # a solution whose last words state no value ("Done.") gives no answer
    return extraction.answers[0]
