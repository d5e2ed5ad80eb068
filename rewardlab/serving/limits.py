"""What the reward server accepts, and admission control: how many batches score at once, how many
wait, and who is turned away.

A reward server under a training job is one shared resource behind many clients. Past a bounded
queue, waiting longer only moves the timeout somewhere less visible, so a full server answers 503
with ``Retry-After`` at once and the client backs off.

A request is admitted only once its body has arrived whole. Bodies still arriving are bounded
apart from admission - by a time (``body_timeout_s``, for the whole body, so a body trickled a
byte at a time is held to it too) and by the bytes they may hold together until parsed
(`ReadingBudget`) -
because a client that sends its headers and then stalls costs the server nothing but those
bytes; while it held a place among those admitted, a few such connections turned every other
client away.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Limits and policies of ``rewardlab serve``.

    Attributes:
        max_body_bytes: Largest request body accepted; larger ones get 413.
        body_timeout_s: Time the whole body may take to arrive, from the request's headers;
            past it the request gets 408 and its connection is closed.
        max_reading_bytes: Most bytes that bodies not yet parsed (arriving, or waiting for or
            in a parser) may hold together, counted as they arrive; a request whose next bytes
            would go past it gets 503 with ``Retry-After``.
        max_batch_size: Most samples in one request; more get 413 (counted before any sample
            is checked, so a body of a million empty samples costs one cheap parse).
        max_field_values: Most JSON values (each number, string, list, object, at any depth)
            one sample's ``fields`` may hold; more get 413, before any sample is checked.
        deadline_s: Time a request may take, from arrival (parsing and queueing included) to
            its scores. Past it the request is answered 200 with every sample's status
            ``timeout``, and its batch is cancelled; a body not even parsed by then gets 503
            with ``Retry-After`` (without its samples there is no per-sample answer).
        max_concurrency: Batches scoring at once.
        queue: Requests (their bodies read) that may wait for a scoring slot beyond those
            scoring; past ``max_concurrency + queue`` such requests, new ones get 503 at once.
        retry_after_s: The ``Retry-After`` a 503 carries.
        token: Bearer token that ``/score`` and ``/get_reward`` require; None serves without
            authentication. Health, readiness and metrics never need it (probes and scrapers).
        failure_value: The number ``/get_reward`` (OpenRLHF, which needs a number per sample)
            returns for a sample without a value; such samples are also flagged in the response
            and counted in the metrics.
        warmup: Score one probe sample after start-up (loading models, starting worker pools)
            before ``/ready`` says ready; the probe's scores are not used.
        max_text_chars: Longest text a score's ``reason``, or any text in its ``details``, carries
            in an answer; longer ones are clipped, so that rewards that quote the completion do
            not send a large request back several times over.
    """

    max_body_bytes: int = 32 * 2**20
    body_timeout_s: float = 60.0
    max_reading_bytes: int = 256 * 2**20
    max_batch_size: int = 1024
    max_field_values: int = 1_000_000
    deadline_s: float = 300.0
    max_concurrency: int = 4
    queue: int = 64
    retry_after_s: float = 1.0
    token: str | None = field(default=None, repr=False)
    failure_value: float = 0.0
    warmup: bool = True
    max_text_chars: int = 8000

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_reading_bytes",
            "max_batch_size",
            "max_field_values",
            "max_concurrency",
            "max_text_chars",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.queue < 0:
            raise ValueError(f"queue must be 0 or more, got {self.queue}")
        for name in ("deadline_s", "body_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.retry_after_s >= 0:
            raise ValueError(f"retry_after_s must be 0 or more, got {self.retry_after_s}")
        if not math.isfinite(self.failure_value):
            raise ValueError(f"failure_value must be a finite number, got {self.failure_value}")
        if self.token is not None and not self.token:
            raise ValueError("token must not be empty; leave it unset to serve without authentication")

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds, as HTTP wants it (rounded up, so never early)."""
        return str(math.ceil(self.retry_after_s))


class Place:
    """A request's place in the server, from admission until it leaves; released exactly once."""

    __slots__ = ("_admission", "released")

    def __init__(self, admission: Admission):
        self._admission = admission
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._admission.admitted -= 1


class ReadingBudget:
    """The bytes that request bodies hold together from their first byte until they are parsed,
    at most ``max_bytes``; ``requests`` counts the bodies still arriving. Used from the server's
    event loop only.

    A body that has arrived counts until it is parsed, not only until it arrives: it then waits
    for a parser holding a place (`Admission`), and counted by places alone, 68 bodies of 32 MB
    could wait at once."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.held = 0
        self.requests = 0

    def take(self, count: int) -> bool:
        """Hold ``count`` more bytes, if they fit."""
        if self.held + count > self.max_bytes:
            return False
        self.held += count
        return True

    def give(self, count: int) -> None:
        self.held -= count


class Admission:
    """At most ``max_concurrency`` batches scoring and ``max_concurrency + queue`` requests in the
    server at once; a request beyond that is refused without waiting.

    A request holds its `Place` from the moment its body has arrived whole (which bounds the
    memory that parsed batches take) until its batch has stopped scoring, which for a request
    past its deadline can be after its answer went out. Used from the server's event loop only.
    """

    def __init__(self, max_concurrency: int, queue: int):
        self.max_concurrency = max_concurrency
        self.capacity = max_concurrency + queue
        self.admitted = 0
        self.scoring = 0
        self._slots: asyncio.Semaphore | None = None

    def admit(self) -> Place | None:
        """A place, or None when the server is full."""
        if self.admitted >= self.capacity:
            return None
        self.admitted += 1
        return Place(self)

    async def acquire_slot(self) -> None:
        """Wait for one of the ``max_concurrency`` scoring slots."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        await self._slots.acquire()
        self.scoring += 1

    def release_slot(self) -> None:
        assert self._slots is not None
        self.scoring -= 1
        self._slots.release()

    @property
    def waiting(self) -> int:
        """Requests admitted that are not scoring: being parsed, or queued for a slot."""
        return self.admitted - self.scoring
