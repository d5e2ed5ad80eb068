"""Clean an extracted answer string so that notation differences do not decide equivalence:
math delimiters, spacing commands, \\left/\\right, \\dfrac, thousands separators, dollar signs,
text units, trailing punctuation. Units that carry meaning (percent, degrees) are reported, not
dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DELIMITERS = (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]"))
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad\b|~")
_THOUSANDS_SPACING = re.compile(r"(?<=\d)(?:\\,|\{,\}|\\ |\\;|\s)(?=\d{3}(?!\d))")
_SIZED = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?:\.|(?=[()\[\]|])|(?=\\[{}|]))")
_FRAC = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree\b|\^\{\\circ\}")
_PERCENT = re.compile(r"\s*\\?%\s*$")
_TEXT_COMMAND = re.compile(
    r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname|textnormal)\s*\{([^{}]*)\}"
)
_UNIT_WORDS = re.compile(r"(?<=[\d}).])(?:\s*[a-zA-Z]{2,}(?:\^\{?[23]\}?)?\.?)+\s*$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_DEGREE_WORDS = re.compile(r"\s*\b(?:degrees?|deg)\b\.?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Normalized:
    """A cleaned answer and the unit markers that were taken off it."""

    text: str
    percent: bool = False
    degrees: bool = False


def strip_delimiters(text: str) -> str:
    """Remove one pair of surrounding math delimiters, repeatedly."""
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for opening, closing in _DELIMITERS:
            if (
                text.startswith(opening)
                and text.endswith(closing)
                and len(text) >= len(opening) + len(closing)
            ):
                text = text[len(opening) : len(text) - len(closing)].strip()
                changed = True
    return text


def normalize(text: str) -> Normalized:
    """Clean an answer for comparison; see the module docstring for what is removed."""
    text = strip_delimiters(text)
    text = text.replace(r"\displaystyle", "").replace(r"\!", "")
    text = _THOUSANDS_SPACING.sub("", text)
    text = _SPACING.sub(" ", text)
    text = _SIZED.sub("", text)
    text = _FRAC.sub(r"\\frac", text)
    text = text.replace(r"\$", "").replace("$", "")
    text = text.replace(r"\{", "\0LB").replace(r"\}", "\0RB")
    text = text.strip().rstrip(".").strip()
    degrees = bool(_DEGREES.search(text)) or bool(_DEGREE_WORDS.search(text))
    text = _DEGREES.sub("", _DEGREE_WORDS.sub("", text))
    percent = bool(_PERCENT.search(text)) or text.endswith(r"\text{percent}")
    text = _PERCENT.sub("", text)
    text = _TEXT_COMMAND.sub(lambda m: f" {m.group(1).strip()} ", text)
    text = _UNIT_WORDS.sub("", text).strip()
    text = re.sub(r"\s+", " ", text).strip().rstrip(".").strip()
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    text = text.replace("\0LB", r"\{").replace("\0RB", r"\}")
    return Normalized(text, percent=percent, degrees=degrees)
