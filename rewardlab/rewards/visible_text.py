"""Text as a reader sees it, for checks that look at characters and words.

A constraint such as "no commas" or "do not say 'secret'" is about what the reader sees, and a
policy under RL finds the characters that look the same and are not: ``Hello‚ world`` (U+201A,
a low quotation mark drawn as a comma), ``sec\\u200bret`` (a zero-width space inside the word),
``sеcret`` (a Cyrillic е). A red-team review passed both IFEval checks with them. So before
checking, `as_seen`:

- drops characters no reader sees (zero-width spaces and joiners, bidirectional marks);
- folds compatibility forms (NFKC: the full-width ``，`` is a comma);
- writes the characters drawn as a comma in other scripts (Arabic ``،``, the ideographic ``、``,
  the low quotation mark ``‚``, small and half-width commas) as ``,``;
- writes the Cyrillic and Greek letters drawn exactly as Latin ones as those Latin letters, in
  words that mix them with Latin letters (a word all in Cyrillic stays Cyrillic: a response in
  Russian is still in Russian).

The comma look-alikes follow Unicode's confusables list (https://www.unicode.org/Public/
security/latest/confusables.txt) for U+002C, and the letters its Cyrillic and Greek entries for
the Latin alphabet that are drawn identically in common fonts.
"""

from __future__ import annotations

import re
import unicodedata

from rewardlab.rewards.math.text import without_invisible

_COMMA_LOOKALIKES = "\u201a\u060c\u3001\ufe50\ufe51\uff64\u2e41\u1363\u07f8\ua60d\u055d"
_COMMAS = str.maketrans(dict.fromkeys(_COMMA_LOOKALIKES, ","))
#: Cyrillic and Greek letters drawn exactly as a Latin letter.
_LOOKALIKES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ԛ": "q", "ԝ": "w", "А": "A", "В": "B", "Е": "E", "К": "K",
    "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "І": "I", "Ј": "J",
    "Ѕ": "S", "ο": "o", "α": "a", "ι": "i", "ν": "v", "κ": "k", "ρ": "p", "υ": "u", "Α": "A",
    "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
}  # fmt: skip
_LATIN_LOOKALIKES = str.maketrans(_LOOKALIKES)
_WORD = re.compile(r"\w+")


def _latin_word(match: re.Match[str]) -> str:
    word = match.group()
    mixed = any("a" <= char.lower() <= "z" for char in word) and any(char in _LOOKALIKES for char in word)
    return word.translate(_LATIN_LOOKALIKES) if mixed else word


def as_seen(text: str) -> str:
    """``text`` as a reader sees it (see the module docstring)."""
    text = unicodedata.normalize("NFKC", without_invisible(text))
    if text.isascii():
        return text
    return _WORD.sub(_latin_word, text.translate(_COMMAS))
