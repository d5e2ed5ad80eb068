"""One call to a model server made dependable: retries with exponential backoff and full jitter, a
deadline over the whole call, and a circuit breaker - the loop `ModelClient` runs around a chat
backend and `PoolingClient` around a reward model server, so that both fail the same way.

A call never raises for a server failure: `call_with_retries` returns an `Attempted` whose
status says what went wrong (``timeout``, ``backend_error``, or ``error`` for a call that raised
something other than `BackendError`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from rewardlab.errors import BackendError
from rewardlab.llm.breaker import CircuitBreaker
from rewardlab.rewards.contract import Status

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one call is retried (the fields of `rewardlab.llm.client.ClientOptions` that say so).

    Attributes:
        max_attempts: Tries per call, the first included, for retryable failures.
        backoff_base_s: First retry waits up to this long; each later one up to twice as long.
        backoff_max_s: Cap on one wait; a server's ``Retry-After`` is honoured up to it.
        deadline_s: Time limit of the call, all its retries and waits included.
    """

    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    deadline_s: float = 300.0


@dataclass(slots=True)
class Attempted(Generic[T]):
    """What a call came to: its value, or a status and reason saying why there is none
    (``status_code``: the HTTP status of a server's final refusal, a 4xx other than 429)."""

    value: T | None
    status: Status
    reason: str | None
    attempts: int
    started: float
    status_code: int | None = None

    @property
    def latency_s(self) -> float:
        return time.monotonic() - self.started


async def call_with_retries(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, breaker: CircuitBreaker
) -> Attempted[T]:
    """Run ``call`` until it returns, retrying a retryable `BackendError` (429, 5xx, a lost
    connection, a malformed answer) with backoff, within ``policy.deadline_s``; ``breaker``
    refuses calls while the server keeps failing. Rate limiting (429) and refusals (other 4xx)
    mean the server is up, so they do not count against it."""
    started = time.monotonic()
    deadline = started + policy.deadline_s
    last_error: BackendError | None = None
    attempt = 0
    while attempt < policy.max_attempts:
        refusal = breaker.allow()
        if refusal is not None:
            return Attempted(None, Status.BACKEND_ERROR, refusal, attempt, started)
        attempt += 1
        remaining = deadline - time.monotonic()
        try:
            value = await asyncio.wait_for(call(), timeout=remaining)
        except asyncio.CancelledError:
            breaker.abandoned()
            raise
        except TimeoutError:
            breaker.failed("no answer before the deadline")
            reason = f"no answer within the {policy.deadline_s:g} s deadline"
            return Attempted(None, Status.TIMEOUT, reason, attempt, started)
        except BackendError as error:
            last_error = error
            if error.status_code == 429 or not error.retryable:
                breaker.succeeded()  # the server answered: it is up
            else:
                breaker.failed(str(error))
            if not error.retryable:
                return Attempted(None, Status.BACKEND_ERROR, str(error), attempt, started, error.status_code)
            if attempt == policy.max_attempts:
                break
            delay = backoff(policy, attempt, error)
            if time.monotonic() + delay >= deadline:
                reason = (
                    f"the {policy.deadline_s:g} s deadline would pass before the next retry "
                    f"(after {attempt} attempts; last: {error})"
                )
                return Attempted(None, Status.TIMEOUT, reason, attempt, started)
            await asyncio.sleep(delay)
            continue
        except Exception as error:  # noqa: BLE001 - a client bug must fail this call, not the batch
            breaker.failed(f"{type(error).__name__}: {error}")
            return Attempted(None, Status.ERROR, f"{type(error).__name__}: {error}", attempt, started)
        breaker.succeeded()
        return Attempted(value, Status.OK, None, attempt, started)
    reason = f"gave up after {attempt} attempts; last: {last_error}"
    return Attempted(None, Status.BACKEND_ERROR, reason, attempt, started)


def backoff(policy: RetryPolicy, attempt: int, error: BackendError) -> float:
    """The wait before retry number ``attempt``: the server's ``Retry-After`` (capped), else a
    uniform draw below ``backoff_base_s * 2 ** (attempt - 1)`` (capped)."""
    if error.retry_after is not None:
        return min(error.retry_after, policy.backoff_max_s)
    cap = min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (attempt - 1))
    return random.uniform(0.0, cap)
