"""``rewardlab serve-model``: a local model served over an OpenAI-compatible HTTP API, or, with
``--runner pooling``, a sequence-classification reward model served with vLLM's pooling
protocol (`rewardlab.reward_models.pooling_server`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_serve_model_command(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve-model",
        help="serve a local model over an OpenAI-compatible HTTP API (chat completions with logprobs), "
        "or a reward model with vLLM's pooling protocol",
        description="Serve a transformers model folder or a GGUF file (default: the embedded "
        "SmolLM2-135M-Instruct) at http://HOST:PORT/v1 for judges and any OpenAI client; with "
        "--runner pooling, a sequence-classification model folder at http://HOST:PORT (POST "
        "/pooling and /classify, as vLLM's pooling runner) for served_reward_model.",
    )
    serve.add_argument("--model", type=Path, metavar="PATH", help="model folder or .gguf file")
    serve.add_argument("--name", help="model name clients use (default: the file or folder name)")
    serve.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    serve.add_argument("--port", type=int, default=8000, help="0 takes a free port (default: %(default)s)")
    serve.add_argument(
        "--runner",
        choices=("generate", "pooling"),
        default="generate",
        help="generate: chat completions; pooling: a reward model's scores, as vLLM's --runner pooling "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--dtype",
        help="torch dtype of the weights (default: float32; with --runner pooling, bfloat16 on a GPU)",
    )
    serve.add_argument("--device", help="torch device (default: cpu; with --runner pooling, the GPU if any)")
    serve.set_defaults(run=_serve_model)


def _serve_model(args: argparse.Namespace) -> int:
    if args.runner == "pooling":
        return _serve_pooling(args)
    from rewardlab.llm.local_backend import LocalBackend
    from rewardlab.llm.serve_model import serve

    backend = LocalBackend(args.model, dtype=args.dtype or "float32", device=args.device or "cpu")
    backend.loaded()  # load before listening, so that "serving" means ready
    name = args.name or backend.path.name.removesuffix(".gguf")

    def announce(url: str) -> None:
        print(f"rewardlab serve-model: serving {name} at {url}", flush=True)

    serve(backend, model_name=name, host=args.host, port=args.port, on_ready=announce)
    return 0


def _serve_pooling(args: argparse.Namespace) -> int:
    from rewardlab.llm.serve_model import serve_app
    from rewardlab.reward_models.pooling_server import SequenceClassifierServer, create_pooling_app

    if args.model is None:
        raise SystemExit(
            "rewardlab serve-model: --runner pooling needs --model, a sequence-classification folder"
        )
    server = SequenceClassifierServer(args.model, device=args.device, dtype=args.dtype)  # loads now
    name = args.name or args.model.name

    def announce(url: str) -> None:
        print(f"rewardlab serve-model: serving {name} (pooling) at {url}", flush=True)

    serve_app(create_pooling_app(server, name), host=args.host, port=args.port, on_ready=announce)
    return 0
