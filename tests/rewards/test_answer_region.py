"""The answer region: its rules, and every rule reward that reads an answer reading it the same way."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.rewards.answer_region import DEFAULT_REGION, AnswerRegion


@pytest.mark.parametrize(
    ("text", "region", "source"),
    [
        ("plain answer 5", "plain answer 5", "outside_reasoning"),
        ("<think>maybe 2</think>The answer is 3", "The answer is 3", "outside_reasoning"),
        # The chat template opened the block in the prompt (DeepSeek-R1, Qwen3).
        ("reasoning...</think>\n\nThe answer is 5", "The answer is 5", "outside_reasoning"),
        ("<think>a</think>first<think>b</think>second", "first\n\nsecond", "outside_reasoning"),
        ("<think>a</think>\n<answer> 7 </answer>", "7", "answer_block"),
        ("<answer>2</answer> and again <answer>2</answer>", "2", "answer_block"),
        # The prompt opened the answer block: the answer is what comes before its end.
        ("12</answer>", "12", "answer_block"),
        (
            "<|begin_of_thought|>x<|end_of_thought|><|begin_of_solution|>9<|end_of_solution|>",
            "9",
            "answer_block",
        ),
        ("[THINK]x[/THINK]done", "done", "outside_reasoning"),
        (
            "<|channel|>analysis<|message|>it is 3<|end|><|start|>assistant<|channel|>final<|message|>"
            "It is \\boxed{4}.<|return|>",
            "It is \\boxed{4}.",
            "harmony_final",
        ),
    ],
)
def test_regions(text, region, source):
    found = AnswerRegion().read(text)
    assert (found.text, found.source, found.reason) == (region, source, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<think>I am still thinking: \\boxed{2}", "<think> opens at character 0 and never closes"),
        ("ok <think>cut off", "<think> opens at character 3 and never closes"),
        ("<answer>2</answer><answer>3</answer>", "2 different answer blocks"),
        ("<answer>unfinished 5", "<answer> opens at character 0 and never closes"),
        ("<|channel|>analysis<|message|>it is 3<|end|>", "without a final-channel message"),
    ],
)
def test_no_answer_with_the_reason(text, reason):
    found = AnswerRegion().read(text)
    assert found.text is None and reason in found.reason


def test_whole_and_custom_markers():
    text = "<scratch>2</scratch><think>3</think>4"
    assert AnswerRegion.from_option("whole").read(text).text == text
    custom = AnswerRegion.from_option({"reasoning_tags": ["scratch"]})
    assert custom.read(text).text == "<think>3</think>4"
    markers = AnswerRegion.from_option({"reasoning_markers": [["<<", ">>"]], "answer_tags": []})
    assert markers.read("<<x>>y<answer>z</answer>").text == "y<answer>z</answer>"


@pytest.mark.parametrize(
    "option",
    ["everything", 5, {"reasoning_tags": ["<think>"]}, {"reasoning_markers": [["a", "a"]]}, {"bogus": 1}],
)
def test_bad_options_are_refused(option):
    with pytest.raises(ValueError, match="answer_region"):
        AnswerRegion.from_option(option)


def test_linear_in_the_number_of_markers():
    # Every marker is found once by str.find: 200,000 unclosed openers cost one pass.
    import time

    text = "<think>" * 200_000
    started = time.perf_counter()
    assert AnswerRegion().read(text).text is None
    assert time.perf_counter() - started < 2.0


HIDDEN = "<think>{inside}</think><answer>{outside}</answer>"
NO_COMMA = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}


@pytest.mark.parametrize(
    ("config", "reference", "fields", "right", "wrong"),
    [
        ({"type": "math_answer"}, "2", {}, r"so \boxed{2}", "The answer is 3"),
        ({"type": "string_match"}, "Paris", {}, "Paris", "Lyon"),
        ({"type": "regex_match", "pattern": "Paris"}, None, {}, "Paris", "Lyon"),
        ({"type": "json_schema", "schema": {"required": ["city"]}}, None, {}, '{"city": "P"}', "{}"),
        ({"type": "instruction_following"}, None, NO_COMMA, "no commas here", "one, two, three"),
    ],
)
def test_every_rule_reward_reads_the_answer_not_the_reasoning(config, reference, fields, right, wrong):
    def sample(completion):
        return Sample(completion=completion, reference=reference, fields=fields)

    reward = build(config)
    hidden, unclosed, shown = reward.score(
        [
            sample(HIDDEN.format(inside=right, outside=wrong)),
            sample(f"<think>{right}"),
            sample(HIDDEN.format(inside=wrong, outside=right)),
        ]
    )
    reward.close()
    assert (hidden.status, hidden.value) == (Status.OK, 0.0), hidden.reason
    assert (unclosed.status, unclosed.value) == (Status.OK, 0.0) and "never closes" in unclosed.reason
    assert (shown.status, shown.value) == (Status.OK, 1.0), shown.reason


def test_a_format_pattern_reads_the_whole_completion_when_told_to():
    pattern = r"^<think>.*</think>\s*<answer>.*</answer>$"
    completion = "<think>2 + 2</think> <answer>4</answer>"
    # The default region removes these markers, so such a pattern could never match: refused.
    with pytest.raises(ConfigError, match="answer_region: whole"):
        build({"type": "regex_match", "pattern": pattern, "flags": ["DOTALL"]})
    whole = build({"type": "regex_match", "pattern": pattern, "flags": ["DOTALL"], "answer_region": "whole"})
    [on_whole] = whole.score([Sample(completion=completion)])
    whole.close()
    assert on_whole.value == 1.0


def test_every_harmony_final_message_is_the_answer_and_a_stray_closer_there_is_text():
    region = DEFAULT_REGION.read(
        "<|start|>assistant<|channel|>final<|message|>The answer is 7.\n</think>\n<|end|>"
        "<|start|>assistant<|channel|>final<|message|>\\boxed{10}<|return|>"
    )
    assert "The answer is 7." in region.text and "\\boxed{10}" in region.text


def test_an_answer_block_keeps_its_place():
    region = DEFAULT_REGION.read("<think>x</think>It is not <answer> 10 </answer> at all")
    assert region.text == "10"
    assert region.framed(lambda block: f"[{block.strip()}]") == "It is not [10] at all"
    assert DEFAULT_REGION.read("no block here").framed(str) is None


_PIECES = [
    "<think>", "</think>", "<answer>", "</answer>", "[THINK]", "[/THINK]", "<|channel|>final<|message|>",
    "<|start|>", "<|end|>", "\\[x\\]", "<", "[", " so 5", "\n\n", "  ", "```\n", "7", "◁think▷", "◁",
]  # fmt: skip


@settings(max_examples=500)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_a_text_without_markers_is_read_as_the_block_reader_reads_it(pieces):
    text = "".join(pieces)
    for region in (
        AnswerRegion(),
        AnswerRegion(harmony=False),
        AnswerRegion.from_option({"reasoning_tags": ["plan"]}),
    ):
        assert region.read(text) == region._read_blocks(text)
