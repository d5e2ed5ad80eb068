"""``rewardlab probe bias``: how often a judge's or reward model's preference between two answers
flips under changes that should not move it."""

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
from rewardlab.errors import UsageError

#: The exit status when a probe flips more often than the threshold (as for a pipeline failure).
BIAS_FOUND = PIPELINE_FAILED
#: The exit status when nothing was measured (no probe has a decided pair) and no probe failed.
NOTHING_MEASURED = 3


def add_bias_command(commands: argparse._SubParsersAction) -> None:
    bias = commands.add_parser(
        "bias",
        help="measure how often a reward's preference between two answers flips under changes that "
        "should not move it",
        description="Score each pair in --pairs with the reward in --config, rewrite it the ways the "
        "probes say (the order shown, padding, restatement, a user's stated belief, markdown), score it "
        "again, and report per probe how often the preference flipped, with a 95% Wilson interval, and "
        "how often the judge prefers answers of its own model family. Writes OUTPUT/report.md and "
        "OUTPUT/bias.json; exits 1 when a probe's flip rate is above --threshold (or the reward failed), 3 "
        "when nothing was measured (every pair tied or failed, or no probe applies).",
    )
    bias.add_argument("--config", required=True, metavar="CONFIG.yaml", help="reward config YAML file")
    bias.add_argument(
        "--pairs",
        required=True,
        type=Path,
        metavar="PAIRS.jsonl",
        help="JSONL pairs: prompt with chosen and rejected (as train-rm reads them), or with response_a "
        "and response_b; optional chosen_model/rejected_model (or model_a/model_b) and id",
    )
    bias.add_argument(
        "--output", type=Path, metavar="DIR", help="report folder (default: bias-results/<config name>)"
    )
    bias.add_argument(
        "--probes",
        metavar="A,B",
        help="only these probes, comma-separated: position, length, verbosity, self_preference, "
        "sycophancy, format (default: all)",
    )
    bias.add_argument(
        "--judge-family",
        metavar="K1,K2",
        help="keywords naming the judge's model family for self_preference, comma-separated (default: the "
        "family of the model the reward's backend names)",
    )
    bias.add_argument(
        "--threshold",
        type=non_negative_float,
        default=0.0,
        metavar="T",
        help="a probe fails when its flip rate is above T, from 0 to 1 (default: 0, any flip)",
    )
    bias.add_argument("--limit", type=positive_int, metavar="N", help="only the first N pairs")
    add_batching_arguments(bias)
    add_accept_failures_argument(bias)
    add_import_argument(bias)
    bias.set_defaults(run=_bias)


def _names(option: str, text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UsageError(f"{option}: name at least one")
    return names


def _bias(args: argparse.Namespace) -> int:
    from rewardlab.probe.bias import aprobe_bias
    from rewardlab.probe.bias_pairs import read_pairs
    from rewardlab.probe.bias_probes import probes_named
    from rewardlab.probe.bias_report import REPORT_FILE, table, write_bias_report

    if args.threshold > 1:
        raise UsageError(f"--threshold {args.threshold}: a flip rate is at most 1")
    import_user_modules(args.imports)
    try:
        probes = None if args.probes is None else probes_named(_names("--probes", args.probes))
    except KeyError as error:
        raise UsageError(f"--probes: {error.args[0]}") from None
    family = None if args.judge_family is None else _names("--judge-family", args.judge_family)
    pairs = read_pairs(args.pairs, limit=args.limit)
    output = args.output or Path("bias-results") / Path(args.config).stem
    reward = build_reward(args.config)
    try:
        result = asyncio.run(
            aprobe_bias(
                reward,
                pairs,
                probes=probes,
                judge_family=family,
                threshold=args.threshold,
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                progress=not args.no_progress,
            )
        )
    finally:
        reward.close()
    write_bias_report(result, output)
    print(table(result), end="")
    print(f"rewardlab probe bias: report in {output / REPORT_FILE}")
    status = 0
    for failing in result.failing:
        control = failing.control
        print(
            f"rewardlab probe bias: {failing.name!r} flips {failing.flips.flips} of "
            f"{failing.flips.decided} pairs ({failing.flips.rate:.1%}, above the threshold "
            f"{args.threshold:.1%})"
            + ("" if control is None else f"; the control flips {control.flips} of {control.decided}"),
            file=sys.stderr,
        )
        status = BIAS_FOUND
    for line in result.pipeline_failures:
        print(f"rewardlab: pipeline failure: {line}", file=sys.stderr)
    if result.pipeline_failures and not args.accept_failures:
        print(
            "rewardlab: the run did not work (see above); --accept-failures exits 0 anyway", file=sys.stderr
        )
        status = PIPELINE_FAILED
    if result.unmeasured:
        print(f"rewardlab probe bias: nothing measured: {result.unmeasured}", file=sys.stderr)
        status = status or NOTHING_MEASURED
    return status
