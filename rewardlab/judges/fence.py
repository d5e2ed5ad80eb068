"""Fencing untrusted text (the prompt, the completion, the reference) inside a judge prompt.

Each text goes between marker lines carrying a nonce derived from the text itself, e.g.::

    <<<BEGIN RESPONSE 3f9a0c1e2b7d>>>
    ...the completion...
    <<<END RESPONSE 3f9a0c1e2b7d>>>

A completion cannot close its fence early: it would have to contain the END marker, whose nonce
is a hash of the completion - a fixed point nobody can aim for, and checked anyway. The nonce is
deterministic, so the same inputs render the same prompt and hit the cache. The judge's answer
may quote fenced text back; `blank_fenced` hides such quotes from the verdict parser.
"""

from __future__ import annotations

import hashlib
import re

_FENCED = re.compile(r"<<<BEGIN ([A-Z0-9 ]+) ([0-9a-f]{12})>>>.*?(?:<<<END \1 \2>>>|\Z)", re.DOTALL)


def fence(text: str, label: str) -> str:
    """``text`` between BEGIN/END marker lines named ``label`` (upper-case letters and digits)."""
    if not re.fullmatch(r"[A-Z0-9 ]+", label):
        raise ValueError(f"a fence label is upper-case letters, digits and spaces, got {label!r}")
    salt = 0
    while True:
        nonce = hashlib.sha256(f"{salt}:{label}:{text}".encode()).hexdigest()[:12]
        if nonce not in text:
            break
        salt += 1
    return f"<<<BEGIN {label} {nonce}>>>\n{text}\n<<<END {label} {nonce}>>>"


def blank_fenced(answer: str) -> str:
    """``answer`` with every fenced block it quotes (an unterminated one runs to the end) replaced
    by spaces, so that character offsets still point at the same places."""
    return _FENCED.sub(lambda match: " " * len(match.group(0)), answer)
