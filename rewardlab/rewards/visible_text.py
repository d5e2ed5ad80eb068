"""Text as a reader sees it, for checks that look at characters and words.

A constraint such as "no commas" or "do not say 'secret'" is about what the reader sees, and a
policy under RL finds the characters that look the same and are not: ``Hello‚ world`` (U+201A,
a low quotation mark drawn as a comma), ``sec\\u200bret`` (a zero-width space inside the word),
``sеcret`` (a Cyrillic е). A red-team review passed both IFEval checks with them. So before
checking, `as_seen`:

- drops what no reader sees: characters (zero-width spaces and joiners, bidirectional marks),
  HTML comments and HTML elements styled invisible (words hidden there pad no word count);
- joins a word split by Markdown emphasis (``s**e**cret``), by HTML tags (``s<b></b>ecret``) or by
  a hyphen at a line break, reads HTML entities (``s&#101;cret``), and drops link targets (a
  keyword in ``[France](https://example.com/banana)`` is not seen);
- folds compatibility forms (NFKC: the full-width ``，`` is a comma);
- writes the characters drawn as a comma in other scripts (Arabic ``،``, the ideographic ``、``,
  the low quotation mark ``‚``, small and half-width commas) as ``,``;
- writes the characters drawn as blank space (the Hangul filler ``ㅤ``) as a space, and drops
  the combining marks drawn over a letter (a strike-through ``c̶heap`` is still the word);
- writes the Cyrillic and Greek letters drawn exactly as Latin ones as those Latin letters, in
  words that mix them with Latin letters, and in words made of them alone when the text is
  mostly in Latin letters (``сһеар`` in English prose is "cheap"; a response in Russian is still
  in Russian).

The comma look-alikes follow Unicode's confusables list (https://www.unicode.org/Public/
security/latest/confusables.txt) for U+002C, and the letters its Cyrillic and Greek entries for
the Latin alphabet that are drawn identically in common fonts.
"""

from __future__ import annotations

import html
import re
import unicodedata

from rewardlab.rewards.math.text import without_hidden_html, without_invisible, without_link_targets

_COMMA_LOOKALIKES = (
    "\u201a\u060c\u3001\ufe50\ufe51\uff64\u2e41\u1363\u07f8\ua60d\u055d\ua4f9\u066b\u060d\u00b8\u0326"
    "\u2e32\u1802\u02cf\u1808\u2e34\ua6f5\u0313\u0315"
)
# Characters drawn as blank space: a word either side of one is two words.
_BLANKS = "\u3164\uffa0\u115f\u1160\u2800"
# Combining marks drawn over a letter (a strike-through): "c\u0336heap" is "cheap" struck, still read.
_OVERLAYS = "\u0334\u0335\u0336\u0337\u0338\u20d2\u20d3\u20e5\u20e6"
_SEEN = str.maketrans(
    {**dict.fromkeys(_COMMA_LOOKALIKES, ","), **dict.fromkeys(_BLANKS, " "), **dict.fromkeys(_OVERLAYS)}
)
#: Cyrillic and Greek letters drawn exactly as a Latin letter.
_LOOKALIKES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ԛ": "q", "ԝ": "w", "А": "A", "В": "B", "Е": "E", "К": "K",
    "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "І": "I", "Ј": "J",
    "Ѕ": "S", "ο": "o", "α": "a", "ι": "i", "ν": "v", "κ": "k", "ρ": "p", "υ": "u", "Α": "A",
    "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "ғ": "F",
}  # fmt: skip
#: Latin small capitals (phonetic letters) and look-alikes of capitals: drawn as capital letters,
#: so read as capitals wherever they stand ("ʜᴇʟʟᴏ" is not lower case to a reader).
_SMALL_CAPITALS = str.maketrans({
    "ᴀ": "A", "ʙ": "B", "ᴄ": "C", "ᴅ": "D", "ᴇ": "E", "ꜰ": "F", "ɢ": "G", "ʜ": "H", "ɪ": "I", "ᴊ": "J",
    "ᴋ": "K", "ʟ": "L", "ᴍ": "M", "ɴ": "N", "ᴏ": "O", "ᴘ": "P", "ʀ": "R", "ꜱ": "S", "ᴛ": "T", "ᴜ": "U",
    "ᴠ": "V", "ᴡ": "W", "ʏ": "Y", "ᴢ": "Z",
})  # fmt: skip
_LATIN_LOOKALIKES = str.maketrans(_LOOKALIKES)
_WORD = re.compile(r"\w+")
# Markdown emphasis inside a word ("s**e**cret"): the reader sees one word.
_INNER_EMPHASIS = re.compile(r"(?<=\w)(?:\*\*|__)(?=\w)")
# HTML tags inside a word ("s<b></b>ecret"), and a word hyphenated across a line break ("sec-\nret").
_INNER_TAGS = re.compile(r"(?<=\w)(?:<[^<>\s][^<>]{0,60}>)+(?=\w)")
_BROKEN_WORD = re.compile(r"(?<=[^\W\d_])-\n(?=[^\W\d_])")


def _latin_words(text: str) -> str:
    """Words written with look-alike letters, as Latin: those that mix them with Latin letters,
    and, in a text mostly in Latin letters, those made of look-alikes only ("сһеар")."""
    latin = sum(1 for char in text if "a" <= char.lower() <= "z")
    other = sum(1 for char in text if char.isalpha() and not char.isascii())
    mostly_latin = latin > other

    def folded(match: re.Match[str]) -> str:
        word = match.group()
        lookalikes = sum(char in _LOOKALIKES for char in word)
        has_latin = any("a" <= char.lower() <= "z" for char in word)
        fold = lookalikes and (has_latin or (mostly_latin and lookalikes == len(word)))
        return word.translate(_LATIN_LOOKALIKES) if fold else word

    return _WORD.sub(folded, text)


def without_comments(text: str) -> str:
    """``text`` without its HTML comments, each found by two string searches (an unclosed one
    hides nothing)."""
    pieces, cursor = [], 0
    while (start := text.find("<!--", cursor)) != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            break
        pieces.append(text[cursor:start])
        pieces.append(" ")
        cursor = end + 3
    pieces.append(text[cursor:])
    return "".join(pieces)


def as_seen(text: str) -> str:
    """``text`` as a reader sees it (see the module docstring)."""
    if "&" in text:
        text = html.unescape(text)
    if "<" in text:
        text = _INNER_TAGS.sub("", without_hidden_html(without_comments(text)))
    if "](" in text:
        text = without_link_targets(text)
    if "**" in text or "__" in text:
        text = _INNER_EMPHASIS.sub("", text)
    if "-\n" in text:
        text = _BROKEN_WORD.sub("", text)
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", without_invisible(text.translate(_SEEN))).translate(_SMALL_CAPITALS)
    return _latin_words(text)
