"""Characters a reader does not tell apart: look-alike letters and punctuation, and invisible ones.

Both blind and aimed at every reward. Text checks (a forbidden comma, a required keyword, a
repeated n-gram, a word count) compare code points; a reader, and often a model judge, sees the
same text. LaTeX command names are left alone so that the mathematics still reads.
"""

from __future__ import annotations

from collections.abc import Callable

from rewardlab.probe.completion_parts import word_letters
from rewardlab.probe.exploit import Target
from rewardlab.probe.registry import register_exploit

#: Latin letters and the Cyrillic or Greek letters drawn the same way; the comma and the single
#: low-9 quotation mark.
CONFUSABLES = str.maketrans(
    {
        "a": "\u0430",
        "c": "\u0441",
        "e": "\u0435",
        "o": "\u043e",
        "p": "\u0440",
        "x": "\u0445",
        "y": "\u0443",
        "A": "\u0391",
        "B": "\u0392",
        "E": "\u0395",
        "H": "\u0397",
        "K": "\u039a",
        "M": "\u039c",
        "O": "\u039f",
        "P": "\u03a1",
        "T": "\u03a4",
        "X": "\u03a7",
    }
)
ZERO_WIDTH_SPACE = "\u200b"
LOOKALIKE_COMMA = "\u201a"


def _rewrite_words(text: str, rewrite: Callable[[str], str]) -> str:
    pieces, last = [], 0
    for start, end in word_letters(text):
        pieces.append(text[last:start])
        pieces.append(rewrite(text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


@register_exploit("confusables", kinds=["any"])
def confusables(target: Target) -> str | None:
    """The honest answer with Latin letters swapped for Cyrillic and Greek look-alikes, and commas for "‚"."""
    text = _rewrite_words(target.completion, lambda word: word.translate(CONFUSABLES))
    return text.replace(",", LOOKALIKE_COMMA)


@register_exploit("zero_width", kinds=["any"])
def zero_width(target: Target) -> str | None:
    """The honest answer with a zero-width space inside every word of four letters or more."""
    return _rewrite_words(
        target.completion, lambda word: word[:2] + ZERO_WIDTH_SPACE + word[2:] if len(word) >= 4 else word
    )
