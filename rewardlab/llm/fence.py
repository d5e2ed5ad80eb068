"""Fencing untrusted text (the prompt, the completion, the reference) inside a judge prompt.

Each text goes between marker lines carrying a nonce, e.g.::

    <<<BEGIN RESPONSE 3f9a0c1e2b7d>>>
    ...the completion...
    <<<END RESPONSE 3f9a0c1e2b7d>>>

The nonce is secret: an HMAC of the label and text under a key of 256 random bits that the
judge's prompt draws when it is built (`prompts.JudgePrompt`, which keeps it when pickled), or a
fresh random key for each call without one; it is recorded with the fence as the prompt is
rendered. Derived from the text alone, as it once was, the policy could compute it - the prompt
is the policy's own - and plant a second, genuine-looking REQUEST block in its completion; a
judge that quoted it made the answer unreadable and threw the judge's real verdict away. Keyed,
not drawn anew at each rendering, so that one judge (and its pickled copies in a trainer's
workers) renders the same inputs as the same prompt and gives the same verdict, cache or no
cache. A completion cannot close its fence early either: it would have to contain the END
marker, and a nonce that happens to occur in the text is derived again with a counter.

Another judge built from the same config has another key, so the answer cache keys requests by
`masked` text (each fence's markers without its nonce; the key also holds the fenced texts, so
that no text can pass for a fence boundary), and an answer from the cache is read with the
fences of the prompt it answered (`ModelClient` keeps their nonces with it).

The judge's answer may quote fenced text back. `blank_fenced` hides such quotes from the verdict
reader - but only the fences the judge made itself (recorded as the prompt is rendered, not found
by scanning it): a completion that plants a marker of its own gets no text hidden. A real fence
that the answer opens and never closes makes the answer unreadable (`UnclosedFence`) rather than
hiding everything after it, which would hide the judge's own verdict. Quotes made without the
markers are the verdict reader's business (`verdicts.py`), which is why a fence keeps its text.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rewardlab.errors import UnclosedFence

_MARKER = re.compile(r"<<<BEGIN ([A-Z0-9 ]+) ([0-9a-f]{12})>>>")


@dataclass(frozen=True, slots=True)
class Fence:
    """One fence of a rendered prompt: its label, its secret nonce and the text inside it."""

    label: str
    nonce: str
    text: str

    @property
    def begin(self) -> str:
        return f"<<<BEGIN {self.label} {self.nonce}>>>"

    @property
    def end(self) -> str:
        return f"<<<END {self.label} {self.nonce}>>>"


def fence(text: object, label: str, made: list[Fence] | None = None, *, key: bytes | None = None) -> str:
    """``text`` between BEGIN/END marker lines named ``label`` (upper-case letters and digits),
    with a nonce secret under ``key`` (a fresh random key when None); the fence is appended to
    ``made``, if given."""
    if not re.fullmatch(r"[A-Z0-9 ]+", label):
        raise ValueError(f"a fence label is upper-case letters, digits and spaces, got {label!r}")
    text = str(text)
    key = key if key is not None else secrets.token_bytes(32)
    salt = 0
    while True:
        message = f"{salt}:{label}:{text}".encode("utf-8", "surrogatepass")
        nonce = hmac.new(key, message, hashlib.sha256).hexdigest()[:12]
        if nonce not in text:
            break
        salt += 1
    made_fence = Fence(label, nonce, text)
    if made is not None:
        made.append(made_fence)
    return f"{made_fence.begin}\n{text}\n{made_fence.end}"


def masked(text: str, fences: Sequence[Fence]) -> str:
    """``text`` with each of ``fences``' markers written without its nonce: what stays the same
    when the same inputs are rendered again (for cache keys)."""
    for made in fences:
        text = text.replace(made.begin, f"<<<BEGIN {made.label}>>>").replace(
            made.end, f"<<<END {made.label}>>>"
        )
    return text


def blank_fenced(answer: str, fences: Collection[Fence]) -> str:
    """``answer`` with every quoted block of one of ``fences`` replaced by spaces, so that
    character offsets still point at the same places.

    Raises:
        UnclosedFence: when a block of one of ``fences`` starts and does not end.
    """
    known = {(made.label, made.nonce) for made in fences}
    pieces, position = [], 0
    for match in _MARKER.finditer(answer):
        if match.start() < position or (match.group(1), match.group(2)) not in known:
            continue
        end_marker = f"<<<END {match.group(1)} {match.group(2)}>>>"
        end = answer.find(end_marker, match.end())
        if end == -1:
            raise UnclosedFence(f"the answer quotes the start of the {match.group(1)} block but not its end")
        end += len(end_marker)
        pieces += [answer[position : match.start()], " " * (end - match.start())]
        position = end
    return "".join([*pieces, answer[position:]])
