"""A real GRPOTrainer run with a tool environment (TRL's ``environment_factory``) on a tiny model,
scored by rewardlab trajectory rewards through the TRL adapter (examples/grpo_tool_environment.py).

What is checked, against values the test works out from the rollouts themselves: the reward saw
each rollout's multi-turn trajectory (an assistant tool call, the tool's result, a final answer)
and a JSON view of the environment that TRL passed as ``environments=``, equal to the presses the
trajectory's calls made; the state check is 1.0 exactly when the panel holds the asked-for
button; and the trainer logged the mean of the values rewardlab returned.
"""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from rewardlab import build
from rewardlab.integrations.trl import as_reward_func
from tests.recording import Recorded

pytest.importorskip("trl")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_tool_environment.py"


def example():
    spec = importlib.util.spec_from_file_location("grpo_tool_environment", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def presses(completion):
    """The buttons a trajectory pressed: each call answered by a tool message."""
    calls = [
        call["function"]["arguments"]["n"]
        for message in completion
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]
    results = [message for message in completion if message["role"] == "tool"]
    return calls[: len(results)]


def test_grpo_with_a_tool_environment_passes_state_and_trajectories(tmp_path):
    panel = example()
    reward = build(panel.REWARD)
    recorded = Recorded(reward)
    trainer = panel.trainer([as_reward_func(recorded)], str(tmp_path), steps=2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend on a shared machine
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
        reward.close()

    assert len(recorded.batches) == 2
    multi_turn = 0
    for samples, scores in recorded.batches:
        assert len(samples) == 4
        for sample, score in zip(samples, scores, strict=True):
            completion = sample.completion
            assert isinstance(completion, list) and completion[0]["role"] == "assistant"
            pressed = presses(completion)
            assert sample.fields["environment_state"] == {"pressed": pressed}
            (asked,) = re.findall(r"Press (\d+)\.", sample.prompt[-1]["content"])
            assert sample.fields["expected_state"] == f'{{"pressed": [{asked}]}}'
            assert score.breakdown["state"] == (1.0 if pressed == [int(asked)] else 0.0)
            final = completion[-1]["content"] if completion[-1]["role"] == "assistant" else ""
            assert score.breakdown["answer"] == (1.0 if final.startswith("Done") else 0.0)
            if [m["role"] for m in completion] == ["assistant", "tool", "assistant"]:
                multi_turn += 1
    assert multi_turn >= 4  # the taught policy calls the tool in most rollouts
    logged = [
        entry["rewards/panel/mean"] for entry in trainer.state.log_history if "rewards/panel/mean" in entry
    ]
    expected = [sum(s.value for s in scores) / len(scores) for _, scores in recorded.batches]
    assert logged == pytest.approx(expected, abs=1e-6)
