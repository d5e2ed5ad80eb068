"""Request bodies made into samples within the request's deadline: small ones at once, on the
event loop; larger ones in worker processes, smallest first.

Why processes, not threads: parsing JSON holds the GIL from start to end - the ``json`` module
and pydantic-core alike - so while a thread parsed a 30 MB body of numbers (0.6 s) the event
loop answered nothing: no ``/health``, no 503, no deadline. A thread also cannot be stopped at
a deadline, and what it allocates (up to 25 bytes per byte of body, each ``{}`` a dict) lands in
the server's heap. In a worker (`KillableProcessPool`) the loop goes on, a parse still running
at its request's deadline is killed, and an address-space limit bounds what one parse may take.

Why smallest first: the time a parse takes grows with the body, so a small body waiting behind
large ones waited for all of them (six 31 MB bodies held an honest 1-sample request for 16 s,
its deadline 2 s). Now a body waits at most for the parses already running and for smaller bodies;
a large body behind a stream of smaller ones waits no longer than its deadline. Small bodies
skip the queue - up to `INLINE_BYTES` holding at most `INLINE_VALUES` JSON values, counted
from the bytes before anything is parsed - so that a small request never waits behind anyone's
parse: on the loop they take 2 ms at most, not much more than a trip to a worker.

The deadline covers the parse: a body not parsed by its request's deadline - still queued, or
killed mid-parse - is answered 503 with ``Retry-After``. It cannot be answered like a request
that timed out while scoring (a ``timeout`` status for each sample): unparsed, it has no samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any

from rewardlab.errors import RequestError
from rewardlab.rewards.contract import Sample
from rewardlab.rewards.process_pool import KillableProcessPool, LazyPool, WorkerCrashed

#: Bodies up to this size, holding at most `INLINE_VALUES` JSON values, are parsed on the event
#: loop: 1024 short samples take 2 ms, as do 8,000 numbers or 4,000 empty objects (the dearest).
INLINE_BYTES = 64 * 2**10
INLINE_VALUES = 8192
#: Worker processes parsing larger bodies.
WORKERS = 2

Reader = Callable[[bytes], list[Sample]]


def parse_memory_limit(max_body_bytes: int) -> int:
    """The address space one parsing worker may use: 1 GiB for its interpreter (about 40 MB) and
    slack, and 32 bytes per byte of the largest body - more than any body within the limits has
    needed (a 32 MB body of ``{}`` in the fields of 16 samples took 1.1 GB) - so that parsing
    holds at most `WORKERS` times this, whatever the bodies are made of. A parse that needs more
    is refused with 413."""
    return 2**30 + 32 * max_body_bytes


def _cheap(body: bytes) -> bool:
    """Whether ``body`` is small enough to parse on the event loop. Every JSON value but the
    first comes after a ``,``, ``[`` or ``{``, so their count bounds the values (those inside
    strings only make it larger), and the values bound the time a parse takes."""
    return len(body) <= INLINE_BYTES and (
        body.count(b",") + body.count(b"[") + body.count(b"{") < INLINE_VALUES
    )


def _parse(read: Reader, body: bytes) -> list[Sample] | RequestError:
    """``read(body)`` in a worker; a refusal is returned, since the pool passes on only the
    message of an exception raised there."""
    try:
        return read(body)
    except RequestError as error:
        return error
    except MemoryError:
        return _too_dear()


def _too_dear() -> RequestError:
    return RequestError(413, "the body needs more memory to parse than a parser may use")


def _late(deadline_s: float) -> RequestError:
    return RequestError(503, f"server busy: the body could not be parsed within deadline_s {deadline_s:g}")


class BodyParsers:
    """Parses bodies as the module docstring says; used from the server's event loop only.

    Args:
        memory_limit_bytes: Address space of each worker (`parse_memory_limit`).
    """

    def __init__(self, memory_limit_bytes: int):
        self._pool = LazyPool(
            functools.partial(
                KillableProcessPool,
                WORKERS,
                preload=("rewardlab.serving.wire", "rewardlab.integrations.openrlhf"),
                memory_limit_bytes=memory_limit_bytes,
            )
        )
        self._idle = WORKERS
        #: Bodies waiting for a worker: (size, arrival order, the future that hands one over).
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def parse(
        self, read: Reader, body: bytes, deadline: float, deadline_s: float, done: Callable[[], None]
    ) -> list[Sample]:
        """``read(body)``, or `RequestError`: its own, 503 when the body is not parsed by
        ``deadline`` (``time.monotonic``; ``deadline_s`` is named in the message), 413 when it
        needs more memory than a worker has. ``done`` is called once, on the event loop, when the
        body is parsed or never will be: until then the body is held (its bytes counted)."""
        if _cheap(body):
            try:
                return read(body)
            finally:
                done()
        try:
            await self._turn(len(body), deadline, deadline_s)
        except BaseException:
            done()
            raise
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _late(deadline_s)
            future = self._pool.get().submit(_parse, read, body, budget_s=remaining)
        except BaseException:
            self._finished(done)
            raise
        loop = asyncio.get_running_loop()

        def finished(_: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the server has stopped and its loop closed
                loop.call_soon_threadsafe(self._finished, done)

        future.add_done_callback(finished)
        try:
            # The pool's budget starts once the body is sent, not while a worker starts up.
            async with asyncio.timeout(deadline - time.monotonic()):
                parsed = await asyncio.wrap_future(future)
        except TimeoutError:  # ours, or the pool's TaskTimeout: the worker was killed
            raise _late(deadline_s) from None
        except WorkerCrashed:  # out of memory in native code, which aborts rather than raise
            raise _too_dear() from None
        if isinstance(parsed, RequestError):
            raise parsed
        return parsed

    async def _turn(self, size: int, deadline: float, deadline_s: float) -> None:
        """Wait for a worker, the smallest body first, until ``deadline``."""
        if self._idle:
            self._idle -= 1
            return
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (size, next(self._order), ticket))
        try:
            async with asyncio.timeout(deadline - time.monotonic()):
                await ticket
        except BaseException as error:
            if ticket.done() and not ticket.cancelled():
                self._hand_on()  # handed a worker just as the wait ended: pass it on
            else:
                ticket.cancel()
            if isinstance(error, TimeoutError):
                raise _late(deadline_s) from None
            raise

    def _hand_on(self) -> None:
        """Give a worker to the smallest body still waiting, else count it idle."""
        while self._waiting:
            _, _, ticket = heapq.heappop(self._waiting)
            if not ticket.done():
                ticket.set_result(None)
                return
        self._idle += 1

    def _finished(self, done: Callable[[], None]) -> None:
        done()
        self._hand_on()

    def close(self) -> None:
        """Stop the workers (a parse still running is killed)."""
        self._pool.close()
