"""``rewardlab serve``: a reward served over HTTP (the options are `rewardlab.serving.serve`'s)."""

from __future__ import annotations

import argparse


def add_serve_command(commands: argparse._SubParsersAction) -> None:
    from rewardlab.serving.serve import add_serve_arguments, run_serve

    serve = commands.add_parser(
        "serve",
        help="serve a reward over HTTP: batch scoring, OpenRLHF's /get_reward, health and metrics",
        description="Serve the reward built from --config at http://HOST:PORT: POST /score, POST "
        "/get_reward (OpenRLHF), GET /health, /ready and /metrics (Prometheus).",
    )
    add_serve_arguments(serve)
    serve.set_defaults(run=run_serve)
