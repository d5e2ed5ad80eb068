"""Reward-model benchmarks. Built so far: ProcessBench's first-error metric with thresholds
chosen on a separate split (`processbench`), and generated step-labelled arithmetic solutions
(`arithmetic`). Loaders for the published benchmarks, their other metrics, the runner and the
reports are tracked in the issue "Reward-model benchmarks: ..."."""
