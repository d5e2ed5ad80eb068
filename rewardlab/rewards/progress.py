"""Rows finished inside a batch, told to whoever shows progress.

The offline runner scores a batch with one reward call, so by itself its progress bar moves once
per batch: on the shipped example (33 rows, one batch) it sat at "0 rows" while the judges ran. A
reward that finishes some samples before the rest (a `Route` whose rule routes finish long before
its judge route) says so with `report_done`, and the runner counts those rows at once and the rest
when the call returns. Only the reward the runner called reports: a component of a combination
finishing says nothing about whole rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_LISTENER: ContextVar[tuple[object, Callable[[int], None]] | None] = ContextVar(
    "rewardlab_progress", default=None
)


@contextmanager
def listening(reward: object, on_done: Callable[[int], None]) -> Iterator[None]:
    """While the block runs (and in tasks it starts), ``reward``'s `report_done` calls go to
    ``on_done``."""
    token = _LISTENER.set((reward, on_done))
    try:
        yield
    finally:
        _LISTENER.reset(token)


def report_done(reward: object, count: int) -> None:
    """``reward`` has finished ``count`` more of the samples it was called with."""
    listener = _LISTENER.get()
    if listener is not None and listener[0] is reward:
        listener[1](count)
