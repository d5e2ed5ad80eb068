"""Clean an extracted answer string so that notation differences do not decide equivalence:
math delimiters, spacing commands, \\left/\\right, \\dfrac, thousands separators, decimal commas,
dollar signs, text wrappers, trailing punctuation. Units that carry meaning (percent, degrees,
physical units) are reported, not silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewardlab.rewards.math.commitment import MEANING_WORDS, words
from rewardlab.rewards.math.text import math_unicode
from rewardlab.rewards.math.units import CELSIUS, FAHRENHEIT, UNITS, Unit, split_unit

_DELIMITERS = (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]"))
# (?<!\\) keeps a row break "\\\\ " of a matrix from reading as the spacing command "\\ ".
_SPACING = re.compile(r"(?<!\\)\\[,;: ]|\\q?quad(?![a-zA-Z])|~")
_THOUSANDS_SPACING = re.compile(r"(?<=\d)\s?(?:\\,|\{,\s?\}|(?<!\\)\\ |\\;|\s)(?=\d{3}(?!\d))")
_SIZED = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?:\.|(?=[()\[\]|])|(?=\\[{}|]))")
_FRAC = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_TEMPERATURE = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°)\s*(?:\\text\{\s*)?\s*([CF])\s*\}?\s*$")
# "$18", "\$18": money in dollars ("$18$" is mathematics, its delimiters already gone).
_DOLLARS = re.compile(r"^-?\\?\$\s*(?=\d)")
_DEGREES = re.compile(r"\s*(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\degree(?![a-zA-Z]))\s*$")
_DEGREE_WORDS = re.compile(r"\s*\b(?:degrees?|deg)\b\.?\s*$", re.IGNORECASE)
_RADIAN_WORDS = re.compile(r"\s*\b(?:radians?|rad)\b\.?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"\s*(?:\\?%|\bpercent\b)\s*$")
_TEXT_COMMAND = re.compile(
    r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname|textnormal|mathit)\s*\{([^{}]*)\}"
)
_MULTIPLIER = re.compile(r"(?<=[\d}])\s*\b(hundred|thousand|million|billion|trillion)\b", re.IGNORECASE)
_MULTIPLIERS = {"hundred": "2", "thousand": "3", "million": "6", "billion": "9", "trillion": "12"}
# Qualifiers that do not change the stated number (which must still be exactly the reference's).
_QUALIFIERS = re.compile(
    r"\(?\s*(?<![\\a-zA-Z])(?:approximately|approx|about|roughly|around|exactly)\b\.?\s*\)?", re.IGNORECASE
)
_MARKDOWN_EMPHASIS = re.compile(r"\*\*|__")
# Emphasis around a whole answer ("***9***", "**_9_**") and symbols after it ("9 ✅", "9 🎉").
_EDGE_EMPHASIS = re.compile(r"^\s*(?:\*{1,3}|_{1,3})+(?=\S)|(?<=\S)(?:\*{1,3}|_{1,3})+\s*$")
# Marks that disown what they follow ("10 ❌", "10 🤷"): not decoration.
_NEGATIVE_MARK = re.compile("[❌❎✗✘👎🤷🚫⛔🙅]")
_SIZE_COMMANDS = re.compile(
    r"\\(?:tiny|small|normalsize|large|Large|LARGE|huge|Huge|displaystyle|textstyle)(?![a-zA-Z])"
)
_TRAILING_SYMBOLS = re.compile(r"[\s\u2190-\u21ff\u2300-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\ufe0f]+$")
# A word after a quantity ("18 dollars", "12 cm^2"); a.m./p.m. stay, they change a time's value.
_TRAILING_WORD = re.compile(r"(?![ap]\.?m\.?$)[a-zA-Z]{2,}(?:\^\{?[23]\}?)?\.?|\^\{?[23]\}?", re.IGNORECASE)
# A parenthesised word or two after a quantity: "18 (dollars)".
_TRAILING_PARENTHESIS = re.compile(r"(?<=[\d}).])\s*\([A-Za-z][A-Za-z ]{1,40}\)$")
THOUSANDS = re.compile(r"^-?(?!0,)\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
# "1'080": thousands grouped with apostrophes (Swiss style); a prime needs one or two digits after.
_APOSTROPHE_THOUSANDS = re.compile(r"^-?\d{1,3}(?:['’]\d{3})+(?:\.\d+)?$")
# "1.000.000": two or more dotted groups of three can only be thousands ("1.000" stays a decimal).
_DOTTED_THOUSANDS = re.compile(r"^-?\d{1,3}(?:\.\d{3}){2,}$")
# An answer in quotation marks: '"10"', "“Paris”".
_QUOTED = re.compile(r'^(?:"([^"]*)"|“([^“”]*)”|«([^«»]*)»)$')
# "0,111": a comma after a leading zero is a decimal comma ("3,10" stays a list of two).
_DECIMAL_COMMA = re.compile(r"^-?0,\d+$")
# "\15": a dollar sign lost from "\$15".
_STRAY_BACKSLASH = re.compile(r"(?<!\\)\\(?=\d)")
_PLAIN_NUMBER = re.compile(r"-?\d{1,15}(?:\.\d{1,15})?")
_CURRENCY_COMMANDS = re.compile(r"\\(?:euro|pounds|textsterling|yen|textyen|cent|textcent)(?![a-zA-Z])\s*")
_CURRENCY_SIGNS = {"euro": "€", "pounds": "£", "textsterling": "£", "yen": "¥", "textyen": "¥"}
_COMMANDS = re.compile(r"\\[a-zA-Z]+")
_WORDS_ONLY = re.compile(r"[A-Za-z][A-Za-z '’.-]*")
_EMPTY_SET = re.compile(r"^(?:\\emptyset|\\varnothing|\\\{\s*\\\}|\\O|no solutions?|none|∅)$", re.IGNORECASE)
EMPTY_SET = r"\emptyset"


@dataclass(frozen=True, slots=True)
class Normalized:
    """A cleaned answer and the units that were taken off it."""

    text: str
    percent: bool = False
    degrees: bool = False
    radians: bool = False
    unit: Unit | None = None
    #: Words that hedge or modify the answer were found ("3 or more", "5 is wrong").
    hedged: bool = False


def strip_delimiters(text: str) -> str:
    """Remove surrounding math delimiters, repeatedly."""
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


def _strip_end(pattern: re.Pattern[str], text: str) -> tuple[str, bool]:
    stripped = pattern.sub("", text)
    return stripped, stripped != text


def _without_trailing_words(text: str) -> str:
    """``text`` without the words after its quantity ("18 dollars every day" -> "18"); words
    that change the value are caught before this (`Normalized.hedged`). One pass over the words,
    from the end: no backtracking, whatever the text."""
    text = _TRAILING_PARENTHESIS.sub("", text)
    tokens = text.split(" ")
    cut = len(tokens)
    while cut > 1 and _TRAILING_WORD.fullmatch(tokens[cut - 1]):
        cut -= 1
    head = " ".join(tokens[:cut])
    return head if cut < len(tokens) and head[-1:] in tuple("0123456789}).") else text


_SMALL_NUMBERS = {
    word: value
    for value, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    word: 10 * (index + 2)
    for index, word in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    )
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}


def number_from_words(text: str) -> str | None:
    """ "eighteen" -> "18", "two hundred and five" -> "205"; None unless every word is a number word."""
    total = current = 0
    found = False
    for word in re.split(r"[\s-]+", text.strip().lower()):
        if word in _SMALL_NUMBERS or word in _TENS:
            current += _SMALL_NUMBERS.get(word, 0) + _TENS.get(word, 0)
        elif word == "hundred" and current:
            current *= 100
        elif word in _SCALES and (current or total) and word != "hundred":
            total, current = total + current * _SCALES[word], 0
        elif word != "and" or not found:
            return None
        found = True
    return str(total + current) if found else None


def _latex_surface(text: str) -> str:
    """``text`` without LaTeX that changes how an answer looks, not what it is: sizes, spacing,
    ``\\left``/``\\right``, ``\\dfrac``, bars written as ``\\vert``, thousands spacing."""
    text = re.sub(r"\\[lr]?vert\b|\\[lr]?Vert\b", "|", text)
    text = _SIZE_COMMANDS.sub("", text).replace("−", "-").replace(r"\mathbb{R}", r"(-\infty,\infty)")
    text = re.sub(r",\s*\\!\s*", ",", text).replace(r"\!", "")
    text = _SPACING.sub(" ", _THOUSANDS_SPACING.sub("", text))
    return _FRAC.sub(r"\\frac", _SIZED.sub("", text))


def _hedged(text: str) -> bool:
    """Words in an answer that change or doubt its value; a words-only answer ("no", "none",
    "east") states no value for words to doubt."""
    if _WORDS_ONLY.fullmatch(text):
        return False
    return any(word in MEANING_WORDS for word in words(_COMMANDS.sub(" ", text)))


def _without_wrapping(text: str) -> str:
    """``text`` without what is written around an answer rather than in it: Markdown emphasis,
    symbols after it ("9 ✅"), quotation marks around it."""
    text = _MARKDOWN_EMPHASIS.sub("", _EDGE_EMPHASIS.sub("", _TRAILING_SYMBOLS.sub("", text)))
    if (quoted := _QUOTED.match(text.strip())) is not None:
        text = next(group for group in quoted.groups() if group is not None)
    return text


def normalize(text: str) -> Normalized:
    """Clean an answer for comparison; see the module docstring for what is removed."""
    if _PLAIN_NUMBER.fullmatch(text):
        return Normalized(text)  # most answers: nothing to clean
    text = strip_delimiters(math_unicode(text))
    disowned = bool(_NEGATIVE_MARK.search(text))
    text = _latex_surface(text)
    dollars = bool(_DOLLARS.match(text))
    text = _STRAY_BACKSLASH.sub("", text).replace(r"\$", "").replace("$", "")
    if "\\" in text:
        text = _CURRENCY_COMMANDS.sub(lambda m: _CURRENCY_SIGNS.get(m.group().strip()[1:], "¢"), text)
    text = _without_wrapping(text)
    text = text.replace(r"\{", "\0LB").replace(r"\}", "\0RB")
    text = _TEXT_COMMAND.sub(lambda m: f" {m.group(1).strip()} ", text)
    text = _QUALIFIERS.sub(" ", text)
    text = re.sub(r"\s+", " ", text).strip().rstrip(".,;").strip()
    hedged = disowned or _hedged(text)
    temperature = _TEMPERATURE.search(text)
    if temperature is not None:
        text = text[: temperature.start()]
    text, degrees = _strip_end(_DEGREES, text)
    if not degrees:
        text, degrees = _strip_end(_DEGREE_WORDS, text)
    text, radians = _strip_end(_RADIAN_WORDS, text)
    text, percent = _strip_end(_PERCENT, text)
    text = _MULTIPLIER.sub(lambda m: rf" \times 10^{{{_MULTIPLIERS[m.group(1).lower()]}}}", text)
    text, unit = split_unit(text)
    if unit is None:
        text = _without_trailing_words(text)
    if temperature is not None:
        unit = CELSIUS if temperature.group(1) == "C" else FAHRENHEIT
    elif unit is None and dollars:
        unit = UNITS["dollar"]
    text = text.strip().rstrip(".").strip()
    if THOUSANDS.match(text):
        text = text.replace(",", "")
    elif _APOSTROPHE_THOUSANDS.match(text):
        text = text.replace("'", "").replace("’", "")
    elif _DOTTED_THOUSANDS.match(text):
        text = text.replace(".", "")
    elif _DECIMAL_COMMA.match(text):
        text = text.replace(",", ".")
    text = text.replace("\0LB", r"\{").replace("\0RB", r"\}")
    if _EMPTY_SET.match(text):
        text = EMPTY_SET
    elif _WORDS_ONLY.fullmatch(text) and (spelled := number_from_words(text)) is not None:
        text = spelled
    return Normalized(text, percent=percent, degrees=degrees, radians=radians, unit=unit, hedged=hedged)
