"""What markup hides from a reader, and what it shows in another order.

Model text is rendered (Markdown, with HTML inside it) before anyone reads it, and what a
renderer does not show is no statement: a grader that reads it pays for what no reader saw (red-team
reviews hid ``\\boxed{10}`` in ``<style>``, in an ``alt`` attribute, in white text, in an image's alt
text and in a link reference definition). The readers of every rule reward (`math.text.reader_text`,
`visible_text.as_seen`) drop, with `without_unseen_markup`:

- HTML comments;
- elements that never render (``<style>``, ``<script>``, ``<noscript>``, ``<template>``,
  ``<title>``, ``<head>``, ``<textarea>``) with their content;
- elements styled invisible (white or transparent text, ``display:none``, ``visibility:hidden``,
  zero size or opacity, positioned off-screen, the ``hidden`` attribute), nested tags included;
- the tags of known HTML elements, attributes included (what is inside ``<b>`` is shown; an
  ``alt="..."`` is not);
- Markdown images (their alt text shows only when the image fails) and link reference
  definitions; a link keeps its text and loses its target and title.

Bidirectional overrides reorder what is shown: ``\\u202e01\\u202c`` shows as "10". `visual_order`
writes each right-to-left override the way it is shown (reversed) and drops the other embedding,
override and isolate controls, so a reader and the grader read the same characters.

Every pass is one scan (regular expressions with bounded or possessive repetition, or string
searches), so no text can make them slow.
"""

from __future__ import annotations

import re

from rewardlab.rewards.math.spans import math_spans

_COMMENT_OPEN, _COMMENT_CLOSE = "<!--", "-->"
_UNRENDERED = re.compile(
    r"<(style|script|noscript|template|title|head|textarea|dialog|iframe|annotation|rp)\b[^<>]{0,300}>",
    re.IGNORECASE,
)
_CODE_ELEMENTS = re.compile(r"<(code|pre|kbd|samp)\b[^<>]{0,300}>", re.IGNORECASE)
# An element drawn invisible, found by its opening tag; its end is found by counting tags.
_STYLED_OPEN = re.compile(r"<([a-zA-Z][a-zA-Z0-9]{0,15})\b([^<>]{0,300})>")
_HIDING = re.compile(
    r"color\s*[:=]\s*[\"']?\s*(?:white|transparent|#f{3}(?:f{3})?\b|rgba?\(\s*255\s*,\s*255\s*,\s*255)"
    r"|display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]*[1-9])|opacity\s*:\s*0(?![.\d]*[1-9])"
    r"|(?:left|top|right|text-indent|margin-left)\s*:\s*-\d{3,}|clip\s*:|clip-path|(?:width|height)\s*:\s*0(?![.\d]*[1-9])"
    r"|rgba\([^()]{0,40},\s*0(?:\.0+)?\s*\)|#f{3}0\b|#f{6}00\b|hsla?\(\s*\d+\s*,\s*\d+%\s*,\s*100%"
    r"|scale\(\s*0(?:\.0+)?\s*\)|opacity\(\s*0(?:\.0+)?\s*\)|font-size\s*:\s*[01](?:\.\d+)?px"
    r"|\bhidden\b",
    re.IGNORECASE,
)
#: How far an invisible element's end is looked for.
MAX_ELEMENT_CHARS = 4000
_TAG_NAMES = (
    "a|abbr|address|area|article|aside|audio|b|bdi|bdo|big|blockquote|body|br|button|caption|center|cite|"
    "code|col|colgroup|data|dd|del|details|dfn|div|dl|dt|em|embed|fieldset|figcaption|figure|font|footer|"
    "form|h[1-6]|header|hr|html|i|iframe|img|input|ins|kbd|label|legend|li|link|main|map|mark|meta|meter|"
    "nav|object|ol|optgroup|option|output|p|param|picture|pre|progress|q|rp|rt|ruby|s|samp|section|select|"
    "small|source|span|strike|strong|sub|summary|sup|svg|table|tbody|td|tfoot|th|thead|time|tr|track|tt|u|"
    "ul|var|video|wbr"
)
# A tag: its name, then nothing or attributes after a space ("a<b$ or $c>d" in mathematics is no tag).
_TAG = re.compile(rf"</?(?:{_TAG_NAMES})(?:\s[^<>]{{0,300}})?/?>", re.IGNORECASE)
# "2<sup>5</sup>" shows 2 to the fifth, not 25: written as a power (and a subscript as one).
_SUPERSCRIPT = re.compile(r"<(sup)>([^<>]{1,60})</sup>", re.IGNORECASE)
_SUBSCRIPT = re.compile(r"<(sub)>([^<>]{1,60})</sub>", re.IGNORECASE)
_IMAGE = re.compile(r"!\[[^\[\]\n]{0,500}\]\([^()\n]{0,500}\)")
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]{1,200}\]:[ \t]*+\S[^\n]{0,500}$", re.MULTILINE)
# A well-formed Markdown link: its target (no spaces, or in angle brackets) and optional title
# are not text a reader reads; "[note](Actually it is 7)" is no link and renders as written.
# Possessive repetition: three runs of spaces in a row must not trade characters (a pattern
# that let them took seconds on "[a](" and 20,000 spaces).
_LINK = re.compile(
    r"(\[[^\[\]\n]{0,500}\])\([ \t]*+(?:<[^<>\n]{0,500}>|[^\s()<>]{0,500}+)"
    r"(?:[ \t]++(?:\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|\([^()\n]{0,200}\)))?[ \t]*+\)"
)
_RIGHT_TO_LEFT_OVERRIDE, _POP = "\u202e", "\u202c"
_UNESCAPED_PERCENT = re.compile(r"(?<!\\)%")
_MATH_MARK = re.compile(r"\$\$|\\[\[\]]|\\begin\{|\\end\{")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def without_comments(text: str, replacement: str = " ") -> str:
    """``text`` without its HTML comments, each found by two string searches (an unclosed one
    hides nothing)."""
    pieces, cursor = [], 0
    while (start := text.find(_COMMENT_OPEN, cursor)) != -1:
        end = text.find(_COMMENT_CLOSE, start + len(_COMMENT_OPEN))
        if end == -1:
            break
        pieces.append(text[cursor:start])
        pieces.append(replacement)
        cursor = end + len(_COMMENT_CLOSE)
    pieces.append(text[cursor:])
    return "".join(pieces)


def without_unrendered(text: str, elements: re.Pattern[str] | None = None) -> str:
    """``text`` without the elements that never render (or the ``elements`` given), content
    included; an unclosed one hides nothing."""
    lowered = text.lower()
    pieces, cursor = [], 0
    for match in (elements or _UNRENDERED).finditer(text):
        if match.start() < cursor:
            continue
        end = lowered.find(f"</{match.group(1).lower()}", match.end())
        if end == -1:
            continue
        close = text.find(">", end)
        if close == -1:
            continue
        pieces.append(text[cursor : match.start()])
        cursor = close + 1
    pieces.append(text[cursor:])
    return "".join(pieces)


def without_code_elements(text: str) -> str:
    """``text`` without HTML code elements (``<code>``, ``<pre>``, ``<kbd>``, ``<samp>``) and their
    content: code states nothing, in HTML as in Markdown."""
    return without_unrendered(text, _CODE_ELEMENTS) if "<" in text else text


def without_hidden_html(text: str) -> str:
    """``text`` without the HTML elements styled invisible (see the module docstring), with what
    they hold, nested tags included; one whose end is not found within `MAX_ELEMENT_CHARS` hides
    nothing."""
    pieces, cursor = [], 0
    for match in _STYLED_OPEN.finditer(text):
        if match.start() < cursor or not _HIDING.search(match.group(2)):
            continue
        end = _element_end(text, match.group(1).lower(), match.end())
        if end is None:
            continue
        pieces.append(text[cursor : match.start()])
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _element_end(text: str, name: str, start: int) -> int | None:
    """Where the element named ``name`` whose content starts at ``start`` ends (after its closing
    tag), counting nested elements of the same name; None past `MAX_ELEMENT_CHARS`."""
    same = re.compile(rf"<(/?){name}\b[^<>]{{0,300}}>", re.IGNORECASE)
    depth = 1
    for tag in same.finditer(text, start, min(len(text), start + MAX_ELEMENT_CHARS)):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return tag.end()
    return None


def without_link_targets(text: str) -> str:
    """``text`` with each well-formed Markdown link reduced to its text (see `_LINK`)."""
    return _LINK.sub(r"\1", text)


def without_unseen_markup(text: str) -> str:
    """``text`` without what its markup hides from a reader (see the module docstring); the text
    of links and of visible elements stays."""
    if "<" in text:
        text = without_hidden_html(without_unrendered(without_comments(text)))
        text = without_tags(_SUPERSCRIPT.sub(r"^{\2}", _SUBSCRIPT.sub(r"_{\2}", text)))
    if "](" in text:
        text = without_link_targets(_IMAGE.sub("", text))
    if "]:" in text:
        text = _REFERENCE_DEFINITION.sub("", text)
    return text


def without_tags(text: str) -> str:
    """``text`` without the tags of known HTML elements (attributes included)."""
    return _TAG.sub("", text)


def without_math_comments(text: str) -> str:
    """``text`` without TeX comments inside mathematics: an unescaped ``%`` to the end of its line,
    where MathJax and KaTeX hide it (``$% \\boxed{10}$`` shows nothing). Outside mathematics a
    ``%`` is a character Markdown shows. One pass over the lines, tracking the displays (``$$``,
    ``\\[``, ``\\begin{...}``) left open and the ``$`` of the line."""
    if "%" not in text:
        return text
    kept, display = [], _Display()
    for line in text.split("\n"):
        shown = line
        percent = _UNESCAPED_PERCENT.search(line)
        if percent is not None and (display.open or _inline_math_at(line, percent.start())):
            shown = line[: percent.start()]
        display = _Display.after(shown, display)
        kept.append(shown)
    return "\n".join(kept)


def _inline_math_at(line: str, position: int) -> bool:
    """Whether ``position`` of ``line`` is inside inline mathematics: a span by pandoc's rules
    (`spans.math_spans`: "$5 and 10%" is money, not mathematics), or right after an opener
    ("$%", "\\(%": no prose writes that), or in a display opened earlier on the line."""
    if any(span.start < position < span.end for span in math_spans(line)):
        return True
    before = line[:position].rstrip()
    if before.endswith(("$", "\\(")) and not before.endswith("\\$"):
        return True
    return _Display.after(line[:position], _Display()).open


class _Display:
    """Which displayed mathematics is open after a stretch of text: a ``$$`` display, ``\\[`` or
    environments (their depth)."""

    def __init__(self, dollars: bool = False, depth: int = 0):
        self.dollars, self.depth = dollars, depth

    @property
    def open(self) -> bool:
        return self.dollars or self.depth > 0

    @classmethod
    def after(cls, stretch: str, before: _Display) -> _Display:
        dollars, depth = before.dollars, before.depth
        for mark in _MATH_MARK.finditer(stretch):
            token = mark.group()
            if token == "$$":
                dollars = not dollars
            elif token in ("\\[", "\\begin{"):
                depth += 1
            else:
                depth = max(0, depth - 1)
        return cls(dollars, depth)


def visual_order(text: str) -> str:
    """``text`` in the order a reader sees it: each right-to-left override (to its pop, or to the
    end of the line) reversed, and the other bidirectional controls dropped."""
    if not _BIDI_CONTROLS.search(text):
        return text
    pieces, cursor = [], 0
    while (start := text.find(_RIGHT_TO_LEFT_OVERRIDE, cursor)) != -1:
        ends = [end for end in (text.find(_POP, start), text.find("\n", start)) if end != -1]
        end = min(ends, default=len(text))
        pieces.append(text[cursor:start])
        pieces.append(text[start + 1 : end][::-1])
        cursor = end
    pieces.append(text[cursor:])
    return _BIDI_CONTROLS.sub("", "".join(pieces))
