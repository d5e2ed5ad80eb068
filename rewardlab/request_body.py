"""Reading a JSON request body for the wire formats rewardlab serves (the reward server's own,
OpenRLHF's): its plain values for counting before validation, a pydantic error as one line
naming the place in the request, and texts clipped for an answer."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError


def plain_json(body: bytes) -> Any:
    """The body as plain values, or None when it is not JSON (the full read then says why).
    Decoded as UTF-8 first: given bytes, ``json`` would also guess UTF-16 and UTF-32."""
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def describe(error: ValidationError) -> str:
    """A pydantic error as ``samples[3].completion: must be text ...; ...`` (one line)."""
    problems = []
    for item in error.errors(include_url=False):
        where = _location(item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(dict.fromkeys(problems))


def _location(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def clip_texts(value: Any, limit: int) -> Any:
    """``value`` with every text in it (nested in lists and mappings too) cut to ``limit``
    characters, saying how much was cut."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… [{len(value) - limit} more characters clipped]"
    if isinstance(value, Mapping):
        return {key: clip_texts(item, limit) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clip_texts(item, limit) for item in value]
    return value
