"""``rewardlab serve`` against clients that mean harm, over real sockets on loopback: bodies that
stall, bodies that are cheap to send and dear to parse, answers that would echo a huge request
back, tokens and labels that were mishandled, clients that vanish mid-body. Every wait is
bounded."""

import contextlib
import json
import logging
import socket
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from rewardlab import Reward, Sample, Score, Status, build
from rewardlab.serving.remote import RemoteReward
from tests.serving.conftest import Probe, metric, post, request


def _connect(url):
    parts = urllib.parse.urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def stalled_body(url, declared=10_000, sent=b'{"samples": [', path="/score"):
    """A connection that sends its headers and the start of its body, then nothing."""
    connection = _connect(url)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {declared}\r\n\r\n".encode() + sent)
    return connection


def status_line(connection, timeout_s):
    """The status code the server answered on ``connection`` within ``timeout_s`` (None if the
    connection was closed without an answer)."""
    connection.settimeout(timeout_s)
    data = b""
    while b"\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split()[1]) if data else None


def wait_until(condition, timeout_s=10.0, what="condition"):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} not met within {timeout_s} s"
        time.sleep(0.02)


# Finding 2: slow bodies.


def test_stalled_bodies_do_not_take_the_places_of_complete_requests(serve):
    """Before, a request held its place in the server from its headers on, so a few
    connections that stalled mid-body made every /score answer 503."""
    server = serve(Probe(), max_concurrency=1, queue=1)
    stalled = [stalled_body(server.url) for _ in range(4)]
    try:
        time.sleep(0.5)  # the server has their headers and is waiting for the rest
        for number in range(3):
            status, _, answer = post(
                server.url, "/score", {"samples": [{"completion": "abc", "id": str(number)}]}
            )
            assert status == 200 and answer["scores"][0]["value"] == 3.0
        assert server.service.admission.admitted == 0
        assert metric(server.url, "rewardlab_requests_reading") == 4.0
    finally:
        for connection in stalled:
            connection.close()


def test_a_body_that_stalls_is_answered_408_after_its_read_timeout(serve):
    server = serve(Probe(), body_timeout_s=0.5)
    started = time.monotonic()
    stalled = stalled_body(server.url)
    try:
        assert status_line(stalled, timeout_s=10) == 408
    finally:
        stalled.close()
    assert time.monotonic() - started < 5
    # A body trickled a byte at a time is held to the same total time, not to a time per chunk.
    trickle = stalled_body(server.url, declared=1000, sent=b"")
    try:
        started = time.monotonic()
        answered = None
        while time.monotonic() - started < 5 and answered is None:
            try:
                trickle.sendall(b" ")
            except OSError:
                break
            trickle.settimeout(0.1)
            with contextlib.suppress(TimeoutError):
                answered = trickle.recv(4096)
        assert answered is not None and answered.split()[1] == b"408"
        assert time.monotonic() - started < 3
    finally:
        trickle.close()
    assert post(server.url, "/score", {"samples": [{"completion": "ok"}]})[0] == 200
    assert metric(server.url, "rewardlab_requests_total", endpoint="/score", code="408") == 2.0


def test_bodies_being_read_have_a_memory_budget(serve):
    """What bodies may hold while they arrive is capped, counted in bytes that arrived (a declared
    Content-Length costs nothing until its bytes come); past it a request is turned away with 503
    at once instead of growing the server's memory without bound."""
    server = serve(Probe(), max_body_bytes=10_000, max_reading_bytes=12_000)
    declaring = [stalled_body(server.url, declared=10_000, sent=b"") for _ in range(3)]
    holding = stalled_body(server.url, declared=10_000, sent=b"x" * 9_000)
    try:
        wait_until(lambda: server.service.reading.held == 9_000, what="9,000 bytes held")
        started = time.monotonic()
        status, headers, answer = post(
            server.url, "/score", b"x" * 5_000, **{"content-type": "application/json"}
        )
        assert time.monotonic() - started < 2
        assert status == 503 and "retry-after" in headers and "being read" in answer["detail"]
        # A small complete request still fits.
        assert post(server.url, "/score", {"samples": [{"completion": "ok"}]})[0] == 200
    finally:
        for connection in [*declaring, holding]:
            connection.close()


# Finding 4: parsing on the event loop, the batch cap after parsing, echoed answers.


def test_a_batch_far_over_the_cap_is_refused_early_and_health_keeps_answering(serve):
    """A 3 MB body of a million ``{}`` samples used to be parsed into a million sample models
    on the event loop (9 s on a loaded machine, /health blocked throughout) before the cap
    refused it."""
    server = serve(Probe())
    body = b'{"samples": [' + b",".join([b"{}"] * 1_000_000) + b"]}"
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        answer = pool.submit(post, server.url, "/score", body, **{"content-type": "application/json"})
        health = []
        while not answer.done():
            asked = time.monotonic()
            assert request(f"{server.url}/health")[0] == 200
            health.append(time.monotonic() - asked)
            time.sleep(0.02)
        status, _, refused = answer.result()
    assert status == 413 and "exceeds max_batch_size 1024" in refused["detail"]
    assert time.monotonic() - started < 3
    assert max(health, default=0.0) < 0.5, health


class Echo(Reward):
    """Echoes the completion in its reason and details, as rewards that quote what they read do."""

    name = "echo"

    async def ascore(self, samples):
        return [
            Score(
                value=1.0,
                reason=f"read {s.completion_text!r}",
                details={
                    "extracted": s.completion_text,
                    "parts": [s.completion_text, {"again": s.completion_text}],
                },
            )
            for s in samples
        ]


def test_an_answer_does_not_echo_a_huge_request_back(serve):
    """Before, a reward quoting the completion three times made a 30.8 MB request a 92 MB answer."""
    server = serve(Echo(), max_text_chars=1000)
    completion = "x" * 200_000
    samples = [{"completion": completion, "id": "big"}, {"completion": "short", "id": "small"}]
    status, _, answer = post(server.url, "/score", {"samples": samples})
    assert status == 200
    big, small = answer["scores"]
    assert big["value"] == 1.0 and big["id"] == "big"
    assert len(json.dumps(answer)) < 10_000
    assert big["reason"].startswith("read 'xxx") and "199007 more characters clipped" in big["reason"]
    assert "more characters clipped" in big["details"]["parts"][1]["again"]
    assert small["details"] == {"extracted": "short", "parts": ["short", {"again": "short"}]}
    body = {"query": ["Q:" + completion], "prompts": ["Q:"]}
    status, _, answer = post(server.url, "/get_reward", body)
    assert status == 200 and len(json.dumps(answer)) < 5_000


# Finding 9: labels, tokens, the OpenAPI document, clients that vanish.


def test_numeric_labels_stay_the_numbers_they_are_and_non_finite_ones_are_refused(serve):
    reward = build({"type": "string_match", "execution": "inline"})
    server = serve(reward)
    body = {"query": ["Q:1", "Q:0.5", "Q:12"], "prompts": ["Q:", "Q:", "Q:"], "labels": [1.0, 0.5, 12]}
    status, _, answer = post(server.url, "/get_reward", body)
    assert status == 200 and answer["rewards"] == [1.0, 1.0, 1.0], answer
    for bad in ("NaN", "Infinity", "-Infinity"):
        raw = b'{"query": ["Q:1"], "prompts": ["Q:"], "labels": [' + bad.encode() + b"]}"
        status, _, answer = post(server.url, "/get_reward", raw, **{"content-type": "application/json"})
        assert status == 422 and "labels[0]" in answer["detail"] and "finite" in answer["detail"], answer


def test_a_token_outside_latin_1_is_accepted_from_remote_reward(serve):
    token = "clé-🔑-τ"
    server = serve(Probe(), token=token)
    [score] = RemoteReward(server.url, token=token, retries=0).score([Sample(completion="abc")])
    assert (score.status, score.value) == (Status.OK, 3.0), score.reason
    [refused] = RemoteReward(server.url, token="clé-🔑-x", retries=0).score([Sample(completion="abc")])
    assert "HTTP 401: wrong bearer token" in refused.reason


def test_the_api_document_is_not_served(serve):
    server = serve(Probe(), token="s3cret")
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert request(f"{server.url}{path}")[0] == 404


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_a_client_that_vanishes_mid_body_leaves_no_traceback(serve):
    """Before, each such connection wrote a full traceback to the log ("Exception in ASGI
    application", on uvicorn's error logger): any client could fill it."""
    server = serve(Probe())
    records = _Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "rewardlab")]
    for logger in loggers:
        logger.addHandler(records)
    try:
        for _ in range(3):
            stalled_body(server.url, sent=b'{"samples": [{"completion": "ab').close()
        wait_until(
            lambda: (
                records.records
                or metric(server.url, "rewardlab_requests_total", endpoint="/score", code="499") == 3
            ),
            what="3 vanished clients counted (or logged)",
        )
    finally:
        for logger in loggers:
            logger.removeHandler(records)
    assert not [record.getMessage() for record in records.records]
    assert metric(server.url, "rewardlab_requests_reading") == 0.0
    assert post(server.url, "/score", {"samples": [{"completion": "ok"}]})[0] == 200


def test_a_lone_surrogate_fails_its_sample_not_the_request(serve):
    """A lone surrogate is no text JSON can carry to the server (it refuses the escape): the
    sample fails alone before it is sent, and the rest of its batch is scored."""
    server = serve(Probe())
    samples = [Sample(completion="a\ud800b", id="bad"), Sample(completion="fine", id="ok")]
    bad, ok = RemoteReward(server.url, retries=0).score(samples)
    assert bad.status is Status.INVALID_INPUT and "sample 'bad'" in bad.reason and "surrogate" in bad.reason
    assert (ok.status, ok.value) == (Status.OK, 4.0)


# Finding 3: work that holds the GIL.


def test_a_backtracking_schema_pattern_from_the_request_costs_nothing(serve):
    """A sample's own schema with ``pattern: ^(a+)+$`` against 40 a's and a '!' froze the server
    for as long as Python's re ran; in a rule worker it costs the sample's budget and its status
    is ``timeout``. Matched by RE2, it is answered at once and scored."""
    reward = build({"type": "json_schema"})
    server = serve(reward)
    schema = {"type": "string", "pattern": "^(a+)+$"}
    samples = [
        {"completion": json.dumps("a" * 40 + "!"), "fields": {"schema": schema}, "id": "evil"},
        {"completion": json.dumps("aaa"), "fields": {"schema": schema}, "id": "fine"},
    ]
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        answer = pool.submit(post, server.url, "/score", {"samples": samples})
        health = []
        while not answer.done():
            asked = time.monotonic()
            assert request(f"{server.url}/health")[0] == 200
            health.append(time.monotonic() - asked)
            time.sleep(0.02)
        status, _, scored = answer.result()
    assert status == 200 and time.monotonic() - started < 3
    assert [(s["id"], s["status"], s["value"]) for s in scored["scores"]] == [
        ("evil", "ok", 0.0),
        ("fine", "ok", 1.0),
    ]
    assert max(health, default=0.0) < 0.5, health
    reward.close()
