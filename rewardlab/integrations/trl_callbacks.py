"""Online rubric elicitation inside a TRL trainer: a `TrainerCallback` that, after each
optimizer step, elicits criteria from the rollouts the rubric reward just scored and writes them
to the live store - which the same reward reads at the next step.

In a distributed run each process sees part of every prompt's group: the callback gathers all
processes' rollouts, the main process alone elicits (one set of judge calls, one writer), and
every process waits for it before the next step, so all ranks grade a group with one version.
"""

from __future__ import annotations

from typing import Any

from rewardlab.optional import missing_dependency, require
from rewardlab.rewards.contract import run_sync
from rewardlab.rubrics.elicit import ElicitationOptions, RubricElicitor, StepReport
from rewardlab.rubrics.grading import RubricReward
from rewardlab.rubrics.online import StepCollector, merge_rollouts

try:
    from transformers.trainer_callback import TrainerCallback
except ModuleNotFoundError as error:
    raise missing_dependency(error, "the rubric elicitation callback") from None


class RubricElicitationCallback(TrainerCallback):
    """Pass to a trainer's ``callbacks`` beside ``as_reward_func(reward)``.

    Args:
        reward: The `RubricReward` in the trainer's reward functions; it must have a ``store``.
        options: `ElicitationOptions`.
        reference_field: The dataset column with a reference (control) policy's response.
        every_n_steps: Elicit every this many steps.
        elicitor: A ready `RubricElicitor` (by default one on the reward's judge and store).

    ``reports`` keeps every step's `StepReport`.
    """

    def __init__(
        self,
        reward: RubricReward,
        *,
        options: ElicitationOptions | None = None,
        reference_field: str = "reference_response",
        every_n_steps: int = 1,
        elicitor: RubricElicitor | None = None,
    ):
        if reward.store is None:
            raise ValueError("online elicitation needs a RubricReward with a store to grow")
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be a positive integer, got {every_n_steps!r}")
        self.collector = StepCollector(reward, reference_field)
        self.elicitor = elicitor or RubricElicitor(reward, reward.store, options)
        self.every_n_steps = every_n_steps
        self.reports: list[StepReport] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.every_n_steps != 0:
            return control
        prompts = _gathered(self.collector.drain())
        if prompts and state.is_world_process_zero:
            self.reports.append(run_sync(self.elicitor.step(state.global_step, prompts)))
        _wait_for_every_process()
        return control


def _distributed() -> Any:
    torch = require("torch", "the rubric elicitation callback")
    distributed = torch.distributed
    return distributed if distributed.is_available() and distributed.is_initialized() else None


def _gathered(prompts: list[Any]) -> list[Any]:
    distributed = _distributed()
    if distributed is None:
        return prompts
    collected: list[Any] = [None] * distributed.get_world_size()
    distributed.all_gather_object(collected, prompts)
    return merge_rollouts(collected)


def _wait_for_every_process() -> None:
    distributed = _distributed()
    if distributed is not None:
        distributed.barrier()
