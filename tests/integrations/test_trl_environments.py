"""The TRL adapter with TRL's ``environments`` keyword: called exactly as GRPOTrainer's
``_calculate_rewards`` calls reward functions when an ``environment_factory`` is set
(trl 1.16, ``trl/trainer/grpo_trainer.py``): ``prompts``, ``completions`` (multi-turn tool
trajectories), ``completion_ids``, one list per dataset column, ``trainer_state``, ``log_extra``,
``log_metric`` and ``environments``, one environment instance per completion."""

import dataclasses
import random

import pytest

from rewardlab import Reward, Score, build
from rewardlab.integrations.trl import as_reward_func, environment_state
from tests.conftest import tool_call


class Fields(Reward):
    """Keeps the samples it is given; scores 1.0."""

    name = "fields"

    def __init__(self):
        self.samples = []

    async def ascore(self, samples):
        self.samples.extend(samples)
        return [Score(value=1.0) for _ in samples]


class Counter:
    def __init__(self):
        self._count = 0
        self.history = ()
        self.seen = set()

    def reset(self, **kwargs):
        self._count, self.history, self.seen = 0, (), set()

    def add(self, n: int) -> int:
        self._count += n
        self.history += (n,)
        self.seen.add(str(n))
        return self._count


def trajectory(n):
    return [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("add", n=n)]},
        {"role": "tool", "name": "add", "content": str(n)},
        {"role": "assistant", "content": f"The count is {n}."},
    ]


def trl_call(func, environments, **columns):
    """What GRPOTrainer passes, for two rollouts."""
    logged = {}
    values = func(
        prompts=[[{"role": "user", "content": "Add 2."}], [{"role": "user", "content": "Add 5."}]],
        completions=[trajectory(2), trajectory(5)],
        completion_ids=[[1, 2], [3]],
        trainer_state=object(),
        log_extra=logged.setdefault,
        log_metric=logged.setdefault,
        environments=environments,
        **columns,
    )
    return values, logged


def test_each_rollouts_environment_becomes_a_json_state_field():
    environments = [Counter(), Counter()]
    environments[0].add(2)
    environments[1].add(3)
    environments[1].add(2)
    reward = Fields()
    values, _ = trl_call(as_reward_func(reward), environments, environment=["counter", "counter"])
    assert values == [1.0, 1.0]
    first, second = reward.samples
    assert first.fields["environment_state"] == {"_count": 2, "history": [2], "seen": ["2"]}
    assert second.fields["environment_state"] == {"_count": 5, "history": [3, 2], "seen": ["2", "3"]}
    # The multi-environment column naming the environment stays a dataset field.
    assert first.fields["environment"] == "counter"
    assert "environments" not in first.fields and "trainer_state" not in first.fields
    assert first.completion == trajectory(2) and first.fields["completion_ids"] == [1, 2]
    # A copy: TRL resets and reuses its instances for the next batch.
    environments[0].reset()
    assert first.fields["environment_state"]["_count"] == 2


def test_environment_state_reward_through_the_adapter():
    environments = [Counter(), Counter()]
    environments[0].add(2)
    environments[1].add(4)
    reward = build({"type": "environment_state", "expected_field": "expected"})
    values, logged = trl_call(
        as_reward_func(reward), environments, expected=['{"_count": 2}', '{"_count": 5}']
    )
    assert values == [1.0, 0.0]
    assert logged["environment_state/status"] == ["ok", "ok"]
    assert logged["environment_state/reason"][1] == (
        "1 of 1 state keys differ from the expected state: '_count'"
    )


def test_without_environments_no_state_field():
    reward = Fields()
    func = as_reward_func(reward)
    func(prompts=["p"], completions=["c"], completion_ids=[[1]], trainer_state=None)
    assert "environment_state" not in reward.samples[0].fields


def test_views_of_dataclasses_and_to_dict():
    @dataclasses.dataclass
    class Board:
        cells: tuple
        score: float = 0.5

    class Shop:
        def __init__(self):
            self.connection = object()  # would have no JSON form
            self.basket = ["tea"]

        def to_dict(self):
            return {"basket": self.basket}

    class Slotted:
        __slots__ = ("lives", "unset")

        def __init__(self):
            self.lives = 3

    assert environment_state(Board(cells=((1, 2), (3, 4)))) == {"cells": [[1, 2], [3, 4]], "score": 0.5}
    assert environment_state(Slotted()) == {"lives": 3}
    assert environment_state(Shop()) == {"basket": ["tea"]}


def test_a_state_without_json_form_names_the_environment_and_attribute():
    class Game:
        def __init__(self):
            self.rng = random.Random(0)

    with pytest.raises(TypeError, match=r"environment Game: attribute 'rng' is a Random, which has no JSON"):
        environment_state(Game())
    reward = Fields()
    with pytest.raises(TypeError, match="define to_dict"):
        trl_call(as_reward_func(reward), [Game(), Game()])
