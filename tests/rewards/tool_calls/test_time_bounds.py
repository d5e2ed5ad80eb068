"""No completion can make reading tool calls slow: every call format, run inline (the worker
budget is the safety net, not the bound), on adversarial text of 200 KB, each against a quarter
of it (a linear reader takes about 4x as long, a quadratic one 16x), and on random text from
hypothesis (nothing but `MalformedCall` may escape the reader)."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardlab import Sample, Status, build
from rewardlab.rewards.tool_calls.calls import MalformedCall
from rewardlab.rewards.tool_calls.reading import CallReader
from tests.adversarial_text import CATALOGUE, FRAGMENTS, repeated

SIZE = 50_000
#: Seconds one check may take on 200 KB (the default sample budget is 5 s).
BOUND_S = 2.0
#: Seconds of timer and scheduling noise allowed on top of 8x the smaller text's time (texts that
#: take milliseconds on a two-core machine shared with other jobs).
SLACK_S = 0.15
FORMATS = ["auto", "hermes", "llama3", "mistral", "harmony", "pythonic"]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2, 3]}}'
TOOL_TEXT = {
    "hermes_calls": lambda size: repeated(f"<tool_call>{CALL}</tool_call>\n", size),
    "hermes_openers": lambda size: repeated("<tool_call>", size),
    "hermes_nested_arguments": lambda size: '<tool_call>{"name": "f", "arguments": ' + "[" * size,
    "llama_calls": lambda size: (
        "<|python_tag|>" + repeated(CALL.replace("arguments", "parameters") + "; ", size)
    ),
    "mistral_markers": lambda size: repeated("[TOOL_CALLS]", size),
    "mistral_args": lambda size: repeated('[TOOL_CALLS]f[ARGS]{"a": 1}', size),
    "harmony_calls": lambda size: repeated(
        '<|channel|>commentary to=functions.f <|message|>{"a": 1}<|call|>', size
    ),
    "harmony_recipients": lambda size: repeated("to=functions.", size),
    "pythonic_calls": lambda size: "[" + repeated('f(a=1, b="x"), ', min(size, 90_000)) + "]",
    "pythonic_nesting": lambda size: "[f(a=" + "[" * size,
    "big_integer": lambda size: (
        '<tool_call>{"name": "f", "arguments": {"a": ' + "9" * size + "}}</tool_call>"
    ),
    "long_string_argument": lambda size: (
        f'<tool_call>{{"name": "f", "arguments": {{"s": "{"a, b. " * (size // 6)}"}}}}</tool_call>'
    ),
}
TEXTS = {**CATALOGUE, **TOOL_TEXT}
REFERENCE = '[{"get_weather": {"city": ["Paris"], "days": [[1, 2, 3]]}}, {"f": {"s": ["x"]}}]'


def timed(reward, text):
    started = time.perf_counter()
    [score] = reward.score([Sample(completion=text, reference=REFERENCE)])
    return time.perf_counter() - started, score


@pytest.mark.parametrize("call_format", FORMATS)
@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_reading_stays_linear(call_format, kind):
    reward = build(
        {"type": "tool_call", "call_format": call_format, "execution": "inline", "partial_credit": True}
    )
    # The best of two runs: the machine is shared, and one slow run is noise, not growth.
    small = min(timed(reward, TEXTS[kind](SIZE))[0] for _ in range(2))
    (large, score), (again, _) = (timed(reward, TEXTS[kind](4 * SIZE)) for _ in range(2))
    large = min(large, again)
    assert score.status in (Status.OK, Status.PARSE_ERROR), score
    assert large < BOUND_S, f"{kind} in {call_format}: {large:.2f} s on {4 * SIZE} characters"
    assert large < 8 * small + SLACK_S, f"{kind} in {call_format}: {small:.3f} s -> {large:.3f} s"


MARKERS = (
    "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "to=functions.", "<|message|>",
    "<|call|>", '{"name": "f", "arguments": {', "}", "[f(a=", ")]", ";", "<think>", "</think>",
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(MARKERS + FRAGMENTS) | st.text(max_size=20), max_size=30),
    st.sampled_from(FORMATS),
)
def test_arbitrary_text_reads_or_is_malformed(parts, call_format):
    try:
        steps, _ = CallReader(call_format).steps("".join(parts))
    except MalformedCall as error:
        assert error.where.startswith("completion")
    else:
        assert all(call.name for step in steps for call in step)
