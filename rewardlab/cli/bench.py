"""``rewardlab bench``: a reward evaluated on a reward-model benchmark, with a report."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.arguments import add_batching_arguments, add_import_argument, positive_int
from rewardlab.cli.pipeline import (
    add_accept_failures_argument,
    build_reward,
    exit_status,
    import_user_modules,
)
from rewardlab.errors import UsageError
from rewardlab.offline.runner import RunOptions, check_output
from rewardlab.rewards.contract import Score


def add_bench_command(commands: argparse._SubParsersAction) -> None:
    from rewardlab.benchmarks.registry import BENCHMARKS

    bench = commands.add_parser(
        "bench",
        help="evaluate a reward on a reward-model benchmark; writes scores, a JSON result, a markdown "
        "report and plots",
        description="Score every candidate of benchmark NAME with the reward in --config (or read "
        "precomputed scores with --scores), compute the benchmark's metric, and write OUTPUT/"
        "scores.jsonl (resumable), result.json, report.md and PNG plots.",
    )
    bench.add_argument("name", metavar="NAME", choices=sorted(BENCHMARKS), help=", ".join(sorted(BENCHMARKS)))
    source = bench.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="CONFIG.yaml", help="reward config YAML file to score with")
    source.add_argument(
        "--scores",
        type=Path,
        metavar="SCORES.jsonl",
        help="precomputed scores instead of a reward: rewardlab score records, or one record per item "
        '({"id": ITEM, "scores": [...]})',
    )
    bench.add_argument(
        "--published",
        action="store_true",
        help="--scores is in the format the benchmark's own repository publishes",
    )
    bench.add_argument(
        "--data",
        type=Path,
        metavar="PATH",
        help="the benchmark's file or folder (default: the generated suite, for the suites)",
    )
    bench.add_argument(
        "--output", type=Path, metavar="DIR", help="report folder (default: bench-results/NAME)"
    )
    bench.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a benchmark option, VALUE read as YAML (e.g. threshold=null); repeatable",
    )
    bench.add_argument("--limit", type=positive_int, metavar="N", help="only the first N items")
    add_batching_arguments(bench)
    existing = bench.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue OUTPUT/scores.jsonl")
    existing.add_argument("--overwrite", action="store_true", help="replace OUTPUT/scores.jsonl")
    add_accept_failures_argument(bench)
    add_import_argument(bench)
    bench.set_defaults(run=_bench)


def _benchmark_options(pairs: Sequence[str]) -> dict[str, Any]:
    import yaml

    options = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise UsageError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            options[key] = yaml.safe_load(value)
        except yaml.YAMLError as error:
            raise UsageError(f"--option {pair!r}: VALUE is not YAML ({error})") from None
    return options


def _bench(args: argparse.Namespace) -> int:
    from rewardlab.benchmarks.registry import build_benchmark
    from rewardlab.benchmarks.report import markdown
    from rewardlab.benchmarks.runner import SCORES_FILE, ascore_benchmark, evaluate_and_report
    from rewardlab.benchmarks.score_files import read_score_file
    from rewardlab.errors import BenchmarkError, DataFormatError

    if args.published and args.scores is None:
        raise UsageError("--published describes --scores; give --scores too")
    output = args.output or Path("bench-results") / args.name
    try:
        benchmark = build_benchmark(args.name, _benchmark_options(args.option))
        items = benchmark.load(args.data)[: args.limit]
        if args.scores is not None:
            scores: Mapping[str, Sequence[Score]]
            if args.published:
                scores = benchmark.published_scores(args.scores, items)
            else:
                scores = read_score_file(args.scores)
        else:
            options = RunOptions(
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                resume=args.resume,
                overwrite=args.overwrite,
                progress=not args.no_progress,
            )
            check_output(output / SCORES_FILE, options)
            import_user_modules(args.imports)
            reward = build_reward(args.config)
            try:
                scores, summary = asyncio.run(ascore_benchmark(reward, items, output, options))
            finally:
                reward.close()
        result = evaluate_and_report(benchmark, items, scores, output)
    except (BenchmarkError, DataFormatError) as error:
        raise UsageError(str(error)) from error
    print(markdown(result), end="")
    print(f"rewardlab bench: report in {output}/report.md")
    return 0 if args.scores is not None else exit_status(summary, args.accept_failures)
