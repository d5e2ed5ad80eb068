import itertools
import math

import pytest

from rewardlab.errors import InvalidInput
from rewardlab.judges.scaffolded import SEGMENTS
from rewardlab.rewards.steps import StepOptions, aggregate_steps, process_advantages, step_spans


def segments(text, **options):
    return step_spans(text, {}, SEGMENTS.model_copy(update=options))


def test_aggregates_by_name():
    values = [0.5, 1.0, 0.25]
    assert aggregate_steps(values, "min") == 0.25
    assert aggregate_steps(values, "last") == 0.25
    assert aggregate_steps(values, "mean") == pytest.approx(1.75 / 3)
    assert aggregate_steps(values, "sum") == 1.75
    assert aggregate_steps(values, "product") == 0.125
    with pytest.raises(ValueError, match="unknown aggregate"):
        aggregate_steps(values, "median")
    with pytest.raises(ValueError):
        aggregate_steps([], "mean")


def test_segments_are_paragraphs_then_lines():
    text = "Step 1: x = 2.\n\nStep 2: y = 3.\n\n\nSo x + y = 5."
    spans = segments(text)
    assert [text[a:b] for a, b in spans] == ["Step 1: x = 2.", "Step 2: y = 3.", "So x + y = 5."]
    lines = "a = 1\nb = 2\nc = 3"
    assert [lines[a:b] for a, b in segments(lines)] == ["a = 1", "b = 2", "c = 3"]


def test_segments_merge_down_to_the_limit_and_cover_the_text_in_order():
    text = "\n\n".join(f"line {i} " + "x" * i for i in range(20))
    assert len(segments(text)) == 12
    spans = segments(text, max_steps=5)
    assert len(spans) == 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a < b <= c for (a, b), (c, _) in itertools.pairwise(spans))
    assert "".join(text[a:b] for a, b in spans).replace("\n", "") == text.replace("\n", "")


def test_a_text_without_breaks_is_one_segment():
    assert segments("just one") == [(0, 8)]


def test_steps_a_sample_lists_are_used_as_given_and_named_when_they_are_not_there():
    text = "First, x = 2. Then y = 3. So 5."
    fields = {"solution_steps": ["First, x = 2.", "Then y = 3.", "So 5."]}
    options = StepOptions(field="solution_steps", max_steps=1)
    assert [text[a:b] for a, b in step_spans(text, fields, options)] == fields["solution_steps"]
    with pytest.raises(InvalidInput, match="solution_steps"):
        step_spans(text, {"solution_steps": ["So 5.", "First, x = 2."]}, options)
    with pytest.raises(InvalidInput, match="list of step texts"):
        step_spans(text, {"solution_steps": "First, x = 2."}, options)


def test_process_advantages_normalise_over_the_group_and_sum_to_go():
    group = [[1.0, 0.0], [0.0, -1.0, 1.0]]
    rewards = [1.0, 0.0, 0.0, -1.0, 1.0]
    mean = sum(rewards) / 5
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 4)
    z = [(r - mean) / std for r in rewards]
    advantages = process_advantages(group)
    assert advantages[0] == pytest.approx([z[0] + z[1], z[1]])
    assert advantages[1] == pytest.approx([z[2] + z[3] + z[4], z[3] + z[4], z[4]])


def test_process_advantages_are_zero_without_signal():
    assert process_advantages([[1.0, 1.0], [1.0]]) == [[0.0, 0.0], [0.0]]
