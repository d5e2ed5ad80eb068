"""Reading agent trajectories: turns, calls, results, and errors that name the message at fault."""

import pytest

from rewardlab.errors import InvalidInput
from rewardlab.rewards.trajectory import Observation, ToolCall, Turn, history_text, read_trajectory, turn_text


def call(name, arguments, **extra):
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **extra}


ROLLOUT = [
    {"role": "assistant", "content": "Looking it up.", "tool_calls": [call("lookup", {"city": "Paris"})]},
    {"role": "tool", "name": "lookup", "content": "21 C"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("convert", '{"c": 21}', id="c1"), {"name": "log", "arguments": {}}],
    },
    {"role": "tool", "name": "convert", "content": [{"type": "text", "text": "69.8 F"}]},
    {"role": "tool", "name": "log", "content": "ok"},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "assistant", "content": "It is 21 C (69.8 F) today."},
]


def test_turns_calls_and_observations():
    trajectory = read_trajectory(ROLLOUT)
    assert trajectory.turns == (
        Turn(
            0,
            "Looking it up.",
            (ToolCall("lookup", {"city": "Paris"}, "completion[0].tool_calls[0].function"),),
            (Observation("tool", "21 C", "lookup"),),
        ),
        Turn(
            1,
            "",
            (
                ToolCall("convert", {"c": 21}, "completion[2].tool_calls[0].function"),
                ToolCall("log", {}, "completion[2].tool_calls[1]"),
            ),
            (
                Observation("tool", "69.8 F", "convert"),
                Observation("tool", "ok", "log"),
                Observation("user", "And tomorrow?"),
            ),
        ),
        Turn(2, "It is 21 C (69.8 F) today."),
    )
    assert trajectory.final_answer == "It is 21 C (69.8 F) today."
    assert [c.name for c in trajectory.tool_calls] == ["lookup", "convert", "log"]


def test_a_text_completion_is_one_turn():
    assert read_trajectory("just text").turns == (Turn(0, "just text"),)


def test_turn_text_and_history():
    turn = read_trajectory(ROLLOUT).turns[1]
    assert turn_text(turn) == (
        'Tool call: convert({"c": 21})\nTool call: log({})\n'
        "Tool result (convert): 69.8 F\nTool result (log): ok\nUser: And tomorrow?"
    )
    assert turn_text(turn, observations=False) == 'Tool call: convert({"c": 21})\nTool call: log({})'
    first = read_trajectory(ROLLOUT).turns[:1]
    assert history_text([{"role": "user", "content": "Weather in Paris?"}], first) == (
        "Weather in Paris?\n\nAssistant turn 1:\nLooking it up.\n"
        'Tool call: lookup({"city": "Paris"})\nTool result (lookup): 21 C'
    )


@pytest.mark.parametrize(
    ("completion", "message"),
    [
        ([], "completion: has no assistant message"),
        (5, "completion: must be text or a list of chat messages, got int"),
        (["hi"], "completion[0]: must be a chat message (a mapping), got str"),
        (
            [{"role": "tool", "content": "x"}],
            "completion[0]: a tool message before any assistant message answers nothing",
        ),
        (
            [{"role": "system", "content": "x"}],
            "completion[0].role: must be one of assistant, tool, user, got 'system'",
        ),
        ([{"role": "assistant", "content": 5}], "completion[0]: message content must be text, got int"),
        (
            [{"role": "assistant", "content": "", "tool_calls": {"name": "f"}}],
            "completion[0].tool_calls: must be a list of calls, got dict",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [call("", {})]}],
            "completion[0].tool_calls[0].function: the call has no function name ('name')",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [call("f", "{bad")]}],
            "completion[0].tool_calls[0].function.arguments: not JSON: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [call("f", [1])]}],
            "completion[0].tool_calls[0].function.arguments: must be an object, got list",
        ),
        (
            [{"role": "assistant", "content": "a"}, {"role": "tool", "name": 3, "content": "r"}],
            "completion[1].name: must be text, got int",
        ),
    ],
)
def test_malformed_trajectories_name_the_place(completion, message):
    with pytest.raises(InvalidInput) as caught:
        read_trajectory(completion)
    assert str(caught.value) == message
