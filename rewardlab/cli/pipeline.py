"""What every command that runs a reward shares: importing the user's modules, building the
reward from its config, and the exit status of a run whose pipeline failed on some rows."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from rewardlab.arguments import import_modules
from rewardlab.errors import ConfigError, UsageError
from rewardlab.rewards.registry import build

PIPELINE_FAILED = 1


def add_accept_failures_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--accept-failures",
        action="store_true",
        help="exit 0 even when the pipeline failed on some rows (backend_error or error)",
    )


def exit_status(summary: Any, accept_failures: bool) -> int:
    """`PIPELINE_FAILED` (with a line per failure on stderr) when the pipeline failed on any row."""
    lines = summary.failure_lines()
    for line in lines:
        print(f"rewardlab: pipeline failure: {line}", file=sys.stderr)
    if lines and not accept_failures:
        print(
            "rewardlab: the run did not work (see above); --accept-failures exits 0 anyway", file=sys.stderr
        )
        return PIPELINE_FAILED
    return 0


def import_user_modules(names: Sequence[str]) -> None:
    try:
        import_modules(names)
    except ImportError as error:
        raise UsageError(str(error)) from error


def build_reward(config: str) -> Any:
    try:
        return build(config)
    except ConfigError as error:
        raise UsageError(f"--config {config}: {error}") from error
