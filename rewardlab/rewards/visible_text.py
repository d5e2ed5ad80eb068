"""Text as a reader sees it, for checks that look at characters and words.

A constraint such as "no commas" or "do not say 'secret'" is about what the reader sees, and a
policy under RL finds the characters that look the same and are not: ``Hello‚ world`` (U+201A,
a low quotation mark drawn as a comma), ``sec\\u200bret`` (a zero-width space inside the word),
``sеcret`` (a Cyrillic е). A red-team review passed both IFEval checks with them. So before
checking, `as_seen`:

- drops what no reader sees: characters (zero-width spaces and joiners), and what markup hides
  (`rewardlab.rewards.markup`: comments, elements that never render or are styled invisible, tag
  attributes, images, link targets; TeX ``\\phantom`` and white text), so hidden words pad no word
  count and hidden keywords count for nothing; reads a right-to-left override as it is shown;
- joins a word split by markup (``s**e**cret``, ``s`e`cret``, ``s<b></b>ecret``,
  ``s<!-- -->ecret``, ``$\\text{s}\\text{ecret}$``) or by a hyphen at a line break, and reads HTML
  entities (``s&#101;cret``);
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

from rewardlab.rewards._confusables import PROTOTYPES
from rewardlab.rewards.markup import without_comments, without_math_comments, without_unseen_markup
from rewardlab.rewards.math.text import without_invisible, without_invisible_groups

_COMMA_LOOKALIKES = (
    "\u201a\u060c\u3001\ufe50\ufe51\uff64\u2e41\u1363\u07f8\ua60d\u055d\ua4f9\u066b\u060d\u00b8\u0326"
    "\u2e32\u1802\u02cf\u1808\u2e34\ua6f5\u0313\u0315"
)
# Characters drawn as blank space that Python does not take for whitespace: a word either side of
# one is two words. Found by name among the characters that are neither whitespace nor format
# characters (BLANK, FILLER, NULL, SPACE, EMPTY, INVISIBLE), keeping those that draw no ink: the
# Hangul fillers, the blank Braille pattern and the null notehead (red-team round 22b wrote spaces
# as U+1D159). Whitespace (what Unicode's confusables draw as a space) is split on already.
_BLANKS = "\u3164\uffa0\u115f\u1160\u2800\U0001d159"
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
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "ғ": "F", "ӏ": "l", "Ӏ": "I",
}  # fmt: skip
#: Latin small capitals (phonetic letters) and look-alikes of capitals: drawn as capital letters,
#: so read as capitals wherever they stand ("ʜᴇʟʟᴏ" is not lower case to a reader).
_SMALL_CAPITALS = str.maketrans({
    "ᴀ": "A", "ʙ": "B", "ᴄ": "C", "ᴅ": "D", "ᴇ": "E", "ꜰ": "F", "ɢ": "G", "ʜ": "H", "ɪ": "I", "ᴊ": "J",
    "ᴋ": "K", "ʟ": "L", "ᴍ": "M", "ɴ": "N", "ᴏ": "O", "ᴘ": "P", "ʀ": "R", "ꜱ": "S", "ᴛ": "T", "ᴜ": "U",
    "ᴠ": "V", "ᴡ": "W", "ʏ": "Y", "ᴢ": "Z",
})  # fmt: skip
_LATIN_LOOKALIKES = str.maketrans(_LOOKALIKES)
#: Characters that draw nothing: every format character (category Cf, to Unicode 15.1), and the
#: invisible marks, fillers and variation selectors that are not Cf.
_UNDRAWN = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u034f\u17b4\u17b5\u180b-\u180d\u180f\ufe00-\ufe0f\U00016fe4\U000e0100-\U000e01ef]"
)
#: Every character that Unicode's confusables draw as an ASCII prototype (`_confusables`), and every
#: look-alike of `as_seen`, as what it looks like, in one table. Left out: what NFKC already writes
#: in ASCII (NFKC reads "⑽" as "(10)", the confusables as "(lO)"), and letters with a canonical
#: decomposition (the Vietnamese "ơ" is a letter of its own, and NFKC composes "o" and a horn
#: into it, which would make folding twice differ from folding once).
_DRAWN_AS = {
    **{
        code: prototype
        for code, prototype in PROTOTYPES.items()
        if not unicodedata.normalize("NFKC", chr(code)).isascii()
        and unicodedata.decomposition(chr(code))[:1] in ("", "<")
    },
    **_SEEN,
    **_SMALL_CAPITALS,
    **_LATIN_LOOKALIKES,
}
_WORD = re.compile(r"\w+")
# Markup inside a word ("s**e**cret", "s*e*cret", "s`e`cret", "s~~~~ecret") and a link inside one
# ("s[e](url)cret", its target already gone): the reader sees one word.
_INNER_MARKUP = re.compile(r"(?<=\w)(?:\*{1,3}|_{1,3}|`{1,3}|~~)(?=\w)")
_INNER_LINK = re.compile(r"(?<=\w)\[([^\[\]\s]{1,40})\](?=\w)")
# Words written in LaTeX text commands ("$\\text{s}\\text{ecret}$") are read as their letters.
_LATEX_TEXT = re.compile(
    r"\\(?:text|textrm|textbf|textit|mathrm|mathbf|mathit|mathsf|operatorname)\s*\{([^{}]{0,200})\}"
)
# A word hyphenated across a line break ("sec-\nret").
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


def as_seen(text: str) -> str:
    """``text`` as a reader sees it (see the module docstring)."""
    if "&" in text:
        text = html.unescape(text)
    if "<!--" in text:
        text = without_comments(text, replacement="")
    text = without_unseen_markup(without_math_comments(text))
    if "phantom" in text or "color" in text:
        text = without_invisible_groups(text)
    if "\\" in text:
        text = _LATEX_TEXT.sub(r"\1", text)
    text = _INNER_MARKUP.sub("", _INNER_LINK.sub(r"\1", text))
    if "-\n" in text:
        text = _BROKEN_WORD.sub("", text)
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", without_invisible(text.translate(_SEEN))).translate(_SMALL_CAPITALS)
    return _latin_words(text)


def as_drawn(text: str) -> str:
    """``text`` one character at a time as it is drawn, for counting what was written (repeats,
    words): the characters that draw nothing (`_UNDRAWN`: every format character, Unicode category
    Cf, such as zero-width spaces and joiners and bidirectional marks, and the invisible marks and
    variation selectors that `rewardlab.rewards.math.text.without_invisible` drops) deleted,
    compatibility forms folded (NFKC), the blanks (`_BLANKS`) written as spaces, and every
    character that Unicode's confusables data (UTS #39, the prototypes of its ``skeleton``) draws
    as ASCII written as that ASCII, with the look-alike commas, small capitals and Cyrillic and
    Greek letters of `as_seen`: Armenian ``օ ս ո հ`` are ``o u n h``, Cyrillic ``ӏ`` is ``l``
    (red-team round 22b varied each copy of a loop with them). ASCII is left as it is. Unlike
    `as_seen` it keeps all the text (hidden markup too), moves nothing (an override is not
    applied) and folds every look-alike whatever the language and the words around it, so that
    text added after a space never changes how the text before it is read. The price: the few
    letters of one script that the data draws as one Latin letter are one letter here (Armenian
    ``գ`` and ``զ``, ``ո`` and ``ռ``; Hebrew ``ו`` and ``ן``; Greek ``ο`` and ``σ``), so two words
    that differ only in them read as one word.

    Folding twice gives what folding once gives, and the time is linear in the text.
    """
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", _UNDRAWN.sub("", text).translate(_DRAWN_AS)).translate(_DRAWN_AS)
    # A letter written in ASCII can compose with a mark after it ("ӏ" and an acute is "ĺ").
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)
