"""The reward runs on an event loop of its own, in its own thread, apart from the HTTP server's.

Why a second loop: many rewards do CPU work inside ``ascore`` (a rule reward checks every sample
synchronously), which would stall the server's loop - health checks, metrics, and above all the
immediate 503 that admission control promises. On its own loop the reward is used the way a
trainer uses it: one long-lived loop, batches as concurrent tasks (judge clients keep their
connection pools and caches per loop).

A batch always ends in one score per sample: a reward that raises, or returns the wrong number of
scores, gives every sample of the batch status ``error`` with the reason; past the deadline every
sample gets status ``timeout`` and the batch is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rewardlab.rewards.contract import Reward, Sample, Score, Status, check_batch
from rewardlab.serving.limits import Admission, Place

logger = logging.getLogger(__name__)

#: Scored once at start-up when warming up: it loads models and starts worker pools. Whatever
#: status it gets (a reward needing fields it lacks answers ``invalid_input``) is fine.
WARMUP_SAMPLE = Sample(prompt="warm-up", completion="warm-up", reference="warm-up", id="warm-up")


async def score_safely(reward: Reward, samples: Sequence[Sample]) -> list[Score]:
    """``reward.ascore(samples)``, with an exception or a wrong count turned into status ``error``
    for every sample: one broken batch must not take the server down."""
    try:
        scores = check_batch(reward, samples, await reward.ascore(samples))
        wrong = next((s for s in scores if not isinstance(s, Score)), None)
        if wrong is not None:
            raise TypeError(f"reward {reward.name!r} returned a {type(wrong).__name__} instead of a Score")
    except Exception as error:  # a reward bug fails its batch, not the server
        logger.exception("reward %r failed on a batch of %d samples", reward.name, len(samples))
        reason = f"reward {reward.name!r} raised {type(error).__name__}: {error}"
        return [Score.failure(Status.ERROR, reason) for _ in samples]
    return scores


@dataclass(slots=True)
class Warmup:
    """How the start-up probe went (reported by ``/ready``)."""

    seconds: float
    status: str


class ScoringThread:
    """``reward`` scoring on its own event loop in a daemon thread (see the module docstring)."""

    def __init__(self, reward: Reward):
        self.reward = reward
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, name=f"rewardlab-scoring-{reward.name}", daemon=True
        )

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        # Stopped: cancel what still runs, so rewards release connections on this loop.
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)

    def submit(self, samples: Sequence[Sample], on_finished: Callable[[], None]) -> Batch:
        """Start scoring ``samples``; call from the server's event loop. ``on_finished`` runs
        there once the batch has stopped running."""
        return Batch(self, samples, asyncio.get_running_loop(), on_finished)


class Batch:
    """One batch scoring on the scoring thread, seen from the server's loop: ``result`` is its
    scores. ``on_finished`` runs once the batch has stopped running on the scoring loop
    (completed, failed, or - after `cancel` - unwound), which can be after a deadline answer."""

    def __init__(
        self,
        scorer: ScoringThread,
        samples: Sequence[Sample],
        server_loop: asyncio.AbstractEventLoop,
        on_finished: Callable[[], None],
    ):
        self._scorer = scorer
        self._server_loop = server_loop
        self._on_finished = on_finished
        self.result: asyncio.Future[list[Score]] = server_loop.create_future()
        self._task: asyncio.Task[list[Score]] | None = None
        # Both callbacks run on the scoring loop in the order they were queued, so a cancel
        # always finds the task created.
        scorer.loop.call_soon_threadsafe(self._start, samples)

    def _start(self, samples: Sequence[Sample]) -> None:
        self._task = self._scorer.loop.create_task(score_safely(self._scorer.reward, samples))
        self._task.add_done_callback(lambda task: self._server_loop.call_soon_threadsafe(self._deliver, task))

    def _deliver(self, task: asyncio.Task[list[Score]]) -> None:
        if not self.result.done():
            if task.cancelled():
                self.result.cancel()
            else:
                self.result.set_result(task.result())
        self._on_finished()

    def cancel(self) -> None:
        self._scorer.loop.call_soon_threadsafe(self._cancel_task)

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def score_within(
    scorer: ScoringThread, admission: Admission, place: Place, samples: Sequence[Sample], deadline: float
) -> list[Score]:
    """Wait for a scoring slot, score, and give up at ``deadline`` (``time.monotonic``): then
    every sample gets status ``timeout`` and the batch is cancelled. Releases ``place`` - and the
    slot - once the batch has stopped, which may be after this returns."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(admission.acquire_slot(), timeout=max(deadline - started, 0.0))
    except TimeoutError:
        place.release()
        return _timed_out(
            samples, f"still queued for a scoring slot after {time.monotonic() - started:.3g} s"
        )
    except BaseException:
        place.release()
        raise

    def finished() -> None:
        admission.release_slot()
        place.release()

    batch = scorer.submit(samples, finished)
    try:
        return await asyncio.wait_for(
            asyncio.shield(batch.result), timeout=max(deadline - time.monotonic(), 0.0)
        )
    except TimeoutError:
        batch.cancel()
        return _timed_out(samples, f"no scores after {time.monotonic() - started:.3g} s")
    except BaseException:
        batch.cancel()
        raise


def _timed_out(samples: Sequence[Sample], what: str) -> list[Score]:
    reason = f"request deadline passed: {what}"
    return [Score.failure(Status.TIMEOUT, reason) for _ in samples]
