"""Load test of ``rewardlab serve`` on loopback: N concurrent clients for a fixed time, against a
rule reward and against a judge reward backed by the local model server.

The reward server runs as ``rewardlab serve`` in a subprocess; the judge's model is ``rewardlab
serve-model`` on the embedded SmolLM2-135M (on the CPU, so that part is short). Each client
sends one request at a time, every sample with an id never used before, and backs off on 503 as
the server's ``Retry-After`` asks. Printed per reward: requests and samples per second, p50 /
p99 latency of answered requests, 503s, and the bookkeeping that must come out zero - requests
with no answer (lost), ids answered twice (duplicated), answers whose ids differ from the
request's, and any difference between the 200s the clients counted and the 200s the server's
metrics counted.

With ``--stalled N``, N more connections send their headers and the start of a body, then
nothing, for the whole run (slow-loris clients), each reopened when the server closes it: the
other clients must be served as if they were not there.

Run:  python perf/serve_load.py [--clients 16] [--seconds 20] [--samples 8] [--stalled 0]
          [--judge-clients 4] [--judge-seconds 10] [--judge-samples 2] [--no-judge]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SERVE = [sys.executable, "-m", "rewardlab.cli", "serve"]


def start(command: list[str], timeout_s: float) -> tuple[subprocess.Popen, str]:
    """Start a server process; returns it and the address it printed (``... at http://...``)."""
    # A file, not a pipe: a pipe nobody reads could fill up and block the server.
    errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - open as long as the process runs
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 1.0)[0]:
            line = process.stdout.readline()
            if " at http" in line:
                return process, line.rsplit(" at ", 1)[1].split()[0]
    process.kill()
    errors.seek(0)
    raise RuntimeError(f"{' '.join(command[:4])} did not start: {errors.read()[-2000:]}")


def serve_reward(config: dict, path: Path, *options: str) -> tuple[subprocess.Popen, str]:
    """``rewardlab serve`` for ``config`` (written to ``path``) on a free port."""
    path.write_text(json.dumps(config))  # JSON is YAML
    return start([*SERVE, "--config", str(path), "--port", "0", *options], 120)


@dataclass(frozen=True)
class Load:
    """One load run: ``clients`` clients for ``seconds`` against the server at ``url``, each request
    carrying ``samples`` samples made by ``make_sample(id)``."""

    reward: str
    url: str
    make_sample: Callable[[str], dict]
    clients: int
    seconds: float
    samples: int
    stalled: int = 0


@dataclass
class Tally:
    """What the clients saw."""

    latencies: list[float] = field(default_factory=list)
    answered: int = 0
    busy: int = 0
    lost: int = 0
    wrong_ids: int = 0
    samples: int = 0
    statuses: Counter = field(default_factory=Counter)
    ids_seen: Counter = field(default_factory=Counter)


async def client(number: int, spec: Load, until: float, tally: Tally) -> None:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=1)) as session:
        request = 0
        while time.monotonic() < until:
            request += 1
            ids = [f"c{number}-r{request}-s{i}" for i in range(spec.samples)]
            body = {"samples": [spec.make_sample(sample_id) for sample_id in ids]}
            started = time.monotonic()
            try:
                async with session.post(f"{spec.url}/score", json=body) as reply:
                    payload = await reply.read()
                    status, retry_after = reply.status, reply.headers.get("Retry-After")
            except (aiohttp.ClientError, TimeoutError):
                tally.lost += 1
                continue
            if status == 503:
                tally.busy += 1
                await asyncio.sleep(float(retry_after or 1))
                continue
            if status != 200:
                tally.lost += 1
                continue
            tally.latencies.append(time.monotonic() - started)
            tally.answered += 1
            scores = json.loads(payload)["scores"]
            answered_ids = [score["id"] for score in scores]
            tally.wrong_ids += answered_ids != ids
            tally.ids_seen.update(answered_ids)
            tally.statuses.update(score["status"] for score in scores)
            tally.samples += len(scores)


def stall(url: str, until: float, opened: list[float]) -> None:
    """Keep one connection that sent its headers and the start of a body, and nothing more, open
    until ``until``; reopen it whenever the server closes it (its body timeout). Each opening is
    recorded in ``opened``."""
    parts = urllib.parse.urlsplit(url)
    head = "POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += "Content-Length: 100000\r\n\r\n"
    while time.monotonic() < until:
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as connection:
            connection.sendall(head.encode() + b'{"samples": [')
            opened.append(time.monotonic())
            connection.settimeout(max(0.1, until - time.monotonic()))
            try:
                while connection.recv(4096):
                    pass
            except TimeoutError:
                return
            except OSError:
                continue  # closed by the server: open another


def server_count(url: str, code: str) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "rewardlab_requests_total" and labels == {"endpoint": "/score", "code": code}:
                return sample.value
    return 0.0


def wait_ready(url: str, timeout_s: float) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=30):
                return
        except urllib.error.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout_s:g} s")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def load(spec: Load) -> dict:
    wait_ready(spec.url, timeout_s=300)
    tally = Tally()
    started = time.monotonic()

    until = time.monotonic() + spec.seconds
    opened: list[float] = []
    stallers = [threading.Thread(target=stall, args=(spec.url, until, opened)) for _ in range(spec.stalled)]
    for staller in stallers:
        staller.start()

    async def run() -> None:
        await asyncio.gather(*(client(n, spec, until, tally) for n in range(spec.clients)))

    asyncio.run(run())
    for staller in stallers:
        staller.join()
    elapsed = time.monotonic() - started
    duplicated = sum(count - 1 for count in tally.ids_seen.values() if count > 1)
    return {
        "reward": spec.reward,
        "clients": spec.clients,
        "stalled": f"{spec.stalled} ({len(opened)} opened)",
        "seconds": round(elapsed, 1),
        "requests": tally.answered,
        "req_per_s": round(tally.answered / elapsed, 1),
        "samples_per_s": round(tally.samples / elapsed, 1),
        "p50_ms": round(1000 * percentile(tally.latencies, 0.50), 1),
        "p99_ms": round(1000 * percentile(tally.latencies, 0.99), 1),
        "503s": tally.busy,
        "lost": tally.lost,
        "duplicated_ids": duplicated,
        "wrong_ids": tally.wrong_ids,
        "server_200s_minus_client_200s": server_count(spec.url, "200") - tally.answered,
        "statuses": dict(tally.statuses),
    }


def math_sample(sample_id: str) -> dict:
    number = sum(map(ord, sample_id)) % 97
    return {
        "prompt": f"What is {number} + 1?",
        "completion": f"{number} + 1 = {number + 1}, so the answer is $\\boxed{{{number + 1}}}$.",
        "reference": str(number + 1),
        "id": sample_id,
    }


def judge_sample(sample_id: str) -> dict:
    # The id in the text makes every judge request new: no answer comes from the judge's cache.
    return {
        "prompt": "Name a primary colour.",
        "completion": f"Red. (answer {sample_id})",
        "id": sample_id,
    }


def judge_config(model_url: str) -> dict:
    backend = {"type": "http", "base_url": model_url, "model": "smollm2", "guided_choice": True}
    return {"type": "pointwise_judge", "scale": "yes_no", "backend": backend, "client": {"cache": None}}


def table(results: list[dict]) -> str:
    columns = [key for key in results[0] if key != "statuses"]
    rows = [columns, *([str(result[key]) for key in columns] for result in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    statuses = [f"{result['reward']}: statuses {result['statuses']}" for result in results]
    return "\n".join([*lines, *statuses])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--samples", type=int, default=8, help="samples per request (rule reward)")
    parser.add_argument(
        "--stalled", type=int, default=0, help="slow-loris connections held open during the rule run"
    )
    parser.add_argument("--body-timeout-s", type=float, default=60.0, help="the server's body timeout")
    parser.add_argument("--max-concurrency", type=int, default=4, help="the server's scoring slots")
    parser.add_argument("--queue", type=int, default=64, help="the server's queue")
    parser.add_argument("--judge-clients", type=int, default=4)
    parser.add_argument("--judge-seconds", type=float, default=10.0)
    parser.add_argument("--judge-samples", type=int, default=2, help="samples per request (judge)")
    parser.add_argument("--no-judge", action="store_true", help="skip the judge reward")
    args = parser.parse_args()
    limits = ["--max-concurrency", str(args.max_concurrency), "--queue", str(args.queue)]
    limits += ["--body-timeout-s", str(args.body_timeout_s)]
    results = []
    processes: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            rule, url = serve_reward({"type": "math_answer"}, Path(folder) / "rule.yaml", *limits)
            processes.append(rule)
            results.append(
                load(
                    Load(
                        "math_answer",
                        url,
                        math_sample,
                        args.clients,
                        args.seconds,
                        args.samples,
                        args.stalled,
                    )
                )
            )
            if not args.no_judge:
                model_command = ["serve-model", "--port", "0", "--name", "smollm2"]
                model, model_url = start([sys.executable, "-m", "rewardlab.cli", *model_command], 300)
                processes.append(model)
                judge, url = serve_reward(judge_config(model_url), Path(folder) / "judge.yaml", *limits)
                processes.append(judge)
                spec = Load(
                    "pointwise_judge",
                    url,
                    judge_sample,
                    args.judge_clients,
                    args.judge_seconds,
                    args.judge_samples,
                )
                results.append(load(spec))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    print(table(results))


if __name__ == "__main__":
    main()
