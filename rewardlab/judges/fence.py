"""Fencing untrusted text (the prompt, the completion, the reference) inside a judge prompt.

Each text goes between marker lines carrying a nonce derived from the text itself, e.g.::

    <<<BEGIN RESPONSE 3f9a0c1e2b7d>>>
    ...the completion...
    <<<END RESPONSE 3f9a0c1e2b7d>>>

A completion cannot close its fence early: it would have to contain the END marker, whose nonce
is a hash of the completion - a fixed point nobody can aim for, and checked anyway. The nonce is
deterministic, so the same inputs render the same prompt and hit the cache.

The judge's answer may quote fenced text back. `blank_fenced` hides such quotes from the verdict
reader - but only the fences the judge made itself (recorded as the prompt is rendered, not found
by scanning it): a completion that plants a marker of its own (``<<<BEGIN X 0123456789ab>>>``)
gets no text hidden. A real fence that the answer opens and never closes makes the answer
unreadable (`UnclosedFence`) rather than hiding everything after it, which would hide the
judge's own verdict.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

_MARKER = re.compile(r"<<<BEGIN ([A-Z0-9 ]+) ([0-9a-f]{12})>>>")

Fence = tuple[str, str]
"""A fence's label and nonce."""


class UnclosedFence(ValueError):
    """The answer quotes the start of a fence but not its end."""


def fence(text: object, label: str, made: set[Fence] | None = None) -> str:
    """``text`` between BEGIN/END marker lines named ``label`` (upper-case letters and digits);
    the fence is added to ``made``, if given."""
    if not re.fullmatch(r"[A-Z0-9 ]+", label):
        raise ValueError(f"a fence label is upper-case letters, digits and spaces, got {label!r}")
    text = str(text)
    salt = 0
    while True:
        nonce = hashlib.sha256(f"{salt}:{label}:{text}".encode()).hexdigest()[:12]
        if nonce not in text:
            break
        salt += 1
    if made is not None:
        made.add((label, nonce))
    return f"<<<BEGIN {label} {nonce}>>>\n{text}\n<<<END {label} {nonce}>>>"


def blank_fenced(answer: str, fences: Collection[Fence]) -> str:
    """``answer`` with every quoted block of one of ``fences`` replaced by spaces, so that
    character offsets still point at the same places.

    Raises:
        UnclosedFence: when a block of one of ``fences`` starts and does not end.
    """
    pieces, position = [], 0
    for match in _MARKER.finditer(answer):
        if match.start() < position or (match.group(1), match.group(2)) not in fences:
            continue
        end_marker = f"<<<END {match.group(1)} {match.group(2)}>>>"
        end = answer.find(end_marker, match.end())
        if end == -1:
            raise UnclosedFence(f"the answer quotes the start of the {match.group(1)} block but not its end")
        end += len(end_marker)
        pieces += [answer[position : match.start()], " " * (end - match.start())]
        position = end
    return "".join([*pieces, answer[position:]])
