"""A real reward server on 127.0.0.1 (uvicorn in a background thread, a free port), plain HTTP
helpers, and `Probe`: a reward that does on request what the server must survive."""

import asyncio
import contextlib
import http.client
import json
import threading
import time
import urllib.parse

import pytest

from rewardlab import Reward, Score
from rewardlab.serving.limits import ServeOptions
from rewardlab.serving.serve import start_server


class Probe(Reward):
    """Value = length of the completion, unless the completion asks for trouble:

    - ``"boom"``: the whole batch raises;
    - ``"slow"``: sleeps ``slow_s`` (cancellable), recording a cancellation;
    - ``"gate"``: waits until ``gate`` is set (a batch that holds its scoring slot).

    With ``hold_warmup``, the warm-up probe waits on ``gate`` too.
    """

    name = "probe"

    def __init__(self, slow_s=5.0, hold_warmup=False):
        self.slow_s = slow_s
        self.hold_warmup = hold_warmup
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)
        self.cancelled = threading.Event()
        self.batches = []

    async def ascore(self, samples):
        completions = [s.completion_text for s in samples]
        self.batches.append([s.id for s in samples])
        if "boom" in completions:
            raise RuntimeError("asked to fail")
        if "gate" in completions or (self.hold_warmup and samples[0].id == "warm-up"):
            self.entered.release()
            await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, 30)
        if "slow" in completions:
            try:
                await asyncio.sleep(self.slow_s)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return [Score(value=float(len(c)), breakdown={"length": float(len(c))}) for c in completions]


def request(url, method="GET", body=None, headers=None, timeout=30):
    """``(status, headers, body)`` of one HTTP request; a dict body is sent as JSON, bytes as
    they are, an iterator of bytes chunked."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    headers = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    chunked = body is not None and not isinstance(body, bytes)
    try:
        # The server may answer (a 413 for a body over its cap) and close before the whole body
        # is sent; its answer is read below.
        with contextlib.suppress(BrokenPipeError):
            connection.request(method, parts.path, body=body, headers=headers, encode_chunked=chunked)
        reply = connection.getresponse()
        data = reply.read()
    finally:
        connection.close()
    content_type = reply.getheader("content-type", "")
    return reply.status, dict(reply.getheaders()), json.loads(data) if "json" in content_type else data


def post(url, path, body, **headers):
    return request(f"{url}{path}", "POST", body, headers)


def wait_ready(url, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if request(f"{url}/ready")[0] == 200:
            return
        time.sleep(0.02)
    raise AssertionError(f"{url} never became ready")


@pytest.fixture
def serve():
    """``serve(reward, ready=True, **options) -> RunningServer``, stopped after the test."""
    servers = []

    def start(reward, ready=True, **options):
        server = start_server(reward, options=ServeOptions(**options))
        servers.append(server)
        if ready:
            wait_ready(server.url)
        return server

    yield start
    for server in servers:
        server.stop()


def metric(url, name, **labels):
    """The value of one Prometheus sample on the server's ``/metrics`` (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = request(f"{url}/metrics")[2].decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0
