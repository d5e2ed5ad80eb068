import json

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.processbench import ProcessBench, evaluate_first_errors
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status


def record(record_id, steps, label, problem="What is 2 + 2?"):
    """A record in QwenLM/ProcessBench's dataset/<split>.json layout."""
    return {
        "id": record_id,
        "generator": "hand-written",
        "problem": problem,
        "steps": steps,
        "final_answer_correct": label == -1,
        "label": label,
    }


def write_split(path, records):
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def item(item_id, subset, steps, label):
    return Item(
        id=item_id,
        subset=subset,
        prompt="p",
        candidates=("\n\n".join(steps),),
        gold={"label": label},
        fields={"steps": steps},
    )


def stepped(*values):
    return [Score(value=min(values), steps=list(values))]


def test_a_split_file_becomes_one_item_per_record(tmp_path):
    path = write_split(
        tmp_path / "gsm8k.json",
        [record("gsm8k-0", ["2 + 2 = 5.", "So 5."], 0), record("gsm8k-1", ["2 + 2 = 4.", "So 4."], -1)],
    )
    items = ProcessBench().load(path)
    assert [i.id for i in items] == ["gsm8k-0", "gsm8k-1"]
    first = items[0]
    assert first.subset == "gsm8k"  # the file's stem
    assert first.prompt == "What is 2 + 2?"
    assert first.candidates == ("2 + 2 = 5.\n\nSo 5.",)
    assert first.fields == {"steps": ["2 + 2 = 5.", "So 5."]}
    assert first.gold == {"label": 0}
    assert first.samples()[0].fields["steps"] == ["2 + 2 = 5.", "So 5."]


def test_a_directory_is_one_split_per_file(tmp_path):
    write_split(tmp_path / "math.json", [record("math-0", ["a"], -1)])
    write_split(tmp_path / "gsm8k.json", [record("gsm8k-0", ["a"], 0)])
    (tmp_path / "notes.txt").write_text("not a split")
    items = ProcessBench().load(tmp_path)
    assert [(i.id, i.subset) for i in items] == [("gsm8k-0", "gsm8k"), ("math-0", "math")]


def test_a_saved_dataset_is_read_split_by_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict(
        {
            "gsm8k": datasets.Dataset.from_list([record("gsm8k-0", ["a", "b"], 1)]),
            "math": datasets.Dataset.from_list([record("math-0", ["c"], -1)]),
        }
    ).save_to_disk(str(tmp_path / "saved"))
    items = ProcessBench().load(tmp_path / "saved")
    assert [(i.id, i.subset, i.gold["label"]) for i in items] == [
        ("gsm8k-0", "gsm8k", 1),
        ("math-0", "math", -1),
    ]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ({"steps": None}, r"record 1 \(id 'gsm8k-1'\): field 'steps': expected a non-empty list of strings"),
        ({"steps": []}, "field 'steps'"),
        ({"label": 2}, r"field 'label': expected -1 or a step index below 2, got 2"),
        ({"label": True}, "field 'label'"),
        ({"problem": 3}, "field 'problem': expected a string, got 3"),
    ],
)
def test_a_malformed_record_is_named_with_its_field(tmp_path, broken, message):
    bad = {**record("gsm8k-1", ["a", "b"], -1), **broken}
    path = write_split(tmp_path / "gsm8k.json", [record("gsm8k-0", ["a"], -1), bad])
    with pytest.raises(DataFormatError, match=message) as error:
        ProcessBench().load(path)
    assert str(path) in str(error.value)


def test_a_missing_field_is_named_as_missing(tmp_path):
    bad = record("gsm8k-0", ["a"], -1)
    del bad["label"]
    path = write_split(tmp_path / "gsm8k.json", [bad])
    with pytest.raises(
        DataFormatError, match=r"record 0 \(id 'gsm8k-0'\): field 'label': .* got nothing \(missing\)"
    ):
        ProcessBench().load(path)
    del bad["id"]
    write_split(path, [bad])
    with pytest.raises(DataFormatError, match="record 0: field 'id'"):
        ProcessBench().load(path)


def test_files_that_are_not_processbench_are_refused(tmp_path):
    with pytest.raises(DataFormatError, match=r"give a dataset/<split>\.json file"):
        ProcessBench().load(None)
    with pytest.raises(DataFormatError, match="no such file or directory"):
        ProcessBench().load(tmp_path / "absent.json")
    with pytest.raises(DataFormatError, match=r"no \.json files in this directory"):
        ProcessBench().load(tmp_path)
    (tmp_path / "gsm8k.json").write_text('{"id": "gsm8k-0"}')
    with pytest.raises(
        DataFormatError,
        match=r"gsm8k\.json: expected a list of records or an object of columns, got an object without",
    ):
        ProcessBench().load(tmp_path / "gsm8k.json")
    (tmp_path / "gsm8k.json").write_text("[{")
    with pytest.raises(DataFormatError, match="not JSON"):
        ProcessBench().load(tmp_path / "gsm8k.json")
    write_split(tmp_path / "gsm8k.json", [record("x", ["a"], -1)])
    write_split(tmp_path / "math.json", [record("x", ["a"], -1)])
    with pytest.raises(DataFormatError, match="id 'x' occurs more than once"):
        ProcessBench().load(tmp_path)


# Two splits used by the metric tests below.
SPLIT_A = [
    item("a1", "a", ["s1", "s2", "s3"], 1),
    item("a2", "a", ["s1", "s2"], -1),
    item("a3", "a", ["s1", "s2"], 0),
    item("a4", "a", ["s1", "s2"], -1),
]
SPLIT_B = [item("b1", "b", ["s1", "s2"], 0), item("b2", "b", ["s1", "s2"], -1)]
SCORES = {
    "a1": stepped(0.9, 0.2, 0.8),
    "a2": stepped(0.9, 0.5),
    "a3": stepped(0.7, 0.1),
    "a4": [Score.failure(Status.TIMEOUT, "too slow")],
    "b1": stepped(0.1, 0.9),
    "b2": stepped(0.6, 0.7),
}


def test_a_fixed_threshold_scores_each_split_and_averages_their_f1():
    result = ProcessBench().evaluate(SPLIT_A + SPLIT_B, SCORES)
    # a: a1 flags step 1 (right), a3 flags step 1 (label 0: wrong) -> errors 1/2; a2's 0.5 is
    # not below 0.5 so nothing is flagged (right), a4 failed (wrong) -> correct 1/2; F1 0.5.
    assert result.subsets["a"] == {"error_accuracy": 0.5, "correct_accuracy": 0.5, "f1": 0.5, "items": 4.0}
    # b: b1 flags step 0 (right), b2 nothing (right): F1 1.
    assert result.subsets["b"]["f1"] == 1.0
    assert result.metrics == {"f1": pytest.approx((0.5 + 1.0) / 2)}
    assert result.failed == 1
    assert result.subset_figure == "f1"
    assert result.notes == ["threshold 0.5 (fixed)"]
    # Steps before the first error: a1 0.9; a2 0.9, 0.5; a3 none; b1 none; b2 0.6, 0.7.
    # First wrong steps: a1 0.2, a3 0.7, b1 0.1.
    assert result.distributions == {
        "steps before the first error": [0.9, 0.9, 0.5, 0.6, 0.7],
        "first wrong steps": [0.2, 0.7, 0.1],
    }


def test_without_a_threshold_each_split_is_scored_at_one_chosen_on_the_others():
    result = ProcessBench(threshold=None).evaluate(SPLIT_A + SPLIT_B, SCORES)
    # For a, on b: b1 is right for t > 0.1, b2 for t <= 0.6; the lowest best candidate is 0.6.
    # At 0.6, a1 flags step 1 (right), a2 flags step 1 (0.5 < 0.6: wrong), a3 flags step 1
    # (wrong), a4 failed: errors 1/2, correct 0/2, F1 0.
    # For b, on a (a4 failed and is left out): a1 is right for 0.2 < t <= 0.9, a2 for t <= 0.5,
    # a3 for t > 0.7; at 0.5 errors 1/2 and correct 1/1 give F1 2/3, the best.
    # At 0.5 both b items are right: F1 1.
    assert result.notes == ["a: threshold 0.6 chosen on b", "b: threshold 0.5 chosen on a"]
    assert result.subsets["a"]["f1"] == 0.0
    assert result.subsets["b"]["f1"] == 1.0
    assert result.metrics["f1"] == pytest.approx(0.5)


def test_choosing_a_threshold_needs_another_split():
    with pytest.raises(ValueError, match=r"there is only one split \('a'\): give a threshold"):
        ProcessBench(threshold=None).evaluate(SPLIT_A, SCORES)


def test_a_validation_subset_chooses_the_threshold_and_is_not_reported():
    validation = [
        item(f"v{i}", "validation", ["s1", "s2"], row.gold["label"]) for i, row in enumerate(SPLIT_B)
    ]
    scores = {**SCORES, "v0": SCORES["b1"], "v1": SCORES["b2"]}
    result = ProcessBench(threshold=None, validation_subset="validation").evaluate(
        SPLIT_A + validation, scores
    )
    # Chosen on the validation items (b's scores): 0.6, which gives a an F1 of 0 (above).
    assert result.notes == ["threshold 0.6 chosen on subset 'validation'"]
    assert list(result.subsets) == ["a"]
    assert result.metrics["f1"] == 0.0
    with pytest.raises(ValueError, match="validation subset 'dev' has no items"):
        ProcessBench(validation_subset="dev").evaluate(SPLIT_A, SCORES)


def test_missing_or_mismatched_step_scores_count_as_wrong_and_failed():
    items = [item("c1", "c", ["s1", "s2"], 1), item("c2", "c", ["s1"], -1), item("c3", "c", ["s1"], 0)]
    scores = {
        "c1": stepped(0.9, 0.1, 0.1),  # three scores for two steps
        "c2": [Score(value=0.9)],  # no step scores
        # c3 missing
    }
    result = evaluate_first_errors("x", items, scores, threshold=0.5)
    assert result.failed == 3
    assert result.subsets["c"]["f1"] == 0.0  # nothing right: errors 0/2, correct 0/1
    assert result.notes[-1].startswith(
        "1 candidate(s) had a number of step scores other than their given steps"
    )


def test_a_split_without_erroneous_items_has_an_f1_of_zero():
    # ProcessBench's halves are both present in every split; a split of correct items only
    # has an error accuracy of 0 and so an F1 of 0, however well it is scored.
    items = [item("d1", "d", ["s1"], -1)]
    result = ProcessBench().evaluate(items, {"d1": stepped(0.9)})
    assert result.subsets["d"] == {"error_accuracy": 0.0, "correct_accuracy": 1.0, "f1": 0.0, "items": 1.0}


def test_a_split_whose_threshold_cannot_be_chosen_counts_all_wrong():
    scores = {**SCORES, "b1": [Score.failure(Status.ERROR, "x")], "b2": [Score.failure(Status.ERROR, "x")]}
    result = ProcessBench(threshold=None).evaluate(SPLIT_A + SPLIT_B, scores)
    assert result.notes[0].startswith("a: threshold none (every item it would be chosen on failed")
    assert result.subsets["a"]["error_accuracy"] == 0.0
    assert result.subsets["a"]["correct_accuracy"] == 0.0
