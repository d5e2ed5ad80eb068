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


def health_times_while_pending(server, answer):
    """How long each ``/health`` asked while ``answer`` (a future) is pending took; each is 200."""
    health = []
    while not answer.done():
        asked = time.monotonic()
        assert request(f"{server.url}/health")[0] == 200
        health.append(time.monotonic() - asked)
        time.sleep(0.02)
    return health


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
        health = health_times_while_pending(server, answer)
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
        health = health_times_while_pending(server, answer)
        status, _, scored = answer.result()
    assert status == 200 and time.monotonic() - started < 3
    assert [(s["id"], s["status"], s["value"]) for s in scored["scores"]] == [
        ("evil", "ok", 0.0),
        ("fine", "ok", 1.0),
    ]
    assert max(health, default=0.0) < 0.5, health
    reward.close()


# Red team 8, findings 2 and 3: bodies dear to parse, and parsing outside the deadline.

JSON = {"content-type": "application/json"}


def dear_body(count, field="a"):
    """A 1-sample ``/score`` body whose fields hold ``count`` empty objects: about 3 bytes each,
    and the dearest JSON there is to parse (each a dict)."""
    return (
        b'{"samples": [{"completion": "x", "id": "dear", "fields": {"'
        + field.encode()
        + b'": ['
        + (b",".join([b"{}"] * count))
        + b"]}}]}"
    )


def test_get_reward_counts_its_lists_before_it_checks_a_label(serve):
    """``labels`` was validated item by item (a Python call and a new str each) before ``query``
    was counted: 16 million labels took 3 s and 1.7 GB, then a 422."""
    server = serve(Probe())
    body = b'{"query": [], "prompts": [], "labels": [' + b",".join([b"0"] * 2_000_000) + b"]}"
    started = time.monotonic()
    status, _, answer = post(server.url, "/get_reward", body, **JSON)
    assert status == 413 and "labels has 2000000 items: more than max_batch_size 1024" in answer["detail"]
    assert time.monotonic() - started < 5
    query = {"query": ["Q:a"] * 1025, "prompts": ["Q:"] * 1025}
    assert post(server.url, "/get_reward", query)[0] == 413
    assert post(server.url, "/get_reward", {"query": ["Q:a"], "prompts": ["Q:"]})[0] == 200


def test_a_sample_with_too_many_field_values_is_refused_before_it_is_checked(serve):
    """One sample whose fields held 15 million numbers took 1.5 s to parse and was accepted."""
    server = serve(Probe(), max_field_values=1000)
    numbers = (
        b'{"samples": [{"completion": "x"}, {"fields": {"n": [' + b",".join([b"1"] * 2_000_000) + b"]}}]}"
    )
    status, _, answer = post(server.url, "/score", numbers, **JSON)
    assert (
        status == 413 and answer["detail"] == "samples[1].fields holds more than max_field_values 1000 values"
    )
    nested = {"samples": [{"fields": {"n": [[1, 2], {"a": list(range(500)), "b": list(range(500))}]}}]}
    assert post(server.url, "/score", nested)[0] == 413
    within = {"samples": [{"completion": "ab", "fields": {"n": [[1, 2], {"a": list(range(990))}]}}]}
    status, _, answer = post(server.url, "/score", within)
    assert status == 200 and answer["scores"][0]["value"] == 2.0


def test_a_body_counts_against_the_reading_budget_until_it_is_parsed(serve):
    """Once arrived, a body stopped counting against ``max_reading_bytes`` while it waited for a
    parser: dozens of 32 MB bodies could wait at once, each parsed to 50 times its size."""
    body = dear_body(1_500_000)
    server = serve(Probe(), max_field_values=10_000_000, max_reading_bytes=3 * len(body) + 1000)
    with ThreadPoolExecutor(3) as pool:
        answers = [pool.submit(post, server.url, "/score", body, **JSON) for _ in range(3)]
        wait_until(lambda: server.service.reading.held == 3 * len(body), what="three parsed bodies held")
        assert metric(server.url, "rewardlab_requests_reading") == 0.0  # none is still arriving
        status, _, refused = post(server.url, "/score", {"samples": [{"completion": "x" * 2000}]})
        assert status == 503 and "being read or parsed" in refused["detail"]
        assert [answer.result()[0] for answer in answers] == [200] * 3
    wait_until(lambda: server.service.reading.held == 0, what="every body given back")


def test_dear_bodies_do_not_hold_a_small_request_past_its_deadline(serve):
    """Bodies were parsed on two threads, first come first served and outside the deadline: six
    dear ones held an honest 1-sample request for 16 s with a 2 s deadline, and a parse held the GIL
    (and so the event loop) throughout. Small bodies are parsed at once, larger ones smallest
    first, in worker processes."""
    server = serve(Probe(), deadline_s=2.0, max_field_values=10_000_000)
    # Dear enough to go to the workers and keep both busy, cheap enough that a parse running when
    # the medium body arrives ends well within its deadline on a busy 2-core machine.
    dear = dear_body(400_000)
    medium = json.dumps({"samples": [{"completion": "y" * 100_000, "id": "medium"}]}).encode()
    with ThreadPoolExecutor(8) as pool:
        started = time.monotonic()
        heavy = [pool.submit(post, server.url, "/score", dear, **JSON) for _ in range(8)]
        wait_until(lambda: server.service.reading.held >= 4 * len(dear), what="dear bodies arrived")
        asked = time.monotonic()
        status, _, small = post(server.url, "/score", {"samples": [{"completion": "abc", "id": "honest"}]})
        assert (status, small["scores"][0]["value"]) == (200, 3.0)
        assert time.monotonic() - asked < 1.0
        # Larger than is parsed at once: it waits for a parse that is running, not for the queue.
        asked = time.monotonic()
        status, _, answer = post(server.url, "/score", medium, **JSON)
        assert (status, answer["scores"][0]["value"]) == (200, 100_000.0)
        assert time.monotonic() - asked < 2.0
        asked = time.monotonic()
        assert request(f"{server.url}/health")[0] == 200 and time.monotonic() - asked < 0.5
        results = [future.result() for future in heavy]
    # Each dear body is answered by its deadline: scored, or 503 if it could not be parsed in time.
    assert time.monotonic() - started < 2.0 + 2.0
    assert {status for status, _, _ in results} <= {200, 503}
    wait_until(lambda: server.service.reading.held == 0, what="every body given back")


def test_a_body_not_parsed_by_its_deadline_is_answered_503_at_the_deadline(serve):
    """The deadline bound only scoring: a body parsed for longer than it was scored after it,
    and answered 200 with every sample timed out, long past the deadline. Now its parse is
    stopped at the deadline; unparsed, it has no samples to time out, so it gets 503."""
    server = serve(Probe(), deadline_s=0.2, max_field_values=10_000_000)
    started = time.monotonic()
    status, headers, answer = post(server.url, "/score", dear_body(2_000_000), **JSON)
    assert status == 503 and answer["detail"] == (
        "server busy: the body could not be parsed within deadline_s 0.2"
    )
    assert "retry-after" in headers and time.monotonic() - started < 0.2 + 1.5
    wait_until(lambda: server.service.reading.held == 0, what="the body given back")
    assert post(server.url, "/score", {"samples": [{"completion": "ok"}]})[0] == 200
