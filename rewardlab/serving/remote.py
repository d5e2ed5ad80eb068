"""`RemoteReward`: a reward served by ``rewardlab serve`` elsewhere, used like any local one -
including through the TRL adapter: ``as_reward_func(RemoteReward("http://rm:8001"))``.

Why the failure rules below: the scorer is a shared server, and a trainer must not crash (nor
train on invented zeros) because it was busy for a moment. Connection errors, 429, 503 (which
``rewardlab serve`` sends when its queue is full, with ``Retry-After``) and other 5xx are retried
with backoff; a 4xx is the request's own fault and retrying cannot fix it. A request that still
fails gives each of its samples a failed `Score` with the reason (``timeout`` when the server
never answered in time, ``backend_error`` otherwise); nothing raises.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, ValidationError

from rewardlab.llm.openai_format import retry_after_seconds
from rewardlab.optional import require
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import RewardOptions, takes_options
from rewardlab.serving.wire import ScoreResponse, WireSample, describe, sample_record

TOKEN_ENV = "REWARDLAB_SERVE_TOKEN"


class _Failed(Exception):
    """One attempt failed; ``retryable`` says whether another may succeed."""

    def __init__(self, status: Status, reason: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(reason)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class RemoteOptions(RewardOptions):
    """Options of `RemoteReward`."""

    url: str
    """The server's address (``http://host:port``)."""
    token: str | None = None
    """Bearer token for a server started with one; by default the ``REWARDLAB_SERVE_TOKEN``
    environment variable, read at call time."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Time limit of one HTTP request (keep it above the server's deadline, which answers late
    batches with ``timeout`` statuses itself)."""
    retries: int = Field(default=4, ge=0)
    """Further attempts after the first, for connection errors, 429 and 5xx."""
    backoff_s: float = Field(default=0.5, ge=0)
    """The first retry waits up to this long, each later one up to twice as long (full jitter);
    a ``Retry-After`` from the server is waited instead, both capped at ``backoff_max_s``."""
    backoff_max_s: float = Field(default=30.0, ge=0)
    """Cap on one wait."""
    batch_size: int = Field(default=256, ge=1)
    """Most samples per request (keep it within the server's ``max_batch_size``)."""
    concurrency: int = Field(default=4, ge=1)
    """Requests in flight at once for one `ascore` call."""


@takes_options(RemoteOptions)
class RemoteReward(Reward):
    """Scores samples by POSTing them to a ``rewardlab serve`` server's ``/score``.

    Options: `RemoteOptions` (the server's address and token, time limits, retries, batching).

    Example:
        >>> reward = RemoteReward("http://127.0.0.1:8001", name="accuracy")  # doctest: +SKIP
        >>> reward.score([Sample(prompt="1+1?", completion="\\\\boxed{2}", reference="2")])  # doctest: +SKIP
    """

    name = "remote"
    io_bound = True

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        batch_size: int = 256,
        concurrency: int = 4,
        name: str | None = None,
    ):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.batch_size = batch_size
        self.concurrency = concurrency
        if name is not None:
            self.name = name

    def __repr__(self) -> str:
        return f"RemoteReward({self.url!r}, name={self.name!r})"

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        """Scores from the server; a sample that cannot be sent (its prompt or completion is not
        text or chat messages) fails alone, as it would in process, instead of the server
        refusing its whole request."""
        scores: list[Score | None] = [_unsendable(sample, index) for index, sample in enumerate(samples)]
        sendable = [index for index, score in enumerate(scores) if score is None]
        for index, score in zip(sendable, await self._score_all([samples[i] for i in sendable]), strict=True):
            scores[index] = score
        return scores  # type: ignore[return-value]  # every place is filled by now

    async def _score_all(self, samples: Sequence[Sample]) -> list[Score]:
        if not samples:
            return []
        aiohttp = require("aiohttp", "RemoteReward")
        chunks = [samples[i : i + self.batch_size] for i in range(0, len(samples), self.batch_size)]
        semaphore = asyncio.Semaphore(self.concurrency)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, headers=self._headers()) as session:

            async def one(chunk: Sequence[Sample]) -> list[Score]:
                async with semaphore:
                    return await self._score_chunk(session, chunk)

            scored = await asyncio.gather(*(one(chunk) for chunk in chunks))
        return [score for chunk in scored for score in chunk]

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        token = self.token if self.token is not None else os.environ.get(TOKEN_ENV)
        if token:
            headers["authorization"] = f"Bearer {token}"
        return headers

    async def _score_chunk(self, session: Any, samples: Sequence[Sample]) -> list[Score]:
        body = json.dumps({"samples": [sample_record(s) for s in samples]}, default=str)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._post(session, body, samples)
            except _Failed as failure:
                if not failure.retryable or attempt > self.retries:
                    tries = f" after {attempt} attempts" if attempt > 1 else ""
                    reason = f"{self.url}/score{tries}: {failure}"
                    return [Score.failure(failure.status, reason) for _ in samples]
                await asyncio.sleep(self._delay(attempt, failure.retry_after))

    async def _post(self, session: Any, body: str, samples: Sequence[Sample]) -> list[Score]:
        aiohttp = require("aiohttp", "RemoteReward")
        try:
            async with session.post(f"{self.url}/score", data=body) as reply:
                payload = await reply.read()
                status, headers = reply.status, reply.headers
        except TimeoutError:
            raise _Failed(Status.TIMEOUT, f"no answer within {self.timeout_s:g} s", retryable=True) from None
        except aiohttp.ClientError as error:
            raise _Failed(Status.BACKEND_ERROR, f"connection failed: {error}", retryable=True) from None
        if status != 200:
            raise _Failed(
                Status.BACKEND_ERROR,
                f"HTTP {status}: {_detail(payload)}",
                retryable=status == 429 or status >= 500,
                retry_after=retry_after_seconds(dict(headers)),
            )
        return _read_scores(payload, samples)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        return random.uniform(0.0, min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))


def _read_scores(payload: bytes, samples: Sequence[Sample]) -> list[Score]:
    """The scores of a 200 answer, checked against what was sent: one per sample, same ids."""
    try:
        response = ScoreResponse.model_validate(json.loads(payload))
    except (ValueError, ValidationError) as error:  # JSONDecodeError is a ValueError
        raise _Failed(Status.BACKEND_ERROR, f"malformed answer: {error}", retryable=True) from None
    if len(response.scores) != len(samples):
        raise _Failed(
            Status.BACKEND_ERROR,
            f"{len(response.scores)} scores for {len(samples)} samples",
            retryable=False,
        )
    for index, (sample, score) in enumerate(zip(samples, response.scores, strict=True)):
        if score.id != sample.id:
            raise _Failed(
                Status.BACKEND_ERROR,
                f"score {index} is for id {score.id!r}, sent {sample.id!r}",
                retryable=False,
            )
    try:
        return [score.to_score() for score in response.scores]
    except ValueError as error:  # a value that breaks the Score contract
        raise _Failed(Status.BACKEND_ERROR, f"malformed score: {error}", retryable=False) from None


def _detail(payload: bytes) -> str:
    """The server's ``{"detail": ...}`` reason, or the start of whatever came back."""
    try:
        return str(json.loads(payload)["detail"])
    except (ValueError, KeyError, TypeError):
        return payload[:200].decode(errors="replace")


def _unsendable(sample: Sample, index: int) -> Score | None:
    """Status ``invalid_input`` naming the field, for a sample the server would refuse (checked
    with the server's own model of a sample, and for lone surrogates, which Python's json writes
    as ``\\ud800`` escapes that the server's JSON reader refuses - with the whole request); None
    when it can be sent."""
    for name in ("prompt", "completion"):
        value = getattr(sample, name)
        if isinstance(value, str):
            continue
        if not isinstance(value, Sequence) or not all(isinstance(message, Mapping) for message in value):
            return Score.failure(
                Status.INVALID_INPUT,
                f"{sample.label(index)}: {name}: must be text or a list of chat messages, "
                f"got {type(value).__name__}",
            )
    record = sample_record(sample)
    for name, value in record.items():
        try:
            json.dumps(value, ensure_ascii=False, default=str).encode()
        except UnicodeEncodeError as error:
            return Score.failure(
                Status.INVALID_INPUT,
                f"{sample.label(index)}: {name}: holds a lone surrogate "
                f"(U+{ord(error.object[error.start]):04X}), which is not text",
            )
    try:
        WireSample.model_validate(record)
    except ValidationError as error:
        return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {describe(error)}")
    return None
