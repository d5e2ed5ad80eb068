"""What the reward server accepts, and admission control: how many batches score at once, how many
wait, and who is turned away.

A reward server under a training job is one shared resource behind many clients. Past a bounded
queue, waiting longer only moves the timeout somewhere less visible, so a full server answers 503
with ``Retry-After`` at once and the client backs off.
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
        max_batch_size: Most samples in one request; more get 413.
        deadline_s: Time a request may take, from arrival (queueing included) to its scores.
            Past it the request is answered 200 with every sample's status ``timeout``, and its
            batch is cancelled.
        max_concurrency: Batches scoring at once.
        queue: Requests that may wait for a scoring slot (or be read) beyond those scoring;
            past ``max_concurrency + queue`` requests in the server, new ones get 503 at once.
        retry_after_s: The ``Retry-After`` a 503 carries.
        token: Bearer token that ``/score`` and ``/get_reward`` require; None serves without
            authentication. Health, readiness and metrics never need it (probes and scrapers).
        failure_value: The number ``/get_reward`` (OpenRLHF, which needs a number per sample)
            returns for a sample without a value; such samples are also flagged in the response
            and counted in the metrics.
        warmup: Score one probe sample after start-up (loading models, starting worker pools)
            before ``/ready`` says ready; the probe's scores are not used.
    """

    max_body_bytes: int = 32 * 2**20
    max_batch_size: int = 1024
    deadline_s: float = 300.0
    max_concurrency: int = 4
    queue: int = 64
    retry_after_s: float = 1.0
    token: str | None = field(default=None, repr=False)
    failure_value: float = 0.0
    warmup: bool = True

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_batch_size", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.queue < 0:
            raise ValueError(f"queue must be 0 or more, got {self.queue}")
        if not self.deadline_s > 0:
            raise ValueError(f"deadline_s must be positive, got {self.deadline_s}")
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


class Admission:
    """At most ``max_concurrency`` batches scoring and ``max_concurrency + queue`` requests in the
    server at once; a request beyond that is refused without waiting.

    A request holds its `Place` from arrival (its body is read inside it, which also bounds the
    memory that bodies take) until its batch has stopped scoring, which for a request past its
    deadline can be after its answer went out. Used from the server's event loop only.
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
        """Requests in the server that are not scoring: being read, or queued for a slot."""
        return self.admitted - self.scoring
