"""Judge throughput against a server of fixed latency, and the cost of a cache hit.

The server is `rewardlab.testing` in a separate process, answering every chat
completion after a fixed delay (200 ms by default). With concurrency C, N calls cannot finish
faster than the ideal (N / C) x latency; the target is within 1.2x of it.

Baselines, in the same process: the same N requests sent bare - through an aiohttp session, and
through ``openai.AsyncOpenAI`` - under an ``asyncio.Semaphore(C)``, with no prompt rendering,
cache, retries or verdict parsing, so the ratios show what the judge machinery adds over the
transport it uses. Then the judge again with a warm SQLite cache: every call a hit, timed per
sample.

Run:  python perf/judge_throughput.py [--calls 1000] [--concurrency 64] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rewardlab import Sample, build


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rewardlab.testing", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = process.stdout.readline().strip()
    return process, url


async def raw_aiohttp(url: str, calls: int, concurrency: int) -> float:
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> None:
            body = {
                "model": "scripted",
                "messages": [{"role": "user", "content": f"grade {i}"}],
                "max_tokens": 8,
            }
            async with semaphore, session.post(f"{url}/chat/completions", json=body) as reply:
                json.loads(await reply.read())

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return time.perf_counter() - started


async def raw_openai(url: str, calls: int, concurrency: int) -> float:
    import openai

    client = openai.AsyncOpenAI(
        base_url=url, api_key="x", max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with semaphore:
            await client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": f"grade {i}"}], max_tokens=8
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def samples(calls: int) -> list[Sample]:
    return [Sample(prompt=f"Question {i}?", completion=f"Answer {i}.", id=str(i)) for i in range(calls)]


def judge_run(kind: str, url: str, concurrency: int, cache: str | None, batch: list[Sample]) -> float:
    if kind == "litellm":
        backend = {"type": "litellm", "model": "openai/scripted", "api_base": url}
    else:
        backend = {"type": kind, "base_url": url, "model": "scripted"}
    judge = build(
        {
            "type": "pointwise_judge",
            "backend": backend,
            "client": {"max_concurrency": concurrency, "cache": cache},
        }
    )
    started = time.perf_counter()
    scores = judge.score(batch)
    elapsed = time.perf_counter() - started
    judge.close()
    failed = [s for s in scores if not s.ok]
    if failed:
        raise SystemExit(f"{len(failed)} judge calls failed, e.g. {failed[0].reason}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    process, url = start_server(args.latency)
    try:
        ideal = args.calls / args.concurrency * args.latency
        batch = samples(args.calls)
        print(
            f"{args.calls} calls, concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms"
        )
        print(f"ideal (N / C) x latency: {ideal:.2f} s")
        bare = {
            "aiohttp": asyncio.run(raw_aiohttp(url, args.calls, args.concurrency)),
            "openai": asyncio.run(raw_openai(url, args.calls, args.concurrency)),
        }
        for name, elapsed in bare.items():
            print(f"baseline, bare {name} requests: {elapsed:.2f} s ({elapsed / ideal:.2f}x ideal)")
        for kind, transport in (("http", "aiohttp"), ("openai", "openai"), ("litellm", "openai")):
            elapsed = judge_run(kind, url, args.concurrency, None, batch)
            verdict = "within" if elapsed <= 1.2 * ideal else "OVER"
            print(
                f"pointwise judge via {kind}: {elapsed:.2f} s ({elapsed / ideal:.2f}x ideal, "
                f"{elapsed / bare[transport]:.2f}x bare {transport}) -> {verdict} 1.2x"
            )
        with tempfile.TemporaryDirectory() as folder:
            cache = str(Path(folder) / "cache.sqlite")
            judge_run("http", url, args.concurrency, cache, batch)  # fill
            warm = judge_run("http", url, args.concurrency, cache, batch)
        per_hit_ms = warm / args.calls * 1000
        print(
            f"cache hits: {args.calls} samples in {warm:.3f} s = {per_hit_ms:.3f} ms per sample "
            f"-> {'under' if per_hit_ms < 1 else 'OVER'} 1 ms"
        )
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
