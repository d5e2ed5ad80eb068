"""A reward wrapper for trainer tests: it passes scoring through and keeps every batch, so a test
can compare what a trainer logged with what the reward returned for the completions it made."""

from rewardlab import Reward


class Recorded(Reward):
    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.io_bound = inner.io_bound  # so the TRL adapter picks the same sync/async form
        self.batches = []

    async def ascore(self, samples):
        scores = await self.inner.ascore(samples)
        self.batches.append((samples, scores))
        return scores
