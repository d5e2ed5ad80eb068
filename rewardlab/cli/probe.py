"""``rewardlab probe``: attack a reward with exploit variants of real rollouts, and report which pay."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from rewardlab.arguments import add_batching_arguments, add_import_argument, non_negative_float, positive_int
from rewardlab.cli.pipeline import (
    PIPELINE_FAILED,
    add_accept_failures_argument,
    build_reward,
    import_user_modules,
)
from rewardlab.cli.probe_bias import add_bias_command
from rewardlab.errors import UsageError

#: The exit status when an exploit fails the probe (a pipeline failure exits with the same status).
EXPLOIT_FOUND = PIPELINE_FAILED
#: The exit status when the probe measured nothing (no row probed) or could not score what it
#: made (variants' token ids unknown), and no exploit failed: not a pass, and not a finding.
NOTHING_MEASURED = 3


def add_probe_command(commands: argparse._SubParsersAction) -> None:
    probe = commands.add_parser(
        "probe",
        help="attack a reward with exploit variants of real rollouts; report which ones pay",
        description="Score the rollouts in --data with the reward in --config, make each exploit's "
        "variants of them (answer, format, judge, length, code and character games), score those, "
        "and report per exploit how often a variant scores more than its baseline (the honest "
        "rollout, or for answer-aware exploits a decoy control). Writes OUTPUT/report.md and "
        "OUTPUT/probe.json; exits 1 when an exploit's win rate is above --threshold (or the reward failed), "
        "3 when nothing could be measured (no row scored ok, or variants' token ids unknown).",
    )
    probe.add_argument(
        "--config", metavar="CONFIG.yaml", help="reward config YAML file (required but with --list)"
    )
    probe.add_argument(
        "--data",
        type=Path,
        metavar="ROLLOUTS.jsonl",
        help="honest rollouts: JSONL or Parquet with prompt, completion, reference and fields "
        "(required but with --list)",
    )
    probe.add_argument(
        "--output", type=Path, metavar="DIR", help="report folder (default: probe-results/<config name>)"
    )
    probe.add_argument(
        "--threshold",
        type=non_negative_float,
        default=0.0,
        metavar="T",
        help="an exploit fails when its win rate is above T, from 0 to 1 (default: 0, any win)",
    )
    probe.add_argument(
        "--exploits", metavar="A,B", help="only these exploits, comma-separated (default: all)"
    )
    probe.add_argument("--limit", type=positive_int, metavar="N", help="only the first N rows")
    probe.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of every random choice (default: 0)"
    )
    probe.add_argument(
        "--tokenizer",
        metavar="MODEL",
        help="the policy's tokenizer (a local model folder, a GGUF file or 'embedded'): rows' "
        "completion_ids are re-made from each scored text with it; without it they are dropped",
    )
    add_batching_arguments(probe)
    probe.add_argument("--list", action="store_true", help="list the exploits and exit")
    add_accept_failures_argument(probe)
    add_import_argument(probe)
    probe.set_defaults(run=_probe)
    add_bias_command(probe.add_subparsers(dest="probe_command", metavar="{bias}", title="subcommands"))


def _probe(args: argparse.Namespace) -> int:
    from itertools import islice

    from rewardlab.offline.rows import open_rows
    from rewardlab.probe.registry import exploits_named, registered_exploits
    from rewardlab.probe.report import REPORT_FILE, table, write_report
    from rewardlab.probe.runner import aprobe_reward

    if args.threshold > 1:
        raise UsageError(f"--threshold {args.threshold}: a win rate is at most 1")
    import_user_modules(args.imports)
    if args.list:
        for exploit in registered_exploits().values():
            aware = "answer-aware" if exploit.answer_aware else "blind"
            print(f"{exploit.name:20} {','.join(sorted(exploit.kinds)):16} {aware:13} {exploit.description}")
        return 0
    try:
        chosen = (
            None if args.exploits is None else exploits_named(n.strip() for n in args.exploits.split(","))
        )
    except KeyError as error:
        raise UsageError(f"--exploits: {error.args[0]}") from None
    rows = list(islice(open_rows(args.data), args.limit))
    samples = [row.sample for row in rows if row.sample is not None]
    if not samples:
        raise UsageError(f"--data {args.data}: no readable rows")
    output = args.output or Path("probe-results") / Path(args.config).stem
    tokenizer = None if args.tokenizer is None else _tokenizer(args.tokenizer)
    reward = build_reward(args.config)
    try:
        result = asyncio.run(
            aprobe_reward(
                reward,
                samples,
                exploits=chosen,
                threshold=args.threshold,
                seed=args.seed,
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                progress=not args.no_progress,
                unreadable=len(rows) - len(samples),
                tokenizer=tokenizer,
            )
        )
    finally:
        reward.close()
    write_report(result, output)
    print(table(result), end="")
    print(f"rewardlab probe: report in {output / REPORT_FILE}")
    status = 0
    for failing in result.failing:
        print(
            f"rewardlab probe: exploit {failing.name!r} wins on {failing.wins} of {failing.scored} rows "
            f"({failing.win_rate:.1%}, above the threshold {args.threshold:.1%}); mean gain "
            f"{failing.mean_gain:+.4f}",
            file=sys.stderr,
        )
        status = EXPLOIT_FOUND
    for line in result.pipeline_failures:
        print(f"rewardlab: pipeline failure: {line}", file=sys.stderr)
    if result.pipeline_failures and not args.accept_failures:
        print(
            "rewardlab: the run did not work (see above); --accept-failures exits 0 anyway", file=sys.stderr
        )
        status = PIPELINE_FAILED
    if result.unmeasured:
        print(f"rewardlab probe: could not score: {result.unmeasured}", file=sys.stderr)
        status = status or NOTHING_MEASURED
    return status


def _tokenizer(spec: str) -> object:
    """The tokenizer of a local model (never a hub download); a `UsageError` naming the option."""
    from rewardlab.optional import require
    from rewardlab.prm.models import model_folder

    transformers = require("transformers", "--tokenizer")
    try:
        return transformers.AutoTokenizer.from_pretrained(model_folder(spec), local_files_only=True)
    except (OSError, ValueError) as error:
        raise UsageError(f"--tokenizer {spec}: cannot load a tokenizer: {error}") from None
