"""Single-process against Ray Data scoring: wall time, and that both write the same records.

Two inputs, scored with rule rewards only (the routed pipeline of ``examples/reward.yaml`` with
a repetition penalty in place of its judges): the shipped ``examples/rollouts.jsonl`` (33 rows,
one malformed line and one row without a completion), and a larger file made by repeating its
lines under fresh ids (5,000 rows by default). Each is scored by the single-process engine, by
the Ray engine starting its own local Ray instance (what ``rewardlab score --engine ray`` does
on a machine without a cluster: start-up included), and by the Ray engine on a Ray instance
already running. Records are compared row by row, every field, less ``usage.latency_s`` (the
only timing field; these rewards report no usage, so nothing is actually left out here).

On a small machine Ray's start-up and per-batch overhead dominate; Ray pays off when a cluster
gives it more cores than one process can use, or when the reward waits on models.

Run:  python perf/ray_equality.py [--rows 5000] [--workers 2] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import ray

from rewardlab import build
from rewardlab.offline import RunOptions, open_rows, score_file
from rewardlab.offline.ray_engine import score_rows_ray
from rewardlab.rewards.registry import load_config

EXAMPLES = Path(__file__).parents[1] / "examples" / "rollouts.jsonl"


def rules_config() -> dict:
    """``examples/reward.yaml`` with its judge route (models on the CPU) swapped for a rule."""
    config = load_config(EXAMPLES.parent / "reward.yaml")
    config["routes"]["chat"] = {"type": "repetition_penalty", "ngram_size": 4, "max_penalty": -0.5}
    return config


def repeated_input(path: Path, rows: int) -> Path:
    """``rows`` lines cycling through the examples; parseable rows get an id of their own."""
    lines = EXAMPLES.read_text().splitlines()
    out = []
    for i in range(rows):
        line = lines[i % len(lines)]
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        record["id"] = f"{record.get('id')}-{i}"
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n")
    return path


def comparable(path: Path) -> dict[int, dict]:
    records = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("usage"):
            record["usage"] = {k: v for k, v in record["usage"].items() if k != "latency_s"}
        records[record["row"]] = record
    return records


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def compare(name: str, source: Path, workdir: Path, workers: int, options: RunOptions) -> None:
    single, cold, warm = (workdir / f"{name}.{engine}.jsonl" for engine in ("single", "ray-cold", "ray-warm"))
    rules = rules_config()
    reward = build(rules)
    try:
        single_s = timed(lambda: score_file(reward, source, single, options=options))
    finally:
        reward.close()
    cold_s = timed(lambda: score_rows_ray(rules, open_rows(source), cold, options, workers=workers))
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.WARNING)
    try:
        warm_s = timed(lambda: score_rows_ray(rules, open_rows(source), warm, options, workers=workers))
    finally:
        ray.shutdown()
    expected = comparable(single)
    for path in (cold, warm):
        actual = comparable(path)
        differing = [row for row in expected if actual.get(row) != expected[row]]
        verdict = (
            "identical"
            if not differing and len(actual) == len(expected)
            else f"DIFFER at rows {differing[:5]}"
        )
        print(f"  {path.name}: {len(actual)} records vs {len(expected)}, {verdict}")
    rows = len(expected)
    print(f"  {name}: {rows} rows")
    print(f"    single process      {single_s:7.2f} s  {rows / single_s:8.0f} rows/s")
    print(f"    ray, starting Ray   {cold_s:7.2f} s  {rows / cold_s:8.0f} rows/s")
    print(f"    ray, Ray running    {warm_s:7.2f} s  {rows / warm_s:8.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options = RunOptions(batch_size=args.batch_size, progress=False)
    workers = f"{args.workers} Ray workers, batch size {args.batch_size}"
    print(f"ray {ray.__version__}, {os.cpu_count()} CPUs, {workers}")
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        compare("rollouts", EXAMPLES, workdir, args.workers, options)
        larger = repeated_input(workdir / "larger.jsonl", args.rows)
        compare(f"repeated-{args.rows}", larger, workdir, args.workers, options)


if __name__ == "__main__":
    main()
