"""``rewardlab serve-model``: a local model served over an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_serve_model_command(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve-model",
        help="serve a local model over an OpenAI-compatible HTTP API (chat completions with logprobs)",
        description="Serve a transformers model folder or a GGUF file (default: the embedded "
        "SmolLM2-135M-Instruct) at http://HOST:PORT/v1 for judges and any OpenAI client.",
    )
    serve.add_argument("--model", type=Path, metavar="PATH", help="model folder or .gguf file")
    serve.add_argument("--name", help="model name clients use (default: the file or folder name)")
    serve.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    serve.add_argument("--port", type=int, default=8000, help="0 takes a free port (default: %(default)s)")
    serve.add_argument("--dtype", default="float32", help="torch dtype of the weights (default: %(default)s)")
    serve.add_argument("--device", default="cpu", help="torch device (default: %(default)s)")
    serve.set_defaults(run=_serve_model)


def _serve_model(args: argparse.Namespace) -> int:
    from rewardlab.llm.local_backend import LocalBackend
    from rewardlab.llm.serve_model import serve

    backend = LocalBackend(args.model, dtype=args.dtype, device=args.device)
    backend.loaded()  # load before listening, so that "serving" means ready
    name = args.name or backend.path.name.removesuffix(".gguf")

    def announce(url: str) -> None:
        print(f"rewardlab serve-model: serving {name} at {url}", flush=True)

    serve(backend, model_name=name, host=args.host, port=args.port, on_ready=announce)
    return 0
