"""The reward server's HTTP API: ``create_app(reward, options)``.

Endpoints:

- ``POST /score``: ``{"samples": [{prompt, completion, reference, id, fields}, ...]}`` ->
  ``{"scores": [{id, value, status, steps, breakdown, reason, usage, details}, ...], "reward",
  "latency_s"}``: one score per sample, in order, each with its sample's id.
- ``POST /get_reward``: OpenRLHF's remote reward protocol (``--remote_rm_url``), see
  `wire.GetRewardRequest` and `wire.get_reward_record`.
- ``GET /health``: the process answers (liveness). ``GET /ready``: the reward is built and warm
  (503 until then). ``GET /metrics``: Prometheus text (`metrics.ServerMetrics`).

What a request can get instead of scores, checked in this order: 401 without the bearer token or
with a wrong one; 413 for a body over ``max_body_bytes`` (by its Content-Length, before anything
else is done with it); 503 with ``Retry-After`` when ``max_concurrency + queue`` requests are
already in the server; 422 for malformed JSON or fields, naming the sample index and field; 413
for more than ``max_batch_size`` samples. Errors are ``{"detail": "<reason>"}``.

Failures while scoring are scores, not HTTP errors: a request past its deadline is answered 200
with every sample's status ``timeout`` (the per-sample statuses tell a trainer exactly which
scores are missing, the same as any other failure, where a 504 would lose the batch's shape), and
a reward that raises gives every sample of its batch status ``error``; the server goes on serving.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at runtime,
# and ``fastapi.Request`` there names a local import.
import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from rewardlab.optional import require
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.serving.limits import Admission, ServeOptions
from rewardlab.serving.metrics import ServerMetrics
from rewardlab.serving.scoring import WARMUP_SAMPLE, ScoringThread, Warmup, score_within
from rewardlab.serving.wire import (
    RequestError,
    get_reward_record,
    read_get_reward_request,
    read_score_request,
    render_json,
    score_record,
)

logger = logging.getLogger(__name__)


def _json(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    from fastapi.responses import Response

    return Response(render_json(content), status_code=status, headers=headers, media_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    return _json({"detail": message}, status, headers)


Reader = Callable[[bytes], list[Sample]]
Answer = Callable[[Sequence[Sample], list[Score], float], dict[str, Any]]


class RewardService:
    """Everything one server holds: the reward, its scoring thread, admission and metrics."""

    def __init__(self, reward: Reward, options: ServeOptions):
        self.reward = reward
        self.options = options
        self.admission = Admission(options.max_concurrency, options.queue)
        self.scorer = ScoringThread(reward)
        self.metrics = ServerMetrics(reward.name)
        self.warmup: Warmup | None = None
        self.metrics.watch(
            scoring=lambda: self.admission.scoring,
            waiting=lambda: self.admission.waiting,
            ready=lambda: self.ready,
        )

    @property
    def ready(self) -> bool:
        return self.warmup is not None

    async def warm_up(self) -> None:
        """Score `WARMUP_SAMPLE` once (within the deadline), then be ready whatever it gave."""
        started = time.monotonic()
        if not self.options.warmup:
            self.warmup = Warmup(0.0, "skipped")
            return
        batch = self.scorer.submit([WARMUP_SAMPLE], on_finished=lambda: None)
        try:
            [score] = await asyncio.wait_for(asyncio.shield(batch.result), self.options.deadline_s)
            status = score.status.value
        except TimeoutError:
            batch.cancel()
            status = Status.TIMEOUT.value
        self.warmup = Warmup(time.monotonic() - started, status)
        logger.info("reward %r warm after %.2f s (probe: %s)", self.reward.name, self.warmup.seconds, status)

    def refusal(self, headers: Any) -> tuple[int, str] | None:
        """Why a scoring request is refused before its body is read (401, 413), if it is."""
        token = self.options.token
        if token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not given:
                return 401, "missing bearer token: send 'Authorization: Bearer <token>'"
            if not hmac.compare_digest(given.strip().encode(), token.encode()):
                return 401, "wrong bearer token"
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.options.max_body_bytes:
            return 413, f"request body of {length} bytes exceeds max_body_bytes {self.options.max_body_bytes}"
        return None

    async def read_body(self, chunks: AsyncIterator[bytes]) -> bytes:
        """The body, read no further than ``max_body_bytes`` (a body without a Content-Length is
        counted as it arrives)."""
        body = bytearray()
        async for chunk in chunks:
            body += chunk
            if len(body) > self.options.max_body_bytes:
                raise RequestError(413, f"request body exceeds max_body_bytes {self.options.max_body_bytes}")
        return bytes(body)

    def check_size(self, samples: Sequence[Sample]) -> None:
        if len(samples) > self.options.max_batch_size:
            raise RequestError(
                413, f"batch of {len(samples)} samples exceeds max_batch_size {self.options.max_batch_size}"
            )

    async def serve_batch(self, request: Any, endpoint: str, read: Reader, answer: Answer) -> Any:
        """Answer a scoring request: refusals and limits first, then scores (module docstring)."""
        from fastapi.responses import Response

        arrived = time.monotonic()
        refusal = self.refusal(request.headers)
        if refusal is not None:
            status, message = refusal
            return _error(status, message, {"WWW-Authenticate": "Bearer"} if status == 401 else None)
        place = self.admission.admit()
        if place is None:
            return _error(
                503,
                f"server busy: {self.admission.capacity} requests already in it; retry later",
                {"Retry-After": self.options.retry_after_header},
            )
        try:
            samples = read(await self.read_body(request.stream()))
            self.check_size(samples)
        except RequestError as error:
            place.release()
            return _error(error.status, str(error))
        except BaseException:
            place.release()
            raise
        scores = await score_within(
            self.scorer, self.admission, place, samples, arrived + self.options.deadline_s
        )
        try:
            body = render_json(answer(samples, scores, time.monotonic() - arrived))
        except (TypeError, ValueError) as error:
            reason = f"reward {self.reward.name!r} returned scores that are not JSON-serialisable: {error}"
            scores = [Score.failure(Status.ERROR, reason) for _ in samples]
            body = render_json(answer(samples, scores, time.monotonic() - arrived))
        self.metrics.scores(endpoint, scores)
        if endpoint == "/get_reward":
            self.metrics.substituted(scores)
        return Response(body, media_type="application/json")


def create_app(reward: Reward, options: ServeOptions | None = None, *, close_reward: bool = False) -> Any:
    """The FastAPI application serving ``reward`` (see the module docstring).

    The app owns a scoring thread, started and stopped with the app's lifespan (uvicorn runs it).
    With ``close_reward`` the reward is closed when the app shuts down (its worker processes and
    connections released before uvicorn re-raises the SIGTERM that stopped it); otherwise it
    belongs to the caller. ``app.state.service`` is the `RewardService`.
    """
    fastapi = require("fastapi", "rewardlab serve")
    from fastapi import Request
    from fastapi.responses import Response

    service = RewardService(reward, options or ServeOptions())

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        service.scorer.start()
        warming = asyncio.get_running_loop().create_task(service.warm_up())
        try:
            yield
        finally:
            warming.cancel()
            await asyncio.to_thread(service.scorer.stop)
            if close_reward:
                await asyncio.to_thread(reward.close)

    app = fastapi.FastAPI(title="rewardlab serve", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.service = service

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        started = time.monotonic()
        response = await call_next(request)
        service.metrics.request(request.url.path, response.status_code, time.monotonic() - started)
        return response

    def score_answer(samples: Sequence[Sample], scores: list[Score], latency_s: float) -> dict[str, Any]:
        return {
            "scores": [score_record(score, sample.id) for sample, score in zip(samples, scores, strict=True)],
            "reward": reward.name,
            "latency_s": latency_s,
        }

    def get_reward_answer(samples: Sequence[Sample], scores: list[Score], latency_s: float) -> dict[str, Any]:
        return get_reward_record(reward.name, scores, service.options.failure_value)

    @app.post("/score")
    async def score(request: Request) -> Any:
        return await service.serve_batch(request, "/score", read_score_request, score_answer)

    @app.post("/get_reward")
    async def get_reward(request: Request) -> Any:
        return await service.serve_batch(request, "/get_reward", read_get_reward_request, get_reward_answer)

    @app.get("/health")
    async def health() -> Any:
        return _json({"status": "ok", "reward": reward.name})

    @app.get("/ready")
    async def ready() -> Any:
        if service.warmup is None:
            return _json({"ready": False, "reward": reward.name}, 503)
        warmup = {"seconds": service.warmup.seconds, "probe_status": service.warmup.status}
        return _json({"ready": True, "reward": reward.name, "warmup": warmup})

    @app.get("/metrics")
    async def metrics() -> Any:
        return Response(service.metrics.render(), media_type=service.metrics.content_type)

    return app
