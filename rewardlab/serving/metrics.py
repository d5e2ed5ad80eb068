"""Prometheus metrics of one reward server, on a registry of its own.

A registry per app (not prometheus-client's global one) lets several servers live in one process
- tests, or a process serving two rewards - without their metrics clashing.

Exported (all prefixed ``rewardlab_``):

- ``requests_total{endpoint, code}``: requests answered, by HTTP status.
- ``request_seconds{endpoint}``: request latency histogram.
- ``samples_total{reward, endpoint, status}``: samples scored, by score status.
- ``get_reward_substituted_total{reward, status}``: samples without a value that ``/get_reward``
  answered with the failure value.
- ``batches_scoring``, ``requests_waiting``, ``requests_reading``: batches scoring now, requests
  admitted and waiting (being parsed, or queued for a scoring slot), and requests whose bodies
  are still arriving.
- ``ready``: 1 once the reward is warm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from rewardlab.optional import require
from rewardlab.rewards.contract import Score

#: Endpoints get their own label value; any other path is counted as "other", so that scanners
#: probing random paths cannot blow up the label set.
ENDPOINTS = ("/score", "/get_reward", "/health", "/ready", "/metrics")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServerMetrics:
    """The metrics of one server for the reward ``reward``."""

    def __init__(self, reward: str):
        prometheus = require("prometheus_client", "rewardlab serve")
        self.reward = reward
        self.registry = prometheus.CollectorRegistry()
        self._requests = prometheus.Counter(
            "rewardlab_requests", "Requests answered, by endpoint and HTTP status.",
            ["endpoint", "code"], registry=self.registry,
        )  # fmt: skip
        self._latency = prometheus.Histogram(
            "rewardlab_request_seconds", "Request latency, from arrival to answer.",
            ["endpoint"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self._samples = prometheus.Counter(
            "rewardlab_samples", "Samples scored, by reward, endpoint and score status.",
            ["reward", "endpoint", "status"], registry=self.registry,
        )  # fmt: skip
        self._substituted = prometheus.Counter(
            "rewardlab_get_reward_substituted",
            "Samples without a value that /get_reward answered with the failure value.",
            ["reward", "status"], registry=self.registry,
        )  # fmt: skip
        self._scoring = prometheus.Gauge(
            "rewardlab_batches_scoring", "Batches scoring now.", registry=self.registry
        )
        self._waiting = prometheus.Gauge(
            "rewardlab_requests_waiting",
            "Requests admitted that are not scoring: being parsed or queued for a slot.",
            registry=self.registry,
        )
        self._reading = prometheus.Gauge(
            "rewardlab_requests_reading",
            "Requests whose bodies are still arriving (not yet admitted).",
            registry=self.registry,
        )
        self._ready = prometheus.Gauge(
            "rewardlab_ready", "1 once the reward is warm.", registry=self.registry
        )
        self.content_type: str = prometheus.CONTENT_TYPE_LATEST
        self._render = prometheus.generate_latest

    def watch(
        self,
        scoring: Callable[[], float],
        waiting: Callable[[], float],
        reading: Callable[[], float],
        ready: Callable[[], bool],
    ) -> None:
        """Read the gauges from these functions at each scrape."""
        self._scoring.set_function(scoring)
        self._waiting.set_function(waiting)
        self._reading.set_function(reading)
        self._ready.set_function(lambda: float(ready()))

    def request(self, path: str, code: int, seconds: float) -> None:
        endpoint = path if path in ENDPOINTS else "other"
        self._requests.labels(endpoint, str(code)).inc()
        self._latency.labels(endpoint).observe(seconds)

    def scores(self, endpoint: str, scores: Sequence[Score]) -> None:
        for status, count in Counter(score.status.value for score in scores).items():
            self._samples.labels(self.reward, endpoint, status).inc(count)

    def substituted(self, scores: Sequence[Score]) -> None:
        for status, count in Counter(s.status.value for s in scores if not s.ok).items():
            self._substituted.labels(self.reward, status).inc(count)

    def render(self) -> bytes:
        return self._render(self.registry)
