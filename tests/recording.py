"""Helpers for trainer tests. `Recorded` passes scoring through and keeps every batch, so a test
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


def two_step_grpo_config(output_dir):
    """The trainer tests' GRPO run: two steps of one prompt's group of 4 short completions, on
    the CPU, logging every step."""
    import trl

    return trl.GRPOConfig(
        output_dir=str(output_dir), use_cpu=True, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, max_steps=2, logging_steps=1, report_to="none", save_strategy="no",
        learning_rate=1e-3, seed=0,
    )  # fmt: skip
