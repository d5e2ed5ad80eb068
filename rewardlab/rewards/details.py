"""Keeping `Score.details` small: details are copied into every output row and log line, so text
quoted from a completion (a regex match, a validation message) is clipped."""

from __future__ import annotations

from typing import overload


@overload
def clipped(text: str, limit: int) -> str: ...
@overload
def clipped(text: None, limit: int) -> None: ...
def clipped(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + "…"
