"""The linear checkers give the reference checkers' results, on random text and on the text that
made the reference ones quadratic, and stay linear."""

import re
import string
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.rewards.instruction_checkers import count_placeholders, has_title, reference_blank_removal

ALPHABET = st.sampled_from(
    ["[", "]", "<<", ">>", "<", ">", "\n", " ", "  ", "\t", "a", "b", "*", "p.s.", "P.S."]
)
TEXT = st.lists(ALPHABET, max_size=60).map("".join)


def reference_removal(lines):
    lines = list(lines)
    for line in lines:
        if not line.strip():
            lines.remove(line)
    return lines


def reference_title(value):
    return any(title.lstrip("<").rstrip(">").strip() for title in re.findall(r"<<[^\n]+>>", value))


@settings(max_examples=500, deadline=None)
@given(TEXT)
def test_same_results_as_the_reference_checkers(text):
    assert count_placeholders(text) == len(re.findall(r"\[.*?\]", text))
    assert has_title(text) == reference_title(text)
    lines = text.split("\n")
    assert reference_blank_removal(lines) == reference_removal(lines)
    for marker, pattern in (("P.S.", r"\s*p\.\s?s\..*$"), ("P.P.S", r"\s*p\.\s?p\.\s?s.*$")):
        expected = bool(re.findall(pattern, text.lower(), flags=re.MULTILINE))
        assert postscript(marker).check_following(text) is expected
    assert new_line_words().check_following(text) == reference_new_line_words(text)


def postscript(marker):
    from rewardlab.rewards.instructions import _REGISTRIES

    checker = _REGISTRIES["ifeval"]["detectable_content:postscript"]("detectable_content:postscript")
    checker.build_description(postscript_marker=marker)
    return checker


def new_line_words():
    from rewardlab.rewards.instructions import _REGISTRIES

    checker = _REGISTRIES["ifbench"]["format:newline"]("format:newline")
    checker.build_description()
    return checker


def reference_new_line_words(value):
    value = value.translate(str.maketrans("", "", string.punctuation))
    lines = value.strip().split("\n")
    while "" in lines:
        lines.remove("")
    return len(lines) == len(value.strip().split())


def test_linear_where_the_reference_was_quadratic():
    for make in (lambda n: "[" * n, lambda n: "<<" * (n // 2), lambda n: "a\n\n" * (n // 3)):
        timings = []
        for size in (40_000, 160_000):
            text = make(size)
            started = time.perf_counter()
            count_placeholders(text)
            has_title(text)
            reference_blank_removal(text.split("\n"))
            timings.append(time.perf_counter() - started)
        assert timings[1] < 1.0 and timings[1] < 8 * timings[0] + 0.1, timings
