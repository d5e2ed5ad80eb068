"""`ModelClient`: everything between a judge and a backend that makes model calls dependable and
cheap - a persistent cache, one request per distinct prompt in a batch, bounded concurrency,
retries with exponential backoff and jitter, a deadline per call, and a circuit breaker (the
retry loop is `rewardlab.llm.retrying`, which the reward model servers' `PoolingClient` shares).

The cache keeps only answers its caller accepts (``keep``: a judge accepts an answer it reads a
verdict from), checked again when an answer is read back - so an answer cut off at
``max_tokens``, or one whose verdict cannot be trusted, is asked again next time instead of being
replayed as the same failure forever, and one a fixed reader no longer accepts is dropped.

A call never raises for a backend failure: it returns a `Completion` whose status says what went
wrong (``timeout``, ``backend_error``, or ``error`` for a backend that raised something
unexpected), so a judge turns it into a `Score` with a reason. A cache that cannot be read or
written is skipped with a warning. Cache reads and writes run on the event loop: a hit costs
about 0.1 ms, well below what a thread hop would add.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.cache_location import cache_dir
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse
from rewardlab.llm.breaker import CircuitBreaker
from rewardlab.llm.cache import AnswerCache
from rewardlab.llm.fence import Fence
from rewardlab.llm.retrying import RetryPolicy, call_with_retries
from rewardlab.llm.seeding import seeded
from rewardlab.rewards.contract import Status, Usage

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientOptions:
    """How a judge calls its backend.

    Attributes:
        max_concurrency: Calls in flight at once (per event loop).
        max_attempts: Tries per call, the first included, for retryable failures (429, 5xx,
            timeouts of one request, lost connections, malformed responses).
        backoff_base_s: First retry waits up to this long; each later one up to twice as long
            (full jitter: a uniform draw below the cap, so that many clients do not retry in step).
        backoff_max_s: Cap on one wait. A server's ``Retry-After`` is honoured up to this cap.
        deadline_s: Time limit of one call, all its retries and waits included; past it the
            call ends with status ``timeout``.
        breaker_threshold: Failed attempts in a row (across all calls) that open the circuit.
        breaker_cooldown_s: How long an open circuit refuses calls before letting a probe through.
        cache: SQLite file for answers; ``"default"`` is ``judge-cache.sqlite`` in rewardlab's
            cache folder, None keeps answers in memory for this process only.
    """

    max_concurrency: int = 16
    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    deadline_s: float = 300.0
    breaker_threshold: int = 8
    breaker_cooldown_s: float = 30.0
    cache: str | None = "default"

    def __post_init__(self) -> None:
        if self.max_concurrency < 1 or self.max_attempts < 1:
            raise ValueError("max_concurrency and max_attempts must be at least 1")
        if self.deadline_s <= 0:
            raise ValueError("deadline_s must be positive")

    def policy(self) -> RetryPolicy:
        """How a call is retried under these options."""
        return RetryPolicy(self.max_attempts, self.backoff_base_s, self.backoff_max_s, self.deadline_s)


#: ``keep(response, fences)``: whether an answer may be cached (``fences`` are those its prompt
#: was rendered with).
Keep = Callable[[ChatResponse, tuple[Fence, ...]], bool]


@dataclass(slots=True)
class Completion:
    """The outcome of one call: a response, or a status and reason saying why there is none.
    ``fences`` are the fences of the prompt the response answered - a cached or shared answer
    quotes the nonces of an earlier rendering - and ``key`` its cache key (None for a sampled
    request, which is never cached)."""

    response: ChatResponse | None
    status: Status = Status.OK
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    fences: tuple[Fence, ...] = ()
    key: str | None = None

    @property
    def ok(self) -> bool:
        return self.response is not None


@dataclass(slots=True)
class _LoopState:
    """What belongs to one event loop: asyncio primitives cannot cross loops."""

    semaphore: asyncio.Semaphore
    in_flight: dict[str, asyncio.Task[Completion]] = field(default_factory=dict)
    sessions: int = 0


class ModelClient:
    """Calls ``backend`` the dependable way (see the module docstring)."""

    def __init__(self, backend: Backend, options: ClientOptions | None = None):
        self.backend = backend
        self.options = options or ClientOptions()
        path = cache_path(self.options)
        self.cache = AnswerCache(path if path is not None else ":memory:")
        self.breaker = CircuitBreaker(self.options.breaker_threshold, self.options.breaker_cooldown_s)
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState(asyncio.Semaphore(self.options.max_concurrency))
        return state

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Make calls for a while on the running loop (a judge wraps each batch in one).

        When the last session of a loop ends, calls still running - their callers gave up on
        them - are cancelled, and then the backend's connections are closed: a call cut off by
        our own closing must not count as the backend failing.
        """
        async with self.backend.session():
            state = self._state()
            state.sessions += 1
            try:
                yield
            finally:
                state.sessions -= 1
                if state.sessions == 0:
                    orphans = list(state.in_flight.values())
                    for task in orphans:
                        task.cancel()
                    await asyncio.gather(*orphans, return_exceptions=True)

    async def complete(
        self, request: ChatRequest, namespace: str = "", keep: Keep | None = None
    ) -> Completion:
        """One call: from the cache, from an identical call already in flight, or from the backend.

        With ``keep``, an answer is stored only when ``keep`` accepts it, and a stored one that it
        no longer accepts is removed and asked again. A sampled request (temperature above 0)
        without a seed is a fresh draw each time: it skips the cache and the sharing of calls in
        flight. Inside `rewardlab.llm.seeding.sampling_seed`, a sampled request without a seed
        takes that block's seed first (how each vote of a `vote` reward is its own cached draw).
        """
        request = seeded(request)
        if request.temperature > 0 and request.seed is None:
            async with self._state().semaphore:
                return await self._call(request)
        key = request.fingerprint(self.backend.name, namespace)
        cached = self._cached(key, request, keep)
        if cached is not None:
            response, fences = cached
            return Completion(response, usage=Usage(calls=1, cached_calls=1), fences=fences, key=key)
        state = self._state()
        shared = state.in_flight.get(key)
        if shared is not None:
            outcome = await asyncio.shield(shared)
            # The first caller paid for the answer; this one only waited for it.
            return Completion(
                outcome.response,
                outcome.status,
                outcome.reason,
                Usage(calls=1, cached_calls=1),
                fences=outcome.fences,
                key=key,
            )
        # The call runs as its own task, so that one caller being cancelled does not fail the
        # others waiting on the same answer.
        task = asyncio.get_running_loop().create_task(self._call_and_store(request, key, state, keep))
        state.in_flight[key] = task
        return await asyncio.shield(task)

    async def _call_and_store(
        self, request: ChatRequest, key: str, state: _LoopState, keep: Keep | None
    ) -> Completion:
        try:
            async with state.semaphore:
                outcome = await self._call(request)
            outcome.key = key
            response = outcome.response
            if response is not None and (keep is None or keep(response, request.fences)):
                nonces = [made.nonce for made in request.fences]
                try:
                    self.cache.put(key, self.backend.name, response, nonces)
                except sqlite3.Error as error:
                    logger.warning("judge cache %s: could not store an answer: %s", self.cache.path, error)
            return outcome
        finally:
            del state.in_flight[key]

    def _cached(
        self, key: str, request: ChatRequest, keep: Keep | None
    ) -> tuple[ChatResponse, tuple[Fence, ...]] | None:
        """The cached answer and the fences it quotes, if any; a cache that cannot be read is a
        miss, not a failed call."""
        try:
            stored = self.cache.get(key)
            if stored is None:
                return None
            response, nonces = stored
            # The key holds every fence's label and text, so the answer's prompt had these fences.
            fences = tuple(
                Fence(made.label, nonce, made.text)
                for made, nonce in zip(request.fences, nonces, strict=True)
            )
            if keep is not None and not keep(response, fences):
                self.cache.purge([key])
                return None
            return response, fences
        except sqlite3.Error as error:
            logger.warning(
                "judge cache %s: could not be read, asking the backend: %s", self.cache.path, error
            )
            return None

    async def _call(self, request: ChatRequest) -> Completion:
        outcome = await call_with_retries(
            lambda: self.backend.complete(request), self.options.policy(), self.breaker
        )
        response = outcome.value
        if response is None:
            usage = Usage(latency_s=outcome.latency_s, calls=1)
            reason = f"{self.backend.name}: {outcome.reason}"
            return Completion(None, outcome.status, reason, usage, outcome.attempts)
        usage = response.usage
        response_usage = Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            latency_s=outcome.latency_s,
            calls=1,
        )
        return Completion(response, usage=response_usage, attempts=outcome.attempts, fences=request.fences)

    async def aclose(self) -> None:
        await self.backend.aclose()

    def close(self) -> None:
        self.cache.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self.backend, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ModelClient.__init__(self, state["backend"], state["options"])


def cache_path(options: ClientOptions) -> Path | None:
    """Where ``options`` keep answers on disk, or None for an in-memory cache."""
    if options.cache is None:
        return None
    return cache_dir() / "judge-cache.sqlite" if options.cache == "default" else Path(options.cache)
