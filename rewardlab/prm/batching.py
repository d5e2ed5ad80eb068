"""Batches of similar length for right-padded forward passes.

A batch costs its longest sequence times its size; the padding in it is computed for nothing
(on a CPU it costs as much as real tokens), so a sequence joins a batch only while the batch
stays under a token budget and its padding under a fraction of it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)


def check_max_padding(max_padding: float) -> float:
    """``max_padding`` if it is a fraction in [0, 1); a `ValueError` otherwise (checked when a
    reward is built, not at its first batch)."""
    if not 0 <= max_padding < 1:
        raise ValueError(f"max_padding must be in [0, 1), got {max_padding!r}")
    return max_padding


def length_batches(lengths: Mapping[Key, int], batch_tokens: int, max_padding: float) -> list[list[Key]]:
    """The keys of ``lengths`` in batches, longest first: ``longest x size <= batch_tokens``
    and padding at most ``max_padding`` of ``longest x size`` (a lone sequence always fits)."""
    ordered = sorted(lengths, key=lambda key: lengths[key], reverse=True)
    batches: list[list[Key]] = []
    for key in ordered:
        if batches and _fits([*batches[-1], key], lengths, batch_tokens, max_padding):
            batches[-1].append(key)
        else:
            batches.append([key])
    return batches


def _fits(batch: list[Key], lengths: Mapping[Key, int], batch_tokens: int, max_padding: float) -> bool:
    size = lengths[batch[0]] * len(batch)
    padding = size - sum(lengths[key] for key in batch)
    return size <= batch_tokens and padding <= max_padding * size
