"""`as_seen` reads characters as they look, and leaves text in other scripts alone."""

import pytest

from rewardlab.rewards.visible_text import as_seen


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("Hello\u201a world", "Hello, world"),  # a low quotation mark drawn as a comma
        ("Hello\u060c world", "Hello, world"),  # the Arabic comma
        ("Hello\u3001world", "Hello,world"),  # the ideographic comma
        ("Hello\uff0c world", "Hello, world"),  # full width, through NFKC
        ("sec\u200bret", "secret"),  # a zero-width space
        ("s\u0435cret", "secret"),  # a Cyrillic e among Latin letters
        ("\u0455\u0435cr\u0435t", "secret"),  # mostly Cyrillic look-alikes, one Latin letter
        ("\u03bfpen", "open"),  # a Greek omicron
        ("Hello\ua4f9 world", "Hello, world"),  # a Lisu tone mark drawn as a comma
        ("Hello \u0326world", "Hello ,world"),  # a combining comma below
        ("One\u3164two", "One two"),  # the Hangul filler, drawn as a space
        ("c\u0336heap", "cheap"),  # struck through, still the word
        (
            "This deal is \u0441\u04bb\u0435\u0430\u0440 indeed.",
            "This deal is cheap indeed.",
        ),  # all look-alikes
    ],
)
def test_look_alikes_read_as_what_they_look_like(text, seen):
    assert as_seen(text) == seen


@pytest.mark.parametrize(
    "text",
    [
        "Привет, как дела?",  # Russian stays Russian
        "Καλημέρα κόσμε",  # so does Greek
        "plain ASCII, with commas",
        "数学 answer",
    ],
)
def test_text_in_one_script_is_unchanged(text):
    assert as_seen(text) == text
