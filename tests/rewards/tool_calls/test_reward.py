"""`ToolCallReward` on hand-made cases of every BFCL category, BFCL's value rules, partial credit,
multi-step sequences, and failures that are statuses with reasons, never silent zeros."""

import json

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rewards.tool_calls.matching import pair_calls, same_value, standardize_string

WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "unit": {"type": "string"},
                },
                "required": ["city"],
            },
        },
    },
    {"name": "get_time", "parameters": {"properties": {"zone": {"type": "string"}}, "required": ["zone"]}},
]


def hermes(*calls):
    return "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)


def score(completion, reference, **options):
    fields = options.pop("fields", {})
    reward = build({"type": "tool_call", "execution": "inline", **options})
    [result] = reward.score([Sample(completion=completion, reference=json.dumps(reference), fields=fields)])
    return result


SIMPLE = [{"get_weather": {"city": ["Paris", "Paris, France"], "days": [3], "unit": ["", "celsius"]}}]


@pytest.mark.parametrize(
    ("arguments", "value", "reason"),
    [
        ({"city": "Paris", "days": 3}, 1.0, None),
        ({"city": "paris france", "days": 3, "unit": "celsius"}, 1.0, None),  # standardize_string
        ({"city": "Paris", "days": 3.0}, 0.0, "argument 'days': 3.0 is not one of [3]"),  # a float is no int
        ({"city": "Paris", "days": "3"}, 0.0, "argument 'days': '3' is not one of [3]"),
        ({"city": "Paris"}, 0.0, "missing argument 'days'"),
        ({"city": "Paris", "days": 3, "lang": "fr"}, 0.0, "unexpected argument 'lang'"),
        (
            {"city": "Lyon", "days": 3},
            0.0,
            "argument 'city': 'Lyon' is not one of ['Paris', 'Paris, France']",
        ),
    ],
)
def test_simple(arguments, value, reason):
    result = score(hermes(("get_weather", arguments)), SIMPLE)
    assert result.status is Status.OK and result.value == value
    assert result.details["category"] == "simple"
    assert result.breakdown == {"call_1": value}
    if reason is None:
        assert result.reason is None
    else:
        assert result.reason == f"get_weather: completion: <tool_call> #1: {reason}"


def test_wrong_function_name():
    result = score(hermes(("get_time", {"zone": "CET"})), SIMPLE)
    assert result.value == 0.0
    assert (
        result.reason
        == "get_weather: no call to 'get_weather'; unexpected call 'get_time' at completion: <tool_call> #1"
    )


def test_multiple_is_one_call_chosen_among_several_tools():
    reference = [{"get_time": {"zone": ["CET", "Europe/Paris"]}}]
    right = score(hermes(("get_time", {"zone": "europe/paris"})), reference, fields={"tools": WEATHER_TOOLS})
    wrong = score(hermes(("get_weather", {"city": "Paris"})), reference, fields={"tools": WEATHER_TOOLS})
    assert right.details["category"] == "multiple" and right.value == 1.0
    assert wrong.value == 0.0


def test_declared_types_count():
    reference = [{"get_weather": {"city": ["Paris"], "days": [3]}}]
    tools = {"tools": WEATHER_TOOLS}
    # The schema requires "city" even when the reference marks it optional.
    optional_city = [{"get_weather": {"city": ["", "Paris"], "days": [3]}}]
    assert score(hermes(("get_weather", {"days": 3})), optional_city).value == 1.0
    missing = score(hermes(("get_weather", {"days": 3})), optional_city, fields=tools)
    assert missing.value == 0.0 and "missing argument 'city'" in missing.reason
    assert score(hermes(("get_weather", {"city": "Paris", "days": 3})), reference, fields=tools).value == 1.0


@pytest.mark.parametrize(
    ("value", "accepted", "declared", "same"),
    [
        (1, 1.0, None, True),  # BFCL's int -> float conversion
        (1.0, 1, None, False),
        (1.0, 1, "number", True),
        (True, 1, None, False),
        (1, True, None, False),
        ("1", 1, None, False),
        (None, None, None, True),
        ([1, "A b"], [1, "ab"], None, True),
        ([1, 2], [2, 1], None, False),
        ((1, 2), [1, 2], None, True),  # a tuple from a pythonic call is a list
        ({"a": 1}, {"a": (1, 2)}, None, True),
        ({"a": 1, "b": 2}, {"a": (1,)}, None, False),
        ({}, {"a": ("", 1)}, None, True),
    ],
)
def test_bfcl_value_rules(value, accepted, declared, same):
    assert same_value(value, accepted, declared, "bfcl") is same


def test_standardize_string_is_bfcls():
    assert standardize_string("April 1, 2024") == standardize_string("april 1 2024") == "april12024"
    assert standardize_string("It's") == 'it"s'
    assert score(hermes(("f", {"s": "A-B"})), [{"f": {"s": ["ab"]}}], strings="exact").value == 0.0


PARALLEL = [
    {"get_weather": {"city": ["Paris"], "unit": ["", "celsius"]}},
    {"get_weather": {"city": ["Paris", "Lyon"]}},
]


def test_parallel_calls_match_in_any_order_by_a_matching_not_first_fit():
    # The first call fits both reference calls; first-fit (BFCL) gives it to the first and finds
    # nothing for the second. A maximum matching pairs it with the second.
    completion = hermes(
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris", "unit": "celsius"})
    )
    result = score(completion, PARALLEL)
    assert result.details["category"] == "parallel" and result.value == 1.0
    assert [call["matched"] for call in result.details["calls"]] == [
        "completion: <tool_call> #2",
        "completion: <tool_call> #1",
    ]


def test_pair_calls_finds_a_maximum_matching():
    edges = {(0, 0), (0, 1), (1, 0)}
    assert pair_calls(["c0", "c1"], ["e0", "e1"], lambda c, e: None if (c, e) in edges else "no") == [1, 0]


def test_strict_order_zips_instead():
    completion = hermes(("get_weather", {"city": "Lyon"}), ("get_weather", {"city": "Paris"}))
    assert score(completion, PARALLEL).value == 1.0
    strict = score(completion, PARALLEL, order="strict")
    assert strict.value == 0.0 and strict.breakdown == {"call_1": 0.0, "call_2": 1.0}


PARALLEL_MULTIPLE = [
    {"get_weather": {"city": ["Paris"]}},
    {"get_time": {"zone": ["CET"]}},
    {"get_time": {"zone": ["UTC"]}},
]


def test_parallel_multiple_with_partial_credit():
    completion = hermes(
        ("get_time", {"zone": "UTC"}), ("get_weather", {"city": "Paris"}), ("get_time", {"zone": "PST"})
    )
    all_or_nothing = score(completion, PARALLEL_MULTIPLE)
    partial = score(completion, PARALLEL_MULTIPLE, partial_credit=True)
    assert all_or_nothing.details["category"] == "parallel_multiple"
    assert all_or_nothing.value == 0.0
    assert partial.value == pytest.approx(2 / 3)
    assert partial.breakdown == {"call_1": 1.0, "call_2": 0.0, "call_3": 1.0}
    assert partial.details["calls"][1]["reason"] == (
        "completion: <tool_call> #3: argument 'zone': 'PST' is not one of ['CET']"
    )
    # An extra call costs under partial credit: 3 matched of 4 made.
    extra = completion.replace("PST", "CET") + hermes(("get_time", {"zone": "CET"}))
    assert score(extra, PARALLEL_MULTIPLE, partial_credit=True).value == 0.75
    assert score(extra, PARALLEL_MULTIPLE).value == 0.0


@pytest.mark.parametrize(
    ("completion", "value"),
    [
        ("I have no tool for that; the answer is 42.", 1.0),
        (hermes(("get_weather", {"city": "Paris"})), 0.0),
    ],
)
def test_irrelevance_is_right_only_without_a_call(completion, value):
    result = score(completion, [])
    assert result.details["category"] == "irrelevance"
    assert result.value == value
    assert score(completion, [], partial_credit=True).value == value


SEQUENCE = [
    [{"search": {"q": ["flights to Paris"]}}],
    [{"book": {"flight": ["AF1"]}}, {"email": {"to": ["me"]}}],
]


def assistant(*calls, content=None):
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for n, a in calls
        ],
    }


def test_multi_step_sequences_keep_their_order():
    right = [
        assistant(("search", {"q": "Flights to Paris"})),
        {"role": "tool", "content": "AF1 at 9:00"},
        assistant(("email", {"to": "me"}), ("book", {"flight": "AF1"})),
        {"role": "tool", "content": "booked"},
        {"role": "assistant", "content": "Booked AF1."},
    ]
    result = score(right, SEQUENCE)
    assert result.details["category"] == "multi_step" and result.value == 1.0
    assert result.breakdown == {"step_1.call_1": 1.0, "step_2.call_1": 1.0, "step_2.call_2": 1.0}
    swapped = [right[2], right[1], right[0]]
    wrong = score(swapped, SEQUENCE, partial_credit=True)
    assert wrong.value == 0.0
    assert wrong.details["calls"][0] == {
        "name": "search",
        "matched": None,
        "step": 1,
        "reason": "no call to 'search'",
    }


def test_openai_style_references_want_exactly_their_values():
    reference = [{"type": "function", "function": {"name": "f", "arguments": '{"a": 1, "b": {"c": [1, 2]}}'}}]
    assert score(hermes(("f", {"a": 1, "b": {"c": [1, 2]}})), reference).value == 1.0
    assert score(hermes(("f", {"a": 1})), reference).value == 0.0
    assert (
        score(
            hermes(("f", {"a": 1, "b": {"c": [2, 1]}})),
            [{"name": "f", "arguments": {"a": 1, "b": {"c": [1, 2]}}}],
        ).value
        == 0.0
    )


def test_a_python_literal_reference_is_read_as_the_trl_adapter_passes_lists():
    reward = build({"type": "tool_call", "execution": "inline"})
    reference = str([{"f": {"a": [1], "b": [True]}}])
    [result] = reward.score([Sample(completion=hermes(("f", {"a": 1, "b": True})), reference=reference)])
    assert result.value == 1.0


def test_reference_from_a_field():
    reward = build({"type": "tool_call", "execution": "inline", "reference_field": "calls"})
    sample = Sample(completion=hermes(("f", {})), fields={"calls": [{"f": {}}]})
    assert reward.score([sample])[0].value == 1.0


def test_a_malformed_call_is_a_parse_error_naming_the_sample_and_field():
    reward = build({"type": "tool_call", "execution": "inline"})
    bad = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"</tool_call>'
    scores = reward.score(
        [
            Sample(completion=hermes(("f", {})), reference="[]"),
            Sample(completion=bad, reference=json.dumps(SIMPLE)),
        ]
    )
    assert scores[1].status is Status.PARSE_ERROR and scores[1].value is None
    assert scores[1].reason.startswith("sample #1: completion: <tool_call> #1: not JSON")
    assert scores[1].details["parse_error"] == "completion: <tool_call> #1"
    wrong = score(bad, SIMPLE, malformed_calls="wrong")
    assert wrong.status is Status.OK and wrong.value == 0.0 and "not JSON" in wrong.reason


@pytest.mark.parametrize(
    ("reference", "field"),
    [
        (None, "reference"),
        ("2", "reference"),
        ('[{"f": {"a": 1}}]', "reference[0].f.a"),
        ('[{"f": {}, "g": {}}]', "reference[0]"),
        ("not json [", "reference"),
    ],
)
def test_a_bad_reference_is_invalid_input(reference, field):
    reward = build({"type": "tool_call", "execution": "inline"})
    [result] = reward.score([Sample(completion="x", reference=reference)])
    assert result.status is Status.INVALID_INPUT
    assert f"sample #0: {field}:" in result.reason


def test_too_many_calls_score_zero_unmatched():
    completion = hermes(*[("f", {})] * 5)
    result = score(completion, [{"f": {}}], max_calls=4)
    assert result.value == 0.0 and result.reason == "5 calls, over max_calls=4"


def test_unclosed_reasoning_pays_nothing_even_for_irrelevance():
    result = score("<think>should I call something", [])
    assert result.value == 0.0 and "never closes" in result.reason


def test_options_are_checked():
    from rewardlab.errors import ConfigError

    with pytest.raises(ConfigError, match="tokenizer"):
        build({"type": "tool_call", "call_format": "template"})
    with pytest.raises(ConfigError, match="call_format"):
        build({"type": "tool_call", "call_format": "xml"})


def test_the_docstring_example_runs():
    import doctest

    from rewardlab.rewards.tool_calls import reward

    assert doctest.testmod(reward).failed == 0


def test_underscore_dots_reads_bfcl_names_as_api_models_write_them():
    reference = [{"math.hypot": {"x": [3], "y": [4]}}]
    tools = {"tools": [{"name": "math.hypot", "parameters": {"properties": {"x": {"type": "float"}}}}]}
    completion = hermes(("math_hypot", {"x": 3.0, "y": 4}))
    assert score(completion, reference).value == 0.0
    # With the declared float type, 3.0 matches the accepted 3.
    assert score(completion, reference, underscore_dots=True, fields=tools).value == 1.0
    assert score(completion, reference, underscore_dots=True).value == 0.0  # no schema: 3.0 is no int
