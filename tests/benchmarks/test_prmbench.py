"""PRMBench: records hand-made in the layout of ssmisya/PRMBench's prmbench_Preview.jsonl, as
documented in docs/data_format.md and as in mr_eval/tasks/prmtest_classified_subset400/data/
target_data.jsonl (steps unnumbered, ``error_steps`` 1-based, ``idx`` shared by the records made
from one original solution)."""

import json

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.prmbench import PRMBench, reference_f1, step_confusion
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

QUESTION = (
    "Three pencils and a jumbo eraser cost $1.24. Five pencils and a jumbo eraser cost $1.82. What is p?"
)
ORIGINAL = ["We have $3p+e=1.24$ and $5p+e=1.82$.", "Subtracting gives $2p=0.58$.", "So $p=0.29$."]


def record(idx, classification, modified_process, error_steps, modified_question=QUESTION):
    return {
        "original_question": QUESTION,
        "modified_question": modified_question,
        "original_process": ORIGINAL,
        "modified_process": modified_process,
        "modified_steps": error_steps,
        "error_steps": error_steps,
        "reason": "hand-made",
        "idx": idx,
        "question": QUESTION,
        "classification": classification,
    }


RECORDS = [
    record(
        "p0",
        "redundency",
        [ORIGINAL[0], "Subtracting gives $2p=0.58$.", "Let us subtract again: $2p=0.58$.", "So $p=0.29$."],
        [3],
    ),
    record("p0", "confidence", [ORIGINAL[0], "Subtracting gives $2p=0.68$.", "So $p=0.34$."], [2, 3]),
    record("p1", "multi_solutions", ["Try $p=0.29$: $3(0.29)+e=1.24$.", "It checks out: $p=0.29$."], []),
    # The same category and idx again: the reference keeps the first.
    record("p0", "confidence", ["x"], [1]),
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def stepped(*values):
    return [Score(value=min(values), steps=list(values))]


def test_each_record_is_an_item_and_redundency_records_bring_the_original(tmp_path):
    items = PRMBench().load(write_jsonl(tmp_path / "prmbench_Preview.jsonl", RECORDS))
    assert [(i.id, i.subset) for i in items] == [
        ("redundency_p0", "redundency"),
        ("correct_p0", "correct"),
        ("confidence_p0", "confidence"),
        ("multi_solutions_p1", "multi_solutions"),
    ]
    confidence = items[2]
    assert confidence.prompt == QUESTION
    assert confidence.candidates == ("\n\n".join(RECORDS[1]["modified_process"]),)
    assert confidence.fields == {"steps": RECORDS[1]["modified_process"]}
    assert confidence.gold == {"error_steps": [2, 3]}
    assert items[1].fields == {"steps": ORIGINAL}
    assert items[1].gold == {"error_steps": []}


def test_a_directory_of_jsonl_files_and_a_saved_dataset_read_the_same(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", RECORDS[:2])
    write_jsonl(tmp_path / "b.jsonl", RECORDS[2:])
    from_dir = PRMBench().load(tmp_path)
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "saved"))
    assert [i.id for i in PRMBench().load(tmp_path / "saved")] == [i.id for i in from_dir]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("error_steps", None, r"line 2 \(idx 'p0'\): field 'error_steps': .* got nothing \(missing\)"),
        (
            "error_steps",
            [0, 2],
            "field 'error_steps': expected a list of 1-based step numbers, got \\[0, 2\\]",
        ),
        (
            "modified_process",
            [],
            "field 'modified_process': expected a non-empty list of strings, got \\[\\]",
        ),
        ("classification", None, "field 'classification': expected a string, got nothing"),
        ("idx", None, "line 2: field 'idx'"),
    ],
)
def test_a_malformed_record_is_named_with_its_line_and_field(tmp_path, field, value, message):
    bad = dict(RECORDS[1])
    if value is None:
        del bad[field]
    else:
        bad[field] = value
    path = write_jsonl(tmp_path / "prmbench_Preview.jsonl", [RECORDS[0], bad])
    with pytest.raises(DataFormatError, match=message) as error:
        PRMBench().load(path)
    assert str(path) in str(error.value)


def test_the_original_process_is_checked_where_it_is_read(tmp_path):
    bad = {**RECORDS[0], "original_process": "one string"}
    with pytest.raises(DataFormatError, match="field 'original_process'"):
        PRMBench().load(write_jsonl(tmp_path / "p.jsonl", [bad]))


def test_unreadable_paths_are_refused(tmp_path):
    with pytest.raises(DataFormatError, match=r"give prmbench_Preview\.jsonl"):
        PRMBench().load(None)
    with pytest.raises(DataFormatError, match="no such file or directory"):
        PRMBench().load(tmp_path / "absent.jsonl")
    with pytest.raises(DataFormatError, match=r"no \.jsonl files"):
        PRMBench().load(tmp_path)
    (tmp_path / "p.jsonl").write_text("{\n")
    with pytest.raises(DataFormatError, match="line 1: not JSON"):
        PRMBench().load(tmp_path / "p.jsonl")


def test_the_reference_f1_keeps_its_minus_one_for_empty_classes():
    assert reference_f1(2, 0, 1) == pytest.approx(0.8)  # precision 1, recall 2/3
    assert reference_f1(0, 0, 0) == -1  # precision -1, recall -1: 2 * 1 / -2
    assert reference_f1(0, 0, 3) == 0  # precision -1, recall 0: 0 / -1
    assert reference_f1(0, 2, 1) == -1  # precision 0, recall 0: the sum is 0


def test_steps_are_counted_with_right_steps_as_the_positive_class():
    counts = step_confusion([3], [True, True, False, False])
    # Steps 1, 2 right and predicted right (TP); step 3 wrong, predicted wrong (TN); step 4 right,
    # predicted wrong (FN).
    assert (counts.tp, counts.fp, counts.tn, counts.fn) == (2, 0, 1, 1)


def test_prmscore_per_category_and_over_all_but_the_originals(tmp_path):
    items = PRMBench().load(write_jsonl(tmp_path / "p.jsonl", RECORDS))
    scores = {
        # Above 0.5 is right: T T F F (0.5 is not above) -> TP 2, TN 1, FN 1.
        "redundency_p0": stepped(0.9, 0.6, 0.4, 0.5),
        # T F T -> TP 2, FN 1, no error steps.
        "correct_p0": stepped(0.8, 0.3, 0.9),
        # Failed: every step mispredicted -> step 1 FN, steps 2 and 3 FP.
        "confidence_p0": [Score.failure(Status.PARSE_ERROR, "no verdict")],
        # T T -> TP 2, no error steps.
        "multi_solutions_p1": stepped(0.7, 0.9),
    }
    result = PRMBench().evaluate(items, scores)
    redundency = result.subsets["redundency"]
    # F1: precision 2/2, recall 2/3 -> 0.8. Negative: precision 1/2, recall 1/1 -> 2/3.
    assert redundency["f1"] == pytest.approx(0.8)
    assert redundency["negative_f1"] == pytest.approx(2 / 3)
    assert redundency["prmscore"] == pytest.approx(0.4 + 1 / 3)
    assert redundency["score"] == redundency["prmscore"]
    # confidence: F1 precision 0/2, recall 0/1 -> sum 0 -> -1; negative precision 0/1, recall
    # 0/2 -> -1. PRMScore -1, as the reference computes it.
    assert result.subsets["confidence"]["prmscore"] == -1
    # multi_solutions: F1 1; negative precision and recall -1 -> 2 * 1 / -2 = -1; PRMScore 0,
    # but the leaderboard's figure is the F1.
    multi = result.subsets["multi_solutions"]
    assert (multi["f1"], multi["negative_f1"], multi["prmscore"], multi["score"]) == (1.0, -1.0, 0.0, 1.0)
    # correct: F1 precision 1, recall 2/3 -> 0.8; negative precision 0/1, recall -1 -> 0.
    assert result.subsets["correct"]["score"] == pytest.approx(0.8)
    assert result.subsets["correct"]["negative_f1"] == 0
    # Totals without the originals: TP 2+0+2 = 4, FP 2, TN 1, FN 1+1 = 2.
    # F1: precision 4/6, recall 4/6 -> 2/3. Negative: precision 1/3, recall 1/3 -> 1/3.
    assert result.metrics["f1"] == pytest.approx(2 / 3)
    assert result.metrics["negative_f1"] == pytest.approx(1 / 3)
    assert result.metrics["prmscore"] == pytest.approx(0.5)
    assert result.failed == 1
    assert result.subset_figure == "score"
    assert result.distributions == {
        "right steps": [0.9, 0.6, 0.5, 0.8, 0.3, 0.9, 0.7, 0.9],
        "error steps": [0.4],
    }
    assert "no simplicity average: no items of circular" in result.notes


def test_mismatched_or_missing_step_scores_count_every_step_wrong():
    items = [
        Item(
            id="a",
            subset="deception",
            prompt="q",
            candidates=("s1\n\ns2",),
            gold={"error_steps": [2]},
            fields={"steps": ["s1", "s2"]},
        ),
        Item(
            id="b",
            subset="deception",
            prompt="q",
            candidates=("s1",),
            gold={"error_steps": [1]},
            fields={"steps": ["s1"]},
        ),
    ]
    result = PRMBench().evaluate(items, {"a": stepped(0.9, 0.1, 0.1)})  # three scores, b missing
    # a: step 1 FN, step 2 FP; b: step 1 FP. F1: TP 0 -> precision 0/2, recall 0/1 -> -1.
    assert result.failed == 2
    assert result.subsets["deception"]["f1"] == -1


def test_category_groups_average_the_leaderboard_figures():
    categories = [
        c
        for group in (
            "redundency circular",
            "counterfactual step_contradiction domain_inconsistency confidence",
            "missing_condition deception multi_solutions",
        )
        for c in group.split()
    ]
    items, scores = [], {}
    for category in categories:
        error_steps = [] if category == "multi_solutions" else [2]
        items.append(
            Item(
                id=category,
                subset=category,
                prompt="q",
                candidates=("s1\n\ns2",),
                gold={"error_steps": error_steps},
                fields={"steps": ["s1", "s2"]},
            )
        )
        scores[category] = stepped(0.9, 0.1)  # step 2 flagged: right everywhere but multi_solutions
    scores["redundency"] = stepped(0.9, 0.9)  # step 2 missed
    scores["multi_solutions"] = stepped(0.9, 0.9)
    result = PRMBench().evaluate(items, scores)
    # redundency: TP 1, FP 1 -> F1 2/3 (precision 1/2, recall 1); negative: precision -1
    # (TN + FN = 0), recall 0 -> 0. PRMScore 1/3. Every other error category: TP 1, TN 1 -> 1.
    # multi_solutions: TP 2 -> F1 1 (its PRMScore, 0, is not what the leaderboard shows).
    assert result.metrics["simplicity"] == pytest.approx((1 / 3 + 1) / 2)
    assert result.metrics["soundness"] == pytest.approx(1.0)
    assert result.metrics["sensitivity"] == pytest.approx(1.0)
    assert result.subsets["multi_solutions"]["prmscore"] == 0.0
