"""``rewardlab score``: a file of rollouts in, one JSONL score record per row out."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rewardlab.arguments import add_batching_arguments, add_import_argument, positive_int
from rewardlab.cli.pipeline import (
    add_accept_failures_argument,
    build_reward,
    exit_status,
    import_user_modules,
)
from rewardlab.errors import ConfigError, UsageError
from rewardlab.offline.ray_engine import add_ray_arguments
from rewardlab.offline.rows import FORMATS, Columns, open_rows
from rewardlab.offline.runner import RunOptions, ascore_rows, check_output


def add_score_command(commands: argparse._SubParsersAction) -> None:
    score = commands.add_parser(
        "score",
        help="score a JSONL/Parquet file or a saved dataset into a JSONL file of scores",
        description="Score every row of INPUT with the reward built from --config; one JSONL record "
        "per row in --output, a summary in <output>.summary.json.",
    )
    score.add_argument(
        "input", type=Path, metavar="INPUT", help="JSONL or Parquet file, or a save_to_disk dataset directory"
    )
    score.add_argument(
        "--config", required=True, metavar="CONFIG.yaml", help="reward config YAML file ({type: ..., ...})"
    )
    score.add_argument(
        "--output", required=True, type=Path, metavar="OUT.jsonl", help="JSONL file to write the scores to"
    )
    score.add_argument(
        "--format", choices=FORMATS, help="input format (default: from the suffix; a directory is a dataset)"
    )
    score.add_argument(
        "--split", metavar="NAME", help="split of a saved DatasetDict (may be omitted when it has one)"
    )
    defaults = Columns()
    score.add_argument(
        "--prompt-column", default=defaults.prompt, metavar="NAME", help="default: %(default)s"
    )
    score.add_argument(
        "--completion-column", default=defaults.completion, metavar="NAME", help="default: %(default)s"
    )
    score.add_argument(
        "--reference-column",
        default=defaults.reference,
        metavar="NAME",
        help="default: per row, the first present of reference, answer, solution, ground_truth, gold, target",
    )
    score.add_argument(
        "--id-column",
        default=defaults.id,
        metavar="NAME",
        help="default: %(default)s; rows without one get row-<index>",
    )
    add_batching_arguments(score)
    existing = score.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue OUTPUT, skipping ids already in it")
    existing.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTPUT")
    score.add_argument("--limit", type=positive_int, metavar="N", help="read only the first N input rows")
    add_accept_failures_argument(score)
    add_import_argument(score)
    add_ray_arguments(score)
    score.set_defaults(run=_score)


def _score(args: argparse.Namespace) -> int:
    options = RunOptions(
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        resume=args.resume,
        overwrite=args.overwrite,
        limit=args.limit,
        progress=not args.no_progress,
    )
    columns = Columns(args.prompt_column, args.completion_column, args.reference_column, args.id_column)
    # Check the input and output before building the reward, which may load models or start workers.
    source = open_rows(args.input, format=args.format, columns=columns, split=args.split)
    check_output(args.output, options)
    import_user_modules(args.imports)
    if args.engine == "ray":
        summary = _score_on_ray(args, source, options)
    else:
        reward = build_reward(args.config)
        try:
            summary = asyncio.run(ascore_rows(reward, source, args.output, options))
        finally:
            reward.close()
    print(summary.table())
    return exit_status(summary, args.accept_failures)


def _score_on_ray(args: argparse.Namespace, source: Any, options: RunOptions) -> Any:
    from rewardlab.errors import RayEngineError
    from rewardlab.offline.ray_engine import score_rows_ray

    try:
        return score_rows_ray(
            args.config,
            source,
            args.output,
            options,
            imports=args.imports,
            address=args.ray_address,
            workers=args.workers,
            worker_gpus=args.worker_gpus,
        )
    except (ConfigError, RayEngineError) as error:
        raise UsageError(f"--engine ray: {error}") from error
