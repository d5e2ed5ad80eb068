"""Adversarial model text of a given size, for tests that bound how long a parser takes.

Every generator takes ``size`` (about how many characters to make; the result is within one
repeated unit of it) and returns a string. They cover what sends a regular expression or a
scanning loop into super-linear work: long runs of one character, many openers that are never
closed (each one makes a lazy search scan to the end), deep nesting, whitespace between the
parts of a verdict statement, and plain prose as a baseline. `CATALOGUE` names them all, for
parametrized tests; `FRAGMENTS` are short pieces for property-based tests to join at random.
"""

from __future__ import annotations

import random
from collections.abc import Callable

_WORDS = tuple(
    " ".join(
        [
            "the answer follows from the second step because we divide both sides by three and then",
            "check that the result satisfies the original equation so the final value is seven which",
            "matches what the problem asked for although one could also argue from symmetry that the",
            "two roots must add up to the coefficient of x with its sign flipped",
        ]
    ).split(" ")
)


def repeated(fragment: str, size: int) -> str:
    """``fragment`` repeated to about ``size`` characters (at least once)."""
    return fragment * max(1, size // max(1, len(fragment)))


def run_of(char: str, size: int) -> str:
    """One character ``size`` times."""
    return char * size


def prose(size: int, seed: int = 0) -> str:
    """Real-looking paragraphs of reasoning: sentences of ordinary words, blank lines between
    paragraphs, now and then a number, an equation or a verdict-like phrase."""
    rng = random.Random(seed)
    pieces: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 20)))
        extra = rng.choice(["", "", "", f" x = {rng.randint(0, 99)}", " (see step 2)", ", score 7 of 10"])
        sentence = sentence.capitalize() + extra + "."
        sep = "\n\n" if rng.random() < 0.15 else " "
        pieces.append(sentence + sep)
        length += len(sentence) + len(sep)
    return "".join(pieces)[:size]


def long_paragraph(size: int) -> str:
    """One paragraph with no line break at all."""
    return prose(size).replace("\n", " ")


def many_short_lines(size: int) -> str:
    """``a`` on each of many lines: as many steps, segments or list items as possible."""
    return repeated("a\n", size)


def many_blank_separated(size: int) -> str:
    """Many one-letter paragraphs separated by blank lines."""
    return repeated("a\n\n", size)


def unclosed_code_fences(size: int) -> str:
    """Lines that each open a fenced code block with an info string, none closed."""
    return repeated("```a\n", size)


def unclosed_tilde_fences(size: int) -> str:
    """Tilde fences of decreasing length, none closed (a fence may be read shorter than written)."""
    return repeated("~~~~~~~~ x\n", size)


def unclosed_boxed(size: int) -> str:
    return repeated("\\boxed{", size)


def unclosed_think(size: int) -> str:
    return repeated("<think>", size)


def dollars(size: int) -> str:
    return run_of("$", size)


def open_braces(size: int) -> str:
    return run_of("{", size)


def open_parens(size: int) -> str:
    return run_of("(", size)


def nested_brackets(size: int) -> str:
    """Brackets of three kinds nested ``size / 6`` deep, then closed."""
    depth = max(1, size // 6)
    return "([{" * depth + "}])" * depth


def digits_and_operators(size: int) -> str:
    """One long line of arithmetic, with no line break."""
    return repeated("12+34*56-78/9=", size)


def long_digits(size: int) -> str:
    return run_of("7", size)


def score_fragments(size: int) -> str:
    """Verdict words again and again, never followed by a label."""
    return repeated("Score: ", size)


def double_brackets(size: int) -> str:
    return repeated("[[", size)


def json_score_openers(size: int) -> str:
    """JSON verdict objects opened and never finished."""
    return repeated('{"score":', size)


def json_nested_objects(size: int) -> str:
    """One JSON object nested ``size / 5`` deep and never closed."""
    return repeated('{"a":', size)


def json_nested_then_array(size: int, depth: int = 900) -> str:
    """Objects nested ``depth`` deep around a long array that never closes: every object start
    parses the whole array before failing (fewer objects in a short text)."""
    head = '{"a":' * min(depth, max(1, size // 20)) + "["
    return head + repeated("0,", max(2, size - len(head)))


def json_valid_deep(size: int) -> str:
    """A valid JSON object nested ``size / 6`` deep (deeper than the json module can read)."""
    depth = max(1, size // 6)
    return '{"a":' * depth + "1" + "}" * depth


def json_big_integer(size: int) -> str:
    """A JSON verdict whose value has ``size`` digits (Python's int limit is 4300)."""
    return '{"score": ' + run_of("1", size) + "}"


def json_long_unclosed_strings(size: int) -> str:
    """Object starts inside strings inside strings, never closed."""
    return repeated('{"a": "{\\"b\\": \\"', size)


def json_many_criteria(size: int) -> str:
    """A valid rubric answer with as many (distinct) criteria as fit in ``size``."""
    entry = '{"text": "criterion number %d", "category": "essential"}'
    count = max(1, size // (len(entry) + 2))
    return '{"criteria": [' + ", ".join(entry % i for i in range(count)) + "]}"


def whitespace_after_verdict_word(size: int) -> str:
    """``Score:`` then a long run of whitespace and no label."""
    return "Score:" + run_of(" ", size) + "x"


def whitespace_in_json_verdict(size: int) -> str:
    """A JSON verdict whose value is written in another form than Python prints it (``1e1``
    for 10.0), after a long run of whitespace."""
    return '{"score":' + run_of(" ", size) + "1e1}"


def whitespace_between_statement_parts(size: int) -> str:
    """``Rating**`` then runs of spaces and stars."""
    return "Rating" + repeated(" *", size) + " x"


def labels_without_scale(size: int) -> str:
    """Labels followed by whitespace and something other than ``/10``."""
    return repeated("7      x ", size)


def fence_markers(size: int) -> str:
    """Fence BEGIN markers that never complete."""
    return "<<<BEGIN " + repeated("0 ", size)


def quoted_fences(size: int) -> str:
    """A judge quoting a fenced block of its prompt again and again (see `tests.test_parsers_time_bounds`
    for the fence), and finally opening it once more without closing it."""
    quote = "<<<BEGIN RESPONSE 0123456789ab>>>\nScore: 1\n<<<END RESPONSE 0123456789ab>>>\n"
    return repeated(quote, size) + "<<<BEGIN RESPONSE 0123456789ab>>>"


def step_markers(size: int) -> str:
    """Lines that almost start a step marker or a numbered item."""
    return repeated("   ## **step\n  12345\n", size)


def mixed_unicode(size: int, seed: int = 0) -> str:
    """Letters, marks, emoji, CJK, right-to-left text and odd whitespace."""
    rng = random.Random(seed)
    alphabet = "aé∑中文한국語العربية😀\u200b\u00a0\u2028\t\n ǘß∞≤√πΩ{}[]()$\\`~\"'"
    return "".join(rng.choice(alphabet) for _ in range(size))


def backtick_runs(size: int) -> str:
    """Code-span openers of growing lengths, none closed by a run of the same length."""
    return repeated("`` a ``` b ` c \\` d ", size)


def link_openers(size: int) -> str:
    """Bracketed text followed by targets that never close, and strike tags never closed."""
    return repeated("[note](Actually <s>x ", size)


def link_then_spaces(size: int) -> str:
    """A link opened, then one long run of spaces and tabs (three runs of spaces in a row in a
    pattern traded characters quadratically), then HTML tags opened and never closed."""
    return "[a](" + repeated(" \t", size // 2) + repeated("<span style='display:none'><style>", size // 2)


def boxes_in_expressions(size: int) -> str:
    """Boxes with signs, operators and spacing commands around them, as few as the box limit
    allows, in a sea of spacing."""
    return repeated("$x \\neq \\quad\\;\\, " + " " * 40 + "$ ", size - 40) + "$-\\boxed{1}^2$"


def restating_lines(size: int) -> str:
    """An answer, then many short lines that each look like a restated value."""
    return "\\boxed{10}\n" + repeated("Wait, 7.\nAns: 8\n$$x = 9$$\n", size)


CATALOGUE: dict[str, Callable[[int], str]] = {
    "prose": prose,
    "long_paragraph": long_paragraph,
    "run_of_a": lambda size: run_of("a", size),
    "run_of_spaces": lambda size: run_of(" ", size),
    "run_of_newlines": lambda size: run_of("\n", size),
    "run_of_backticks": lambda size: run_of("`", size),
    "many_short_lines": many_short_lines,
    "many_blank_separated": many_blank_separated,
    "unclosed_code_fences": unclosed_code_fences,
    "unclosed_tilde_fences": unclosed_tilde_fences,
    "unclosed_boxed": unclosed_boxed,
    "unclosed_think": unclosed_think,
    "dollars": dollars,
    "open_braces": open_braces,
    "open_parens": open_parens,
    "nested_brackets": nested_brackets,
    "digits_and_operators": digits_and_operators,
    "long_digits": long_digits,
    "score_fragments": score_fragments,
    "double_brackets": double_brackets,
    "json_score_openers": json_score_openers,
    "json_nested_objects": json_nested_objects,
    "json_nested_then_array": json_nested_then_array,
    "json_valid_deep": json_valid_deep,
    "json_big_integer": json_big_integer,
    "json_long_unclosed_strings": json_long_unclosed_strings,
    "json_many_criteria": json_many_criteria,
    "whitespace_after_verdict_word": whitespace_after_verdict_word,
    "whitespace_in_json_verdict": whitespace_in_json_verdict,
    "whitespace_between_statement_parts": whitespace_between_statement_parts,
    "labels_without_scale": labels_without_scale,
    "fence_markers": fence_markers,
    "quoted_fences": quoted_fences,
    "step_markers": step_markers,
    "mixed_unicode": mixed_unicode,
    "backtick_runs": backtick_runs,
    "link_openers": link_openers,
    "link_then_spaces": link_then_spaces,
    "boxes_in_expressions": boxes_in_expressions,
    "restating_lines": restating_lines,
}

#: Short pieces of the structures parsers look for, for property tests to join at random.
FRAGMENTS: tuple[str, ...] = (
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    "a",
    "word ",
    "7",
    "10",
    "-",
    ".",
    "1e1",
    "*",
    "**",
    "(",
    ")",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    '"',
    "\\",
    ":",
    ",",
    "=",
    "/",
    " out of 10",
    "Score: ",
    "Verdict = ",
    "yes",
    "A",
    "tie",
    '{"score": ',
    '{"steps": [',
    '{"criteria": [',
    '{"text": "x", "category": "essential"}',
    '"label": "correct"',
    "```",
    "```python\n",
    "~~~",
    "~~~~ x\n",
    "<<<BEGIN RESPONSE 0123456789ab>>>",
    "<<<END RESPONSE 0123456789ab>>>",
    "Step 1:",
    "## Step 2\n",
    "1. ",
    "2) ",
    "\\boxed{",
    "-\\boxed{1}",
    "~~",
    "<s>",
    "](",
    "\\`",
    "<think>",
    "$",
    "é",
    "中",
    "😀",
)
