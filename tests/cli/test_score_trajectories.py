"""``rewardlab score`` over JSONL rows whose completions are agent trajectories (message lists with
tool calls and tool results), with the environment's final state as a column: a `Combine` of the
trajectory rewards, every value worked out by hand."""

import json

import pytest

from rewardlab.cli import main
from tests.conftest import tool_call


def rollout(n, answer):
    return [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("press", n=n)]},
        {"role": "tool", "name": "press", "content": f"pressed {n}"},
        {"role": "assistant", "content": answer},
    ]


ROWS = [
    # The right button and a final answer: state 1, answer 1, turns [1, 0] (the second turn
    # calls no tool).
    {"id": "right", "prompt": "Press 3.", "completion": rollout(3, "Done."),
     "environment_state": {"pressed": [3]}, "expected_state": {"pressed": [3]}},
    # The wrong button, said to be done.
    {"id": "wrong", "prompt": "Press 3.", "completion": rollout(2, "Done."),
     "environment_state": {"pressed": [2]}, "expected_state": {"pressed": [3]}},
    # A tool result before any assistant message.
    {"id": "broken", "prompt": "Press 3.", "completion": [{"role": "tool", "content": "pressed 3"}],
     "environment_state": {"pressed": []}, "expected_state": {"pressed": [3]}},
]  # fmt: skip
CONFIG = """\
type: combine
name: agent
components:
  state: {type: environment_state, weight: 1.0}
  answer: {type: final_answer, reward: {type: regex_match, pattern: "^Done"}, weight: 0.5}
  tools: {type: per_turn, reward: {type: regex_match, pattern: "Tool call: press"}, weight: 0.5}
"""


def test_score_command_on_trajectories(tmp_path):
    source = tmp_path / "rollouts.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (tmp_path / "reward.yaml").write_text(CONFIG)
    output = tmp_path / "scores.jsonl"
    argv = ["score", str(source), "--config", str(tmp_path / "reward.yaml"), "--output", str(output)]
    assert main([*argv, "--no-progress"]) == 0
    records = {record["id"]: record for record in map(json.loads, output.read_text().splitlines())}

    right, wrong, broken = records["right"], records["wrong"], records["broken"]
    assert right["status"] == "ok" and right["value"] == pytest.approx(1.0 + 0.5 * 1.0 + 0.5 * 0.5)
    assert right["breakdown"] == {"state": 1.0, "answer": 1.0, "tools": 0.5}
    assert wrong["status"] == "ok" and wrong["value"] == pytest.approx(0.0 + 0.5 + 0.25)
    assert wrong["breakdown"] == {"state": 0.0, "answer": 1.0, "tools": 0.5}
    assert broken["status"] == "invalid_input" and broken["value"] is None
    assert "completion[0]: a tool message before any assistant message answers nothing" in broken["reason"]
