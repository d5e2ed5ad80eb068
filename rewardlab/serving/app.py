"""The reward server's HTTP API: ``create_app(reward, options)``.

Endpoints:

- ``POST /score``: ``{"samples": [{prompt, completion, reference, id, fields}, ...]}`` ->
  ``{"scores": [{id, value, status, steps, breakdown, reason, usage, details}, ...], "reward",
  "latency_s"}``: one score per sample, in order, each with its sample's id.
- ``POST /get_reward``: OpenRLHF's remote reward protocol (``--remote_rm_url``), see
  `rewardlab.integrations.openrlhf`.
- ``GET /health``: the process answers (liveness). ``GET /ready``: the reward is built and warm
  (503 until then). ``GET /metrics``: Prometheus text (`metrics.ServerMetrics`).

What a request can get instead of scores, checked in this order: 401 without the bearer token or
with a wrong one; 413 for a body over ``max_body_bytes`` (by its Content-Length, before anything
else is done with it, else as it arrives); 503 with ``Retry-After`` when the bodies still
arriving or waiting to be parsed hold ``max_reading_bytes`` (counted as they arrive); 408 for a
body that has not arrived whole within ``body_timeout_s`` (the connection is then closed); 503
with ``Retry-After`` when ``max_concurrency + queue`` requests are already in the server; 413 for
more than ``max_batch_size`` samples or a sample whose ``fields`` hold more than
``max_field_values`` values (counted before any sample is checked); 503 with ``Retry-After`` for a
body not parsed by the deadline; 422 for malformed JSON or fields, naming the sample index and
field.
Errors are ``{"detail": "<reason>"}``. A client that goes away before its body has arrived is
counted under code 499 (nginx's "client closed request") and not logged: a traceback per
connection would let any client fill the log.

A request takes no place in the server until its body has arrived (`limits.Admission`), so that
slow clients hold nothing but their bytes; a body's bytes count against ``max_reading_bytes``
from its first byte until it is parsed, so that bodies waiting for a parser cannot pile up
either. Large bodies are parsed in worker processes, smallest first, within the request's
deadline (`parsing`), so that no body holds the event loop that answers ``/health``, 503s and
deadlines, and none holds a small request past its deadline; a body not parsed by its deadline
is answered 503 with ``Retry-After``. No OpenAPI document or docs pages are served: the API is
the one described here, and the scoring endpoints are the only ones behind the token.

Failures while scoring are scores, not HTTP errors: a request past its deadline is answered 200
with every sample's status ``timeout`` (the per-sample statuses tell a trainer exactly which
scores are missing, the same as any other failure, where a 504 would lose the batch's shape), and
a reward that raises gives every sample of its batch status ``error``; the server goes on serving.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at runtime,
# and ``fastapi.Request`` there names a local import.
import asyncio
import contextlib
import functools
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from rewardlab.errors import RequestError
from rewardlab.integrations.openrlhf import get_reward_record, read_get_reward_request
from rewardlab.optional import require
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.serving.limits import Admission, ReadingBudget, ServeOptions
from rewardlab.serving.metrics import ServerMetrics
from rewardlab.serving.parsing import BodyParsers, Reader, parse_memory_limit
from rewardlab.serving.scoring import WARMUP_SAMPLE, ScoringThread, Warmup, score_within
from rewardlab.serving.wire import (
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


#: Refusals of a body that has not been read to its end: the connection cannot be reused (the
#: rest of the body would be read as the next request), so uvicorn is told to close it.
_CLOSE = {"Connection": "close"}
#: The status a request gets when its client went away before its body arrived (never seen by
#: the client; counted in the metrics).
CLIENT_GONE = 499

Answer = Callable[[Sequence[Sample], list[Score], float], dict[str, Any]]


class RewardService:
    """Everything one server holds: the reward, its scoring thread, admission and metrics."""

    def __init__(self, reward: Reward, options: ServeOptions):
        self.reward = reward
        self.options = options
        self.admission = Admission(options.max_concurrency, options.queue)
        self.reading = ReadingBudget(options.max_reading_bytes)
        self.parsers = BodyParsers(parse_memory_limit(options.max_body_bytes))
        self.scorer = ScoringThread(reward)
        self.metrics = ServerMetrics(reward.name)
        self.warmup: Warmup | None = None
        self.metrics.watch(
            scoring=lambda: self.admission.scoring,
            waiting=lambda: self.admission.waiting,
            reading=lambda: self.reading.requests,
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
            # Header values arrive as bytes, which Starlette decodes as latin-1; encoded back, they
            # are the bytes the client sent - UTF-8 for a token outside latin-1 (aiohttp, curl).
            if not hmac.compare_digest(given.strip().encode("latin-1"), token.encode()):
                return 401, "wrong bearer token"
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.options.max_body_bytes:
            return 413, f"request body of {length} bytes exceeds max_body_bytes {self.options.max_body_bytes}"
        return None

    async def read_body(self, request: Any) -> bytes:
        """The whole body: within ``body_timeout_s`` (408), no further than ``max_body_bytes``
        (413), and within what the reading budget has left (503); a client that goes away first
        gets `CLIENT_GONE`. Bytes are counted against the budget as they arrive, never by the
        Content-Length a client declares: declared, a few headers would hold the whole budget.
        A body returned still holds its bytes in the budget, until the caller gives them back
        (once it is parsed)."""
        from starlette.requests import ClientDisconnect

        options, budget = self.options, self.reading
        budget.requests += 1
        body = bytearray()
        try:
            async with asyncio.timeout(options.body_timeout_s):
                async for chunk in request.stream():
                    if len(body) + len(chunk) > options.max_body_bytes:
                        raise RequestError(
                            413, f"request body exceeds max_body_bytes {options.max_body_bytes}"
                        )
                    if not budget.take(len(chunk)):
                        held = f"{budget.held} bytes of bodies are being read or parsed"
                        raise RequestError(503, f"server busy: {held}; retry later")
                    body += chunk
        except BaseException as error:
            budget.give(len(body))
            if isinstance(error, TimeoutError):
                raise RequestError(
                    408, f"the body did not arrive whole within body_timeout_s {options.body_timeout_s:g}"
                ) from None
            if isinstance(error, ClientDisconnect):
                raise RequestError(CLIENT_GONE, "the client went away before its body arrived") from None
            raise
        finally:
            budget.requests -= 1
        return bytes(body)

    async def serve_batch(self, request: Any, endpoint: str, read: Reader, answer: Answer) -> Any:
        """Answer a scoring request: refusals and limits first, then scores (module docstring)."""
        from fastapi.responses import Response

        arrived = time.monotonic()
        refusal = self.refusal(request.headers)
        if refusal is not None:
            status, message = refusal
            return _error(status, message, {"WWW-Authenticate": "Bearer"} if status == 401 else None)
        try:
            body = await self.read_body(request)
        except RequestError as error:
            retry = {"Retry-After": self.options.retry_after_header} if error.status == 503 else {}
            return _error(error.status, str(error), {**retry, **_CLOSE})
        size = len(body)

        def parsed() -> None:
            self.reading.give(size)

        place = self.admission.admit()
        if place is None:
            parsed()
            return _error(
                503,
                f"server busy: {self.admission.capacity} requests already in it; retry later",
                {"Retry-After": self.options.retry_after_header},
            )
        deadline = arrived + self.options.deadline_s
        try:
            samples = await self.parsers.parse(read, body, deadline, self.options.deadline_s, parsed)
        except RequestError as error:
            place.release()
            later = {"Retry-After": self.options.retry_after_header} if error.status == 503 else None
            return _error(error.status, str(error), later)
        except BaseException:
            place.release()
            raise
        del body
        scores = await score_within(self.scorer, self.admission, place, samples, deadline)
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
            await asyncio.to_thread(service.parsers.close)
            await asyncio.to_thread(service.scorer.stop)
            if close_reward:
                await asyncio.to_thread(reward.close)

    app = fastapi.FastAPI(
        title="rewardlab serve", openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan
    )
    app.state.service = service

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        started = time.monotonic()
        response = await call_next(request)
        service.metrics.request(request.url.path, response.status_code, time.monotonic() - started)
        return response

    def score_answer(samples: Sequence[Sample], scores: list[Score], latency_s: float) -> dict[str, Any]:
        return {
            "scores": [
                score_record(score, sample.id, service.options.max_text_chars)
                for sample, score in zip(samples, scores, strict=True)
            ],
            "reward": reward.name,
            "latency_s": latency_s,
        }

    def get_reward_answer(samples: Sequence[Sample], scores: list[Score], latency_s: float) -> dict[str, Any]:
        options = service.options
        return get_reward_record(reward.name, scores, options.failure_value, options.max_text_chars)

    options = service.options
    # Partials of module functions: the parsing workers receive them pickled.
    read_score: Reader = functools.partial(
        read_score_request, max_samples=options.max_batch_size, max_field_values=options.max_field_values
    )
    read_get_reward: Reader = functools.partial(read_get_reward_request, max_samples=options.max_batch_size)

    @app.post("/score")
    async def score(request: Request) -> Any:
        return await service.serve_batch(request, "/score", read_score, score_answer)

    @app.post("/get_reward")
    async def get_reward(request: Request) -> Any:
        return await service.serve_batch(request, "/get_reward", read_get_reward, get_reward_answer)

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
