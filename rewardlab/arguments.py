"""Argument types and options that several ``rewardlab`` subcommands take, defined once so that
they read and fail the same way everywhere (``score``, ``bench``, ``serve``)."""

from __future__ import annotations

import argparse
import importlib
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


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable), read into ``args.imports``."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so the rewards it registers with rewardlab.register can be built "
        "(repeatable)",
    )


def import_modules(names: Sequence[str]) -> None:
    """Import each of ``names``; an `ImportError` names the ``--import`` that failed."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ImportError(f"--import {name}: {error}") from error
