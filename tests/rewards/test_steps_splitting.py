import pytest

from rewardlab.errors import StepSplitError
from rewardlab.rewards.step_splitting import given_spans, message_spans, split_steps, token_steps


def texts(text, spans):
    return [text[start:end] for start, end in spans]


SOLUTION = (
    "Let me think.\n\nStep 1: add 2 and 2.\nSo 4.\n\n**Step 2.** Double it: 8.\n## Step 3\nThe answer is 8."
)


def test_markers_start_steps_and_a_worded_preamble_is_a_step():
    assert texts(SOLUTION, split_steps(SOLUTION)) == [
        "Let me think.",
        "Step 1: add 2 and 2.\nSo 4.",
        "**Step 2.** Double it: 8.",
        "## Step 3\nThe answer is 8.",
    ]
    bare = "---\nStep 1: a\nStep 2: b"
    assert texts(bare, split_steps(bare, "markers")) == ["Step 1: a", "Step 2: b"]


def test_numbered_items_paragraphs_lines_and_a_regex():
    listed = "Plan:\n1. First\n2) Second\n  3. Third"
    assert texts(listed, split_steps(listed)) == ["Plan:", "1. First", "2) Second", "3. Third"]
    prose = "One.\n\n\nTwo.\nStill two.\n \nThree."
    assert texts(prose, split_steps(prose)) == ["One.", "Two.\nStill two.", "Three."]
    assert texts(prose, split_steps(prose, "lines")) == ["One.", "Two.", "Still two.", "Three."]
    tagged = "a <extra_0>b<extra_0> c<extra_0>"
    assert texts(tagged, split_steps(tagged, "regex", pattern="<extra_0>")) == ["a", "b", "c"]
    assert texts("one line", split_steps("one line", "markers")) == ["one line"]
    assert split_steps(" \n ") == []


def test_merging_down_to_max_steps():
    text = "a\n\nbb\n\nc\n\ndddd"
    # Pairs span 5, 5 and 7 characters: a+bb merge first (the leftmost shortest); then
    # (a..bb)+c spans 8 and c+dddd 7, so c and dddd merge.
    assert texts(text, split_steps(text, max_steps=2)) == ["a\n\nbb", "c\n\ndddd"]
    assert texts(text, split_steps(text, max_steps=1)) == [text]


def test_bad_options():
    with pytest.raises(ValueError, match="one of"):
        split_steps("x", "sentences")
    with pytest.raises(ValueError, match="pattern"):
        split_steps("x", "regex")
    with pytest.raises(ValueError, match="max_steps"):
        split_steps("x", max_steps=0)


def test_given_steps_are_found_in_order():
    text = "x = 2. Then x = 2 again."
    assert given_spans(text, ["x = 2.", " x = 2 again. "]) == [(0, 6), (12, 24)]
    with pytest.raises(StepSplitError, match=r"step 2 \('y'\) is not in the completion after step 1"):
        given_spans(text, ["x = 2.", "y"])
    with pytest.raises(StepSplitError, match="step 1 is empty"):
        given_spans(text, [" "])


def test_given_steps_are_kept_as_given_whatever_max_steps_says():
    from rewardlab import Sample
    from rewardlab.prm.trajectory import text_step_spans
    from rewardlab.rewards.steps import StepOptions

    text = "a long first step. b. c. another long step."
    given = ["a long first step.", "b.", "c.", "another long step."]
    sample = Sample(prompt="q", completion=text, fields={"steps": given})
    # A dataset's labels index its own steps: merging them would misplace a first error.
    assert texts(text, text_step_spans(sample, StepOptions(max_steps=2))) == given
    split = Sample(prompt="q", completion=text.replace(". ", ".\n\n"))
    assert len(text_step_spans(split, StepOptions(max_steps=2))) == 2


def render(messages):
    return "".join(
        f"<{m['role']}>{m.get('content') or m.get('tool_calls')}</{m['role']}>\n" for m in messages
    )


def test_one_step_per_assistant_message_with_tool_calls_and_not_tool_results():
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": "get_weather()"},
        {"role": "tool", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    text, spans = message_spans(messages, render)
    assert text == render(messages)
    assert texts(text, spans) == [
        "<assistant>get_weather()</assistant>",
        "<assistant>It is sunny.</assistant>",
    ]


def test_a_template_that_rewrites_earlier_turns_is_refused():
    def forgetful(messages):
        return render(messages[-1:])

    with pytest.raises(StepSplitError, match="message 1 changed the text"):
        message_spans([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], forgetful)


def test_tokens_belong_to_the_step_they_overlap():
    # "ab\n\ncd" as tokens "ab", "\n\n", " c", "d" -> spans (0, 2) and (4, 6)
    assert token_steps([(0, 2), (2, 4), (3, 5), (5, 6)], [(0, 2), (4, 6)]) == [0, -1, 1, 1]
    assert token_steps([(0, 1), (9, 10)], [(2, 3)]) == [-1, -1]
