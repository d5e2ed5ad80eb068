"""The shortcuts the math reader takes for speed find exactly what the plain scans find.

Each shortcut (a number read without the parser, a pattern tried only where its keyword occurs,
a pattern tried on a growing tail) is checked against the plain way on generated text, so a
shortcut can never read a completion differently from the rule it speeds up.
"""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.rewards.math import box_context, commitment, extract
from rewardlab.rewards.math.commitment import mentions_any
from rewardlab.rewards.math.expression import parse_expression


@given(st.from_regex(r"[0-9]{1,30}(\.[0-9]{1,30})?", fullmatch=True))
def test_a_plain_number_reads_as_the_parser_reads_it(number):
    # In brackets the text goes through the tokenizer and the parser.
    assert parse_expression(number) == parse_expression(f"({number})")


@settings(max_examples=300)
@given(st.data())
def test_every_negation_or_disowning_holds_one_of_its_keywords(data):
    for pattern, keywords in (
        (extract._NEGATED_BEFORE, extract._NEGATION_WORDS),
        (commitment._DISOWNING, commitment._DISOWNING_WORDS),
    ):
        text = data.draw(st.from_regex(pattern))
        assert pattern.search(text), text  # generated texts match
        assert mentions_any(text, keywords), text


def test_case_folds_python_matches_are_seen_by_the_keyword_test():
    # Python's IGNORECASE matches these look-alike letters; the keyword test must too.
    for text in ("it is falſe that x", "the answer ıs not", "İncorrect answer is", "NOT"):
        pattern = commitment._DISOWNING if "that" in text else extract._NEGATED_BEFORE
        assert pattern.search(text), text
        keywords = commitment._DISOWNING_WORDS if "that" in text else extract._NEGATION_WORDS
        assert mentions_any(text, keywords), text
    assert not mentions_any("the sum of the numbers is", extract._NEGATION_WORDS)


_SPACING_PIECES = [" ", "\t", "\n", "\u2003", "\\,", "\\;", "\\ ", "\\quad", "\\qquad", "~", "\\displaystyle"]
_OTHER_PIECES = ["x", "=", "\\", "q", "quad", "5", "{", "}", "\\frac", "display", "style"]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(_SPACING_PIECES + _OTHER_PIECES), max_size=60))
def test_trailing_spacing_is_cut_where_a_whole_search_cuts_it(pieces):
    text = "".join(pieces)
    whole = box_context._SPACING_BEFORE.search(text)
    expected = text[: whole.start()] if whole else text
    assert box_context._without_trailing_spacing(text) == expected


def test_a_long_run_of_spacing_is_cut_whole():
    text = "2 + " + "\\quad " * 200
    assert box_context._without_trailing_spacing(text) == "2 +"


_PHRASE_PIECES = ["answer", "Answer", "ANSWERS", "answers", " is", " to the question", ":", "**", " ", "\n",
                  "un", "The final ", "=", "$", "5", "would be", "ſ", "x"]  # fmt: skip


@settings(max_examples=500)
@given(st.lists(st.sampled_from(_PHRASE_PIECES), max_size=40))
def test_answer_phrases_are_the_ones_a_full_scan_finds(pieces):
    text = "".join(pieces)
    expected = [match.span() for match in extract._PHRASE.finditer(text)]
    assert [match.span() for match in extract._phrase_matches(text)] == expected


def test_a_phrase_spelled_with_a_long_s_is_still_found():
    text = "So \\boxed{5}. Final anſwer: 7"
    assert [m.group() for m in extract._phrase_matches(text)] == [
        m.group() for m in extract._PHRASE.finditer(text)
    ]
    assert re.search("ſ", extract._phrase_matches(text)[0].group())


_WORDS = [
    "at",
    "least",
    "most",
    "or",
    "more",
    "5",
    "is",
    "the",
    "answer",
    "not",
    "wrong",
    "maybe",
    "#",
    " ",
    ",",
    ".",
]


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(_WORDS), max_size=12).map(" ".join),
    st.lists(st.sampled_from(_WORDS), max_size=12).map(" ".join),
)
def test_a_box_is_doubted_by_its_halves_as_by_the_whole_sentence(lead, trail):
    # The box's reader asks only the half of `doubted` that can see words: the words before the
    # box (the box itself masked as "#" after them), or the words after it.
    assert commitment.doubted(lead + " #", len(lead) + 1) == commitment.doubted_before(lead + " ")
    assert commitment.doubted("# " + trail, 0) == commitment.doubted_after("# " + trail)
