"""Offline scoring on Ray Data (``rewardlab score --engine ray``): the single-process engine's
records, scored by a pool of Ray actors.

How it runs. The driver reads the input with `open_rows` and cuts the rows still to score into
the same batches as `ascore_rows` does, so row errors (line and field), ids, resume and the
batches each reward call sees (which matters to rewards that group a batch by prompt) are the
single-process engine's. Each batch travels pickled as one Ray Data row; `map_batches` hands it
to a `BatchScorer` actor, which builds the reward from the config once, when the actor starts,
and scores with `score_batch` on the actor's own event loop (Ray Data runs an async
``__call__`` there), so async rewards such as judges work, with up to ``options.concurrency``
batches in flight per actor. The driver appends each batch's records as it comes back, flushed,
through the same `open_output` as the single-process engine: records come out in completion
order, a killed run resumes by id, and the summary is the same.

The driver holds the rows to score in Ray's object store for the whole run (about the size of
the input; Ray spills to disk past its store), and builds the reward once itself, to fail on a
bad config before any worker starts and to name the reward in the summary (rewards load models
and start worker processes lazily, so that build is cheap).

Clusters. With no address the engine does what Ray does by default: it joins the cluster named
by ``RAY_ADDRESS``, else a Ray instance started on this machine with ``ray start``, else it starts
a local instance (and stops it afterwards). ``--ray-address auto`` joins the cluster this machine
is a node of, ``--ray-address HOST:6379`` a cluster whose nodes this machine can reach. Ray
Client addresses (``ray://HOST:10001``) are refused: Ray Data does not run over Ray Client
(ray-project/ray#48682). To score on a remote cluster, submit the command as a Ray job; its
driver runs on the head node and writes the output there: ``ray job submit --working-dir . --
rewardlab score in.jsonl --config c.yaml --output out.jsonl --engine ray --ray-address auto``.
The config travels to the workers as a mapping, so its file need not exist there, but the
workers build the reward themselves: rewardlab with the extras the config needs and every module
passed with ``--import`` must be importable on them, and any path named inside the config (a
model folder, a rubric file) must exist there. Run the cluster on the same image as the driver,
or give the job a runtime environment that installs them (``--runtime-env-json '{"pip":
["rewardlab[judges]"]}'``). Each worker actor reserves one CPU; ``--workers`` sets how many
there are. Usage statistics are off (``RAY_USAGE_STATS_ENABLED=0``) and no dashboard is started.

GPUs. A reward that runs a model in its process (``uses_gpu``: ``reward_model``, ``dpo_implicit``,
a PRM placed on ``cuda``) gets, on a cluster with GPUs, a share of them per worker actor:
``min(1, GPUs / workers)`` by default (``--worker-gpus`` sets it; 0 keeps the actors off them). Ray
then points each actor's ``CUDA_VISIBLE_DEVICES`` at its own GPU, so each loads its model once, on
that GPU; without a reservation Ray leaves every actor seeing every GPU, and all of them would load
onto the first. A fractional share puts several actors (several copies of the model) on one GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pickle
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.arguments import import_modules, non_negative_float, positive_int
from rewardlab.errors import RayEngineError
from rewardlab.offline.rows import RowSource
from rewardlab.offline.runner import RunOptions, batches, open_output, record_lines, score_batch
from rewardlab.offline.summary import Summary
from rewardlab.optional import require
from rewardlab.rewards.registry import build, load_config

ENGINES = ("single", "ray")
DEFAULT_WORKERS = 2


class BatchScorer:
    """The Ray Data UDF: one actor builds the reward once, then scores the batches it is handed.

    Each call gets a column ``rows`` of pickled batches (lists of `Row`) and returns a column
    ``records``: per batch, its output lines as the single-process engine writes them.
    """

    def __init__(self, config: Mapping[str, Any], imports: Sequence[str]):
        import_modules(imports)
        self.reward = build(config)

    async def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[str]]:
        return {
            "records": [
                record_lines(await score_batch(self.reward, pickle.loads(rows))) for rows in batch["rows"]
            ]
        }

    def __del__(self) -> None:
        # Ray Data drops the UDF when the pool shuts down: let CAS and sandbox workers go with it.
        reward = getattr(self, "reward", None)
        if reward is not None:
            reward.close()


_CLIENT_UNSUPPORTED = (
    "Ray Data does not run over Ray Client (ray:// addresses); run the command on a node of the "
    "cluster (--ray-address auto) or submit it as a job: ray job submit -- rewardlab score ..."
)


def _check_address(ray: Any, address: str | None) -> None:
    chosen = address or os.environ.get("RAY_ADDRESS", "")
    if chosen.startswith("ray://") or ray.util.client.ray.is_connected():
        raise RayEngineError(_CLIENT_UNSUPPORTED)


@contextlib.contextmanager
def _connected(ray: Any, address: str | None) -> Iterator[None]:
    """Ray, connected; a connection this opens (or a local instance it starts) is closed after."""
    if ray.is_initialized():
        yield
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _quiet_data_context(ray: Any) -> Iterator[None]:
    """Ray Data's progress bars and start-up lines off: the run has its own bar and summary."""
    context = ray.data.DataContext.get_current()
    saved = (context.enable_progress_bars, context.print_on_execution_start)
    context.enable_progress_bars, context.print_on_execution_start = False, False
    try:
        yield
    finally:
        context.enable_progress_bars, context.print_on_execution_start = saved


def score_rows_ray(
    config: Mapping[str, Any] | str | Path,
    source: RowSource,
    output: str | Path,
    options: RunOptions,
    *,
    imports: Sequence[str] = (),
    address: str | None = None,
    workers: int = DEFAULT_WORKERS,
    worker_gpus: float | None = None,
) -> Summary:
    """Score ``source`` into the JSONL file ``output`` on Ray; records as `ascore_rows` writes them.

    Args:
        config: The reward config: a mapping, or a YAML file read here (on the driver).
        source: The input rows, from `open_rows`.
        output: The JSONL output; its summary goes to ``<output>.summary.json``.
        options: Batching, per-worker concurrency, resume/overwrite, limit and progress, as for
            the single-process engine.
        imports: Modules to import (here and on every worker) before building, so that rewards
            they register with ``rewardlab.register`` can be built (``--import``).
        address: The Ray cluster (``auto``, ``HOST:6379``; not Ray Client's ``ray://``);
            default Ray's: ``RAY_ADDRESS``, else a ``ray start`` instance here, else a new local
            one. An already connected Ray is used as it is.
        workers: Worker actors, each building the reward once. Default 2.
        worker_gpus: GPUs each worker reserves; default `gpus_per_worker`'s share when the
            reward runs a model (``uses_gpu``), else none.

    Raises, before Ray starts: `ConfigError` for a bad config, `OutputError` for an output that
    exists without resume or overwrite, `RayEngineError` for a Ray Client address, and
    `MissingDependency` without Ray.

    Example:
        >>> source = open_rows("rollouts.jsonl")  # doctest: +SKIP
        >>> score_rows_ray("reward.yaml", source, "scores.jsonl", RunOptions(), workers=8)  # doctest: +SKIP
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    if worker_gpus is not None and worker_gpus < 0:
        raise ValueError("worker_gpus must be at least 0")
    ray = require("ray", "scoring with --engine ray")
    _check_address(ray, address)
    config = load_config(config)
    import_modules(imports)
    probe = build(config)
    probe.close()
    with open_output(source, Path(output), options, probe.name) as sink:
        pending = [{"rows": pickle.dumps(batch)} for batch in batches(sink.rows, options.batch_size)]
        if not pending:
            return sink.summary
        with _connected(ray, address), _quiet_data_context(ray):
            actors = min(workers, len(pending))
            if worker_gpus is None:
                cluster_gpus = ray.cluster_resources().get("GPU", 0) if probe.uses_gpu else 0
                worker_gpus = gpus_per_worker(cluster_gpus, actors)
            scored = ray.data.from_items(pending, override_num_blocks=len(pending)).map_batches(
                BatchScorer,
                fn_constructor_args=(config, tuple(imports)),
                batch_size=1,  # one of our batches per call (Ray wants a size when GPUs are asked for)
                num_gpus=worker_gpus,
                compute=ray.data.ActorPoolStrategy(
                    size=actors, max_concurrent_calls_per_actor=options.concurrency
                ),
            )
            del pending  # the object store holds them now
            for done in scored.iter_batches(batch_size=None, batch_format="numpy"):
                for text in done["records"]:
                    sink.write_lines(text)
    return sink.summary


def gpus_per_worker(cluster_gpus: float, workers: int) -> float:
    """Each worker's share of the cluster's GPUs: a whole one while there are enough, else an
    equal fraction (several copies of the model on one GPU) - never more than one, since a
    worker's model runs on one device."""
    return min(1.0, cluster_gpus / workers) if cluster_gpus > 0 else 0.0


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--ray-address`` and ``--workers`` for ``rewardlab score``."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="single",
        help="single: this process (default); ray: Ray Data worker actors, see --ray-address",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster for --engine ray (auto, HOST:6379; Ray Client ray:// is not supported by Ray "
        "Data: use ray job submit); default RAY_ADDRESS, else a local instance. Workers must be able "
        "to import rewardlab and every --import module",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help="worker actors for --engine ray, each building the reward once (default: %(default)s)",
    )
    parser.add_argument(
        "--worker-gpus",
        type=non_negative_float,
        metavar="G",
        help="GPUs each --engine ray worker reserves (default: a share of the cluster's, at most 1, "
        "when the reward runs a model; 0 keeps them off the GPUs)",
    )
