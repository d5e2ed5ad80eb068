"""A sampling seed for every model call made in a block: how `vote` draws n different samples of
one judge without changing the judge.

A judge at a temperature above 0 asks without a seed, so each call is a fresh draw and skips the
answer cache (`ModelClient.complete`). n calls of such a judge do give n samples, but none of them
can be replayed or cached, and two votes asked the same question in one batch would not even
share a cache key to tell them apart. Inside ``with sampling_seed(s)``, every sampled request made
in that asyncio task (and in the tasks it starts) that has no seed of its own carries ``s``: vote k
of a judge asks with seed ``base + k``, so its requests differ from the other votes' in the cache
key (`ChatRequest.fingerprint` includes the seed) and in what the backend samples (OpenAI's and
vLLM's ``seed``, the local model's ``torch.manual_seed``), and asking again replays the same votes
from the cache.

Why a context variable and not a ``seed`` argument threaded through every judge: a vote may wrap
any judge (pointwise, pairwise, a rubric, a step judge), each making its calls through
`Judge.ask`, `ask_list` or `ask_text`; the variable reaches all of them at the one place every call
passes (`ModelClient.complete`). Requests at temperature 0 are left alone: greedy decoding gives
the same answer whatever the seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from contextvars import ContextVar

from rewardlab.llm.backend import ChatRequest

_SEED: ContextVar[int | None] = ContextVar("rewardlab_sampling_seed", default=None)


@contextlib.contextmanager
def sampling_seed(seed: int) -> Iterator[None]:
    """While the block runs, sampled model calls without a seed of their own carry ``seed``."""
    token = _SEED.set(seed)
    try:
        yield
    finally:
        _SEED.reset(token)


def seeded(request: ChatRequest) -> ChatRequest:
    """``request`` with the block's seed (see `sampling_seed`) when it samples and has none."""
    seed = _SEED.get()
    if seed is None or request.seed is not None or request.temperature == 0:
        return request
    return dataclasses.replace(request, seed=seed)
