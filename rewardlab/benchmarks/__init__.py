"""Reward-model benchmarks: any rewardlab reward evaluated the way the field's benchmarks do.

`items` holds the shared model (an `Item` is a prompt and the candidates a reward scores; a
`Result` is a benchmark's figures and plot data); each benchmark module loads its native files
and computes its metric as its reference code does (`RewardBench`, `RewardBench2`, `RMBench`,
`JudgeBench`, `ProcessBench` with the metric of `first_error`, `PRMBench`, `BestOfN`); `suites`
generates offline suites from `arithmetic`; `runner` scores candidates resumably and `report`
writes JSON, markdown and plots; `registry` names them for ``rewardlab bench``.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Item": "rewardlab.benchmarks.items",
    "Result": "rewardlab.benchmarks.items",
    "Benchmark": "rewardlab.benchmarks.items",
    "RewardBench": "rewardlab.benchmarks.rewardbench",
    "RewardBench2": "rewardlab.benchmarks.rewardbench2",
    "RMBench": "rewardlab.benchmarks.rmbench",
    "JudgeBench": "rewardlab.benchmarks.judgebench",
    "ProcessBench": "rewardlab.benchmarks.processbench",
    "PRMBench": "rewardlab.benchmarks.prmbench",
    "BestOfN": "rewardlab.benchmarks.best_of_n",
    "build_benchmark": "rewardlab.benchmarks.registry",
    "ascore_benchmark": "rewardlab.benchmarks.runner",
    "evaluate_and_report": "rewardlab.benchmarks.runner",
    "write_report": "rewardlab.benchmarks.report",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
