"""Reward-model benchmarks: any rewardlab reward evaluated the way the field's benchmarks do.

`items` holds the shared model (an `Item` is a prompt and the candidates a reward scores; a
`Result` is a benchmark's figures and plot data); each benchmark module loads its native files
and computes its metric as its reference code does (`rewardbench`, `rewardbench2`, `rmbench`,
`judgebench`, `processbench_data` with `processbench`'s metric, `prmbench`, `best_of_n`);
`suites` generates offline suites from `arithmetic`; `runner` scores candidates resumably and
`report` writes JSON, markdown and plots; `registry` names them for ``rewardlab bench``.
"""
