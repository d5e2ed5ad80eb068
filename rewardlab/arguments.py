"""Argument types and options that several ``rewardlab`` subcommands take, defined once so that
they read and fail the same way everywhere (``score``, ``bench``, ``serve``)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {text}")
    return value


def add_batching_arguments(parser: argparse.ArgumentParser) -> None:
    """``--batch-size``, ``--concurrency`` and ``--no-progress``, for the commands that score a file
    in batches (``score``, ``bench``, ``probe``, ``probe bias``)."""
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        default=64,
        help="samples per reward call (default: 64)",
    )
    parser.add_argument(
        "--concurrency", type=positive_int, metavar="N", default=4, help="batches in flight (default: 4)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable), read into ``args.imports``."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (found on the Python path or in the current folder), so the rewards "
        "it registers with rewardlab.register can be built (repeatable)",
    )


def import_modules(names: Sequence[str]) -> None:
    """Import each of ``names``; an `ImportError` names the ``--import`` that failed.

    The current folder is searched too, after the Python path: ``python -m rewardlab.cli`` puts it
    on the path but the ``rewardlab`` script does not, and ``--import my_rewards`` next to the
    config must work either way. It goes last so that a local file cannot shadow an installed
    package."""
    if names and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ImportError(f"--import {name}: {error}") from error
