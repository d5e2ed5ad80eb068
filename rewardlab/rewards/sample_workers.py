"""Per-sample work of a reward run where it can be stopped: a killable worker process, with a
wall-clock budget for each sample.

Why not in the calling thread: a check that parses model text can hold the CPU far longer than
anyone expects (one real paragraph sent a regex into catastrophic backtracking for 25 minutes),
and Python cannot interrupt it there - not from another thread, and ``signal`` is off limits
(rewards run in TRL's event-loop thread and in thread pools). In the caller's process such a
sample stalls the training step forever, and in ``rewardlab serve`` it holds the GIL that the
health checks and deadlines need. In a worker it costs its budget: the worker is killed, the
sample gets status ``timeout`` with the reason, and the rest of the batch goes on.

Rule rewards share one small pool per process (`rule_pool`), so the workers stay warm across
rewards and training steps; a batch is split into one contiguous chunk per worker and each chunk
costs one round trip.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.process_pool import (
    KillableProcessPool,
    LazyPool,
    Outcome,
    TaskFailed,
    TaskTimeout,
    WorkerCrashed,
)

T = TypeVar("T")
R = TypeVar("R", bound=Reward)
Execution = Literal["worker", "inline"]
EXECUTIONS = ("worker", "inline")
#: No sane sample needs more than a fraction of this; a check past it is stuck.
DEFAULT_SAMPLE_BUDGET_S = 5.0
RULE_WORKER_MEMORY_BYTES = 2 << 30

rule_pool = LazyPool(
    functools.partial(
        KillableProcessPool, min(2, os.cpu_count() or 1), memory_limit_bytes=RULE_WORKER_MEMORY_BYTES
    )
)

#: ``function(reward, (index, sample))``: a module-level function, so that it pickles.
PerSample = Callable[[R, tuple[int, Sample]], T]


def checked_execution(execution: str, sample_budget_s: float) -> Execution:
    """The execution option, refused when it is not one of `EXECUTIONS` or the budget is not positive."""
    if execution not in EXECUTIONS:
        raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
    if not sample_budget_s > 0:
        raise ValueError(f"sample_budget_s must be positive, got {sample_budget_s!r}")
    return execution  # type: ignore[return-value]  # checked above


def _chunks(count: int, parts: int) -> list[range]:
    size, extra = divmod(count, parts)
    bounds, start = [], 0
    for part in range(parts):
        end = start + size + (part < extra)
        if end > start:
            bounds.append(range(start, end))
        start = end
    return bounds


def _failure(error: Exception, sample: Sample, index: int, budget_s: float) -> Score:
    """The failed score of a sample whose work did not finish in its worker."""
    label = sample.label(index)
    if isinstance(error, TaskTimeout):
        return Score.failure(
            Status.TIMEOUT,
            f"{label}: scoring it ran past the {budget_s:g}s budget per sample, so it was stopped",
        )
    if isinstance(error, WorkerCrashed):
        return Score.failure(Status.ERROR, f"{label}: the worker scoring it crashed ({error})")
    assert isinstance(error, TaskFailed)
    return Score.failure(Status.ERROR, f"{label}: {error}")


async def _one_by_one(
    pool: KillableProcessPool,
    function: PerSample[R, T],
    reward: R,
    items: list[tuple[int, Sample]],
    budget_s: float,
) -> list[Outcome]:
    futures = [pool.submit_each(function, [item], shared=(reward,), budget_s_each=budget_s) for item in items]
    answers = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
    return [
        Outcome(error=TaskFailed(f"could not run in a worker process: {answer}"))
        if isinstance(answer, BaseException)
        else answer[0]
        for answer in answers
    ]


async def run_per_sample(
    function: PerSample[R, T],
    reward: R,
    samples: Sequence[Sample],
    *,
    execution: Execution,
    budget_s: float,
) -> list[T | Score]:
    """``function(reward, (index, sample))`` for every sample, in order.

    With ``execution="worker"`` each call runs in a `rule_pool` worker under ``budget_s``; a
    call that overruns, crashes its worker or raises becomes a failed `Score` (``timeout`` or
    ``error``) naming the sample, in its place. ``"inline"`` calls ``function`` here, unbounded.
    """
    items = list(enumerate(samples))
    if execution == "inline" or not items:
        return [function(reward, item) for item in items]
    pool = rule_pool.get()
    chunks = _chunks(len(items), pool.size)
    futures = [
        pool.submit_each(function, [items[i] for i in chunk], shared=(reward,), budget_s_each=budget_s)
        for chunk in chunks
    ]
    results: list[T | Score] = []
    try:
        answers = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)
    except asyncio.CancelledError:
        # The caller gave up (a server deadline): free the workers instead of grinding on.
        for future in futures:
            pool.abandon(future)
        raise
    for chunk, answer in zip(chunks, answers, strict=True):
        outcomes: list[Outcome]
        if isinstance(answer, BaseException):
            # The chunk never ran: the reward or a sample could not be sent to a worker. Sent one
            # by one, a sample that cannot be fails alone.
            outcomes = await _one_by_one(pool, function, reward, [items[i] for i in chunk], budget_s)
        else:
            outcomes = answer
        for index, outcome in zip(chunk, outcomes, strict=True):
            if outcome.error is None:
                results.append(outcome.value)
            else:
                results.append(_failure(outcome.error, items[index][1], index, budget_s))
    return results
