"""Benchmarks by the name ``rewardlab bench NAME`` takes, imported only when asked for."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from rewardlab.benchmarks.items import Benchmark
from rewardlab.errors import BenchmarkError

#: name -> "module:Class".
BENCHMARKS = {
    "rewardbench": "rewardlab.benchmarks.rewardbench:RewardBench",
    "rewardbench2": "rewardlab.benchmarks.rewardbench2:RewardBench2",
    "rmbench": "rewardlab.benchmarks.rmbench:RMBench",
    "judgebench": "rewardlab.benchmarks.judgebench:JudgeBench",
    "processbench": "rewardlab.benchmarks.processbench:ProcessBench",
    "prmbench": "rewardlab.benchmarks.prmbench:PRMBench",
    "best_of_n": "rewardlab.benchmarks.best_of_n:BestOfN",
    "arithmetic-pairs": "rewardlab.benchmarks.suites:ArithmeticPairs",
    "arithmetic-steps": "rewardlab.benchmarks.suites:ArithmeticSteps",
    "arithmetic-bon": "rewardlab.benchmarks.suites:ArithmeticBestOfN",
}


def benchmark_class(name: str) -> type[Benchmark]:
    """The class behind a benchmark name."""
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    module, _, attribute = BENCHMARKS[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def build_benchmark(name: str, options: Mapping[str, Any] | None = None) -> Benchmark:
    """``Class(**options)`` for the named benchmark, with an error that lists the accepted
    options when one is wrong."""
    cls = benchmark_class(name)
    options = dict(options or {})
    accepted = [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise BenchmarkError(
            f"{name}: unknown option(s) {', '.join(unknown)}; accepted: {', '.join(accepted) or 'none'}"
        )
    try:
        return cls(**options)
    except (TypeError, ValueError) as error:
        raise BenchmarkError(f"{name}: {error}") from error
