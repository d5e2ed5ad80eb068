"""The ``rewardlab`` parser, one subcommand per module of this package, and the exit status of a
user's mistake."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rewardlab.cli.bench import add_bench_command
from rewardlab.cli.elicit import add_elicit_command
from rewardlab.cli.fetch_model import add_fetch_model_command
from rewardlab.cli.probe import add_probe_command
from rewardlab.cli.schema import add_schema_command
from rewardlab.cli.score import add_score_command
from rewardlab.cli.serve import add_serve_command
from rewardlab.cli.serve_model import add_serve_model_command
from rewardlab.cli.train_rm import add_train_rm_command
from rewardlab.errors import UserError

USAGE_ERROR = 2


def parser() -> argparse.ArgumentParser:
    """The ``rewardlab`` argument parser, every subcommand added."""
    parser = argparse.ArgumentParser(prog="rewardlab", description="Reward modeling for LLM post-training.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_score_command(commands)
    add_bench_command(commands)
    add_probe_command(commands)
    add_elicit_command(commands)
    add_schema_command(commands)
    add_serve_command(commands)
    add_serve_model_command(commands)
    add_fetch_model_command(commands)
    add_train_rm_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 itself on bad arguments).
    Any `UserError` (a config, a file, a command line at fault) is one line on stderr, status 2."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as error:
        print(f"rewardlab {args.command}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
