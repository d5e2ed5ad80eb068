"""Reading the calls of a completion: every text format, chat messages with steps, reasoning left
out, and malformed calls named by field."""

import pytest

from rewardlab.errors import InvalidInput
from rewardlab.rewards.tool_calls.calls import MalformedCall
from rewardlab.rewards.tool_calls.reading import CallReader


def calls(completion, text_format="auto"):
    steps, problem = CallReader(text_format).steps(completion)
    assert problem is None
    return [[(call.name, call.arguments) for call in step] for step in steps]


@pytest.mark.parametrize(
    ("text", "text_format", "expected"),
    [
        (
            "I will look.\n"
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>{"name": "get_time", "arguments": "{\\"zone\\": \\"CET\\"}"}</tool_call>',
            "auto",
            [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET"})],
        ),
        # A block left open at the end runs to the end (vLLM's hermes parser).
        ('<tool_call>{"name": "f", "arguments": {"a": 1}}', "hermes", [("f", {"a": 1})]),
        (
            '<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}<|eom_id|>',
            "auto",
            [("f", {"a": 1}), ("g", {})],
        ),
        ('{"name": "f", "parameters": {"x": [1, 2]}}', "llama3", [("f", {"x": [1, 2]})]),
        (
            '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {"b": "x"}}]',
            "auto",
            [("f", {"a": 1}), ("g", {"b": "x"})],
        ),
        (
            '[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}',
            "mistral",
            [("f", {"a": 1}), ("g", {})],
        ),
        (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Tokyo"}<|call|>',
            "auto",
            [("get_weather", {"city": "Tokyo"})],
        ),
        (
            '[math.hypot(x=3, y=4.0), search(query="a, b", limit=None, tags=["x"]), use(value=my_var)]',
            "pythonic",
            [
                ("math.hypot", {"x": 3, "y": 4.0}),
                ("search", {"query": "a, b", "limit": None, "tags": ["x"]}),
                ("use", {"value": "my_var"}),
            ],
        ),
    ],
)
def test_text_formats(text, text_format, expected):
    assert calls(text, text_format) == [expected]


@pytest.mark.parametrize(
    ("text", "text_format"),
    [
        ("The weather in Paris is sunny.", "auto"),
        ("I cannot call a function for that.", "pythonic"),
        ("Plain prose, no JSON.", "llama3"),
        # A call inside reasoning is a thought.
        ('<think><tool_call>{"name": "f", "arguments": {}}</tool_call></think>No call needed.', "auto"),
    ],
)
def test_text_without_calls(text, text_format):
    assert calls(text, text_format) == []


def test_the_first_marker_decides_the_format_in_auto():
    text = '<tool_call>{"name": "f", "arguments": {"s": "[TOOL_CALLS]"}}</tool_call>'
    assert calls(text) == [[("f", {"s": "[TOOL_CALLS]"})]]


def test_messages_give_one_step_per_calling_assistant_turn():
    completion = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
                {"id": "2", "type": "function", "function": {"name": "search", "arguments": {"q": "y"}}},
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": '<tool_call>{"name": "not_a_call"}</tool_call>'},
        {"role": "assistant", "content": '<tool_call>{"name": "open", "arguments": {"id": 3}}</tool_call>'},
        {"role": "tool", "tool_call_id": "3", "content": "page"},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]
    assert calls(completion) == [[("search", {"q": "x"}), ("search", {"q": "y"})], [("open", {"id": 3})]]


def test_reasoning_that_never_closes_leaves_no_calls_and_says_why():
    steps, problem = CallReader().steps('<think>maybe <tool_call>{"name": "f"}</tool_call>')
    assert steps == [] and "never closes" in problem


@pytest.mark.parametrize(
    ("completion", "where", "message"),
    [
        (
            '<tool_call>{"name": "f", "arguments": {"a": 1}</tool_call>',
            "completion: <tool_call> #1",
            "not JSON",
        ),
        ('<tool_call>{"arguments": {}}</tool_call>', "completion: <tool_call> #1", "no function name"),
        (
            '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
            "completion: <tool_call> #1.arguments",
            "object",
        ),
        ('<tool_call>{"name": "f"} and more</tool_call>', "completion: <tool_call> #1", "text after"),
        ("[TOOL_CALLS]f(a=1)", "completion: [TOOL_CALLS] #1", "name[ARGS]"),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}],
            "completion[0].tool_calls[0].function.arguments",
            "not JSON",
        ),
        ([{"role": "assistant", "tool_calls": "f()"}], "completion[0].tool_calls", "list of calls"),
        ("[f(1, 2)]", "completion: call #1", "by name"),
        ("[f(a=1]", "completion", "not Python calls"),
    ],
)
def test_malformed_calls_name_the_field(completion, where, message):
    text_format = "pythonic" if isinstance(completion, str) and completion.startswith("[f") else "auto"
    with pytest.raises(MalformedCall) as raised:
        CallReader(text_format).steps(completion)
    assert raised.value.where == where
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("completion", "field"),
    [
        (5, "completion"),
        (["text"], "completion[0]"),
        ([{"role": "assistant", "content": 5}], "completion[0].content"),
    ],
)
def test_a_completion_that_is_not_text_or_messages_is_invalid_input(completion, field):
    with pytest.raises(InvalidInput) as raised:
        CallReader().steps(completion)
    assert raised.value.field_name == field
