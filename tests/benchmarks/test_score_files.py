import json

import pytest

from rewardlab.benchmarks.score_files import read_score_file
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Status


def write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_candidate_records_are_gathered_per_item_in_candidate_order(tmp_path):
    path = write_lines(
        tmp_path / "scores.jsonl",
        [
            {"id": "q1#1", "value": 0.25, "status": "ok"},
            {"id": "q1#0", "value": 0.75, "status": "ok", "steps": [0.9, 0.75]},
            {"id": "q2#0", "value": None, "status": "timeout", "reason": "judge too slow"},
            {"id": "q#2#0", "value": 3},  # ids may contain '#': only the last one separates
        ],
    )
    scores = read_score_file(path)
    assert [s.value for s in scores["q1"]] == [0.75, 0.25]
    assert scores["q1"][0].steps == [0.9, 0.75]
    assert scores["q2"][0].status is Status.TIMEOUT and scores["q2"][0].reason == "judge too slow"
    assert scores["q#2"][0].value == 3.0


def test_a_rescored_candidate_keeps_its_last_record_and_a_gap_is_a_failure(tmp_path):
    path = write_lines(
        tmp_path / "scores.jsonl",
        [
            {"id": "q#0", "value": None, "status": "backend_error", "reason": "503"},
            {"id": "q#0", "value": 1.0, "status": "ok"},
            {"id": "q#2", "value": 2.0},
        ],
    )
    scores = read_score_file(path)["q"]
    assert scores[0].value == 1.0
    assert not scores[1].ok and scores[1].reason == "no score in the score file"
    assert scores[2].value == 2.0


def test_item_records_take_numbers_step_lists_and_nulls(tmp_path):
    path = write_lines(tmp_path / "items.jsonl", [{"id": "q", "scores": [1, [0.9, 0.2, 0.6], None]}])
    first, second, third = read_score_file(path)["q"]
    assert first.value == 1.0 and first.steps is None
    # A step list's value is its weakest step.
    assert second.value == 0.2 and second.steps == [0.9, 0.2, 0.6]
    assert not third.ok


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"line 2: not JSON"),
        ('{"value": 1}', r"line 2: field 'id'"),
        ('{"id": "q#0", "status": "great", "value": 1}', r"line 2: field 'status': unknown status 'great'"),
        ('{"id": "q#0", "value": "high"}', r"line 2: field 'value': expected a finite number"),
        ('{"id": "q#0", "value": NaN}', r"line 2: field 'value'"),
        ('{"id": "q#0", "value": 1, "steps": [1, "x"]}', r"line 2: field 'steps'"),
        ('{"id": "q", "value": 1}', r"line 2: field 'id': 'q' is not a candidate id"),
        ('{"id": "q", "scores": 3}', r"line 2: field 'scores': expected a list"),
        ('{"id": "q", "scores": [1, "x"]}', r"line 2: field 'scores'\[1\]"),
        ('{"id": "q", "scores": [[]]}', r"line 2: field 'scores'\[0\]"),
    ],
)
def test_a_malformed_record_is_refused_naming_its_line_and_field(tmp_path, line, message):
    path = write_lines(tmp_path / "scores.jsonl", [{"id": "ok#0", "value": 1}, line])
    with pytest.raises(DataFormatError, match=message):
        read_score_file(path)


def test_a_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(DataFormatError, match=r"missing\.jsonl"):
        read_score_file(tmp_path / "missing.jsonl")
