"""``rewardlab serve``: a reward from a YAML config behind HTTP (`app.create_app`), on uvicorn.

`serve` blocks until interrupted (the command line); `start_server` runs the same server in a
background thread and returns its address (tests, benchmarks, notebooks). Like ``rewardlab
serve-model``, the socket is bound and listening before anyone is told where it is, so a client
that connects at once waits in the backlog instead of being refused; readiness (the reward warm)
is ``GET /ready``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rewardlab.arguments import add_import_argument, import_modules
from rewardlab.errors import MissingDependency
from rewardlab.optional import require
from rewardlab.rewards.contract import Reward
from rewardlab.rewards.registry import build
from rewardlab.serving.app import create_app
from rewardlab.serving.limits import ServeOptions
from rewardlab.sockets import http_address, listening_socket

DEFAULT_PORT = 8001
TOKEN_ENV = "REWARDLAB_SERVE_TOKEN"


def _uvicorn_server(reward: Reward, options: ServeOptions | None, close_reward: bool = False) -> Any:
    uvicorn = require("uvicorn", "rewardlab serve")
    app = create_app(reward, options, close_reward=close_reward)
    return uvicorn.Server(uvicorn.Config(app, log_level="warning"))


def serve(
    config_or_reward: Reward | Mapping[str, Any] | str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    options: ServeOptions | None = None,
    on_ready: Callable[[str], None] | None = None,
    close_reward: bool | None = None,
) -> None:
    """Serve a reward until interrupted (SIGINT / SIGTERM).

    Args:
        config_or_reward: A `Reward`, or a config (mapping or YAML path) to `build` one from.
        host, port: Where to listen; port 0 takes a free port.
        options: Limits and policies (`ServeOptions`).
        on_ready: Called with the server's address (``http://host:port``) once it listens.
        close_reward: Close the reward when serving ends; by default exactly when it was built
            here from a config.
    """
    if isinstance(config_or_reward, Reward):
        reward, built = config_or_reward, False
    else:
        reward, built = build(config_or_reward), True
    close = built if close_reward is None else close_reward
    try:
        server = _uvicorn_server(reward, options, close_reward=close)
        sock = listening_socket(host, port)
        if on_ready is not None:
            on_ready(http_address(host, sock))
        server.run(sockets=[sock])
    finally:
        # Reached when serving ends without a signal (a failed start, say). After SIGINT or
        # SIGTERM uvicorn re-raises the signal once the app - which closes the reward on shutdown -
        # has stopped, and the process ends without coming back here. close() is idempotent.
        if close:
            reward.close()


class RunningServer:
    """A reward server running in a background thread of this process (see `start_server`)."""

    def __init__(self, reward: Reward, host: str, port: int, options: ServeOptions | None):
        self._server = _uvicorn_server(reward, options)
        sock = listening_socket(host, port)
        self.url = http_address(host, sock)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="rewardlab-serve", daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the reward server failed to start")
            time.sleep(0.01)

    @property
    def service(self) -> Any:
        """The app's `RewardService` (admission, metrics, scoring thread)."""
        return self._server.config.app.state.service

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop serving and wait for the thread (the reward is not closed)."""
        self._server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_server(
    reward: Reward, *, host: str = "127.0.0.1", port: int = 0, options: ServeOptions | None = None
) -> RunningServer:
    """Serve ``reward`` from a background thread; returns once uvicorn has started (``/ready``
    says when the reward is warm). Stop it with ``.stop()`` or a ``with`` block."""
    return RunningServer(reward, host, port, options)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``rewardlab serve`` (for ``cli.py``: ``add_serve_arguments(sub)``,
    ``sub.set_defaults(run=run_serve)``)."""
    defaults = ServeOptions()
    parser.add_argument(
        "--config", required=True, metavar="CONFIG.yaml", help="reward config YAML file ({type: ..., ...})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="0 takes a free port (default: %(default)s)"
    )
    parser.add_argument(
        "--token",
        help=f"bearer token clients must send to /score and /get_reward (default: ${TOKEN_ENV}; none "
        "serves without authentication). Prefer the variable: arguments show in process lists",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=defaults.max_batch_size,
        metavar="N",
        help="most samples per request (default: %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        metavar="N",
        help="largest request body (default: %(default)s)",
    )
    parser.add_argument(
        "--body-timeout-s",
        type=float,
        default=defaults.body_timeout_s,
        metavar="S",
        help="time a request body may take to arrive whole; past it, 408 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-reading-bytes",
        type=int,
        default=defaults.max_reading_bytes,
        metavar="N",
        help="bytes that bodies not yet parsed may hold together; past it, 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-field-values",
        type=int,
        default=defaults.max_field_values,
        metavar="N",
        help="most JSON values one sample's fields may hold; more get 413 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-text-chars",
        type=int,
        default=defaults.max_text_chars,
        metavar="N",
        help="longest reason or details text an answer carries; longer ones are clipped "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=defaults.deadline_s,
        metavar="S",
        help="per-request deadline, parsing and queueing included; past it samples get status "
        "timeout, or a body not yet parsed 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=defaults.max_concurrency,
        metavar="N",
        help="batches scoring at once (default: %(default)s)",
    )
    parser.add_argument(
        "--queue",
        type=int,
        default=defaults.queue,
        metavar="N",
        help="requests that may wait beyond those scoring; more get 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--retry-after-s",
        type=float,
        default=defaults.retry_after_s,
        metavar="S",
        help="Retry-After of a 503 (default: %(default)s)",
    )
    parser.add_argument(
        "--failure-value",
        type=float,
        default=defaults.failure_value,
        metavar="X",
        help="what /get_reward (OpenRLHF) returns for a sample without a value; flagged in "
        "extra_logs and counted in the metrics (default: %(default)s)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="ready without scoring a probe sample first")
    add_import_argument(parser)


def _fail(message: str) -> int:
    print(f"rewardlab serve: error: {message}", file=sys.stderr)
    return 2


def run_serve(args: argparse.Namespace) -> int:
    """Run ``rewardlab serve`` from parsed `add_serve_arguments` arguments; returns the exit
    status. Mistakes in the arguments, the config or an import exit 2 with one line on stderr."""
    try:
        import_modules(args.imports)
    except ImportError as error:
        return _fail(str(error))
    try:
        options = ServeOptions(
            max_body_bytes=args.max_body_bytes,
            body_timeout_s=args.body_timeout_s,
            max_reading_bytes=args.max_reading_bytes,
            max_field_values=args.max_field_values,
            max_text_chars=args.max_text_chars,
            max_batch_size=args.max_batch,
            deadline_s=args.deadline_s,
            max_concurrency=args.max_concurrency,
            queue=args.queue,
            retry_after_s=args.retry_after_s,
            token=args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None,
            failure_value=args.failure_value,
            warmup=not args.no_warmup,
        )
        reward = build(args.config)
    except (ValueError, MissingDependency) as error:  # ConfigError is a ValueError
        return _fail(str(error))

    def announce(url: str) -> None:
        auth = "bearer token required" if options.token else "no authentication"
        print(f"rewardlab serve: serving {reward.name!r} at {url} ({auth})", flush=True)

    try:
        serve(reward, host=args.host, port=args.port, options=options, on_ready=announce, close_reward=True)
    except OSError as error:  # the address is taken, or not ours to listen on
        return _fail(f"cannot serve at {args.host}:{args.port}: {error}")
    return 0
