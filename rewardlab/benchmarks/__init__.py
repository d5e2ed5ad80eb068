"""Reward-model benchmarks (not built yet): loaders, exact metrics, a resumable runner and
reports. Tracked in the issue "Reward-model benchmarks: ..."."""
