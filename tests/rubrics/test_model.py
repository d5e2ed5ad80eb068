import pytest

from rewardlab.errors import RubricError
from rewardlab.rubrics.model import CATEGORY_WEIGHTS, Criterion, Rubric, criterion_id


def test_criteria_from_our_format_and_healthbenchs():
    rubric = Rubric.from_data(
        [
            {"text": "States the dose", "weight": 5, "category": "accuracy"},
            {
                "criterion": "Recommends seeing a doctor",
                "points": 3,
                "tags": ["axis:completeness", "level:example"],
            },
            {"text": "Invents a study", "category": "pitfall"},
            {
                "text": "Explains clearly",
                "weight": 1,
                "choices": [
                    {"label": "fully", "value": 1},
                    {"label": "partly", "value": 0.5},
                    {"label": "no", "value": 0},
                ],
            },
        ]
    )
    first, second, third, fourth = rubric.criteria
    assert (first.weight, first.category) == (5.0, "accuracy")
    assert (second.text, second.weight, second.category) == (
        "Recommends seeing a doctor",
        3.0,
        "completeness",
    )
    assert third.weight == CATEGORY_WEIGHTS["pitfall"] and third.is_pitfall
    assert [c.value for c in fourth.choices] == [1.0, 0.5, 0.0]
    assert rubric.positive_weight == 9.0


def test_ids_are_stable_across_spacing_and_case():
    assert criterion_id("States the dose") == criterion_id("  states   the DOSE ")
    assert criterion_id("States the dose") != criterion_id("States the route")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([{"text": "", "weight": 1}], r"rubric\[0\]\.text"),
        ([{"text": "x", "weight": 0}], r"rubric\[0\]\.weight: must be a finite non-zero"),
        ([{"text": "x", "weight": float("nan")}], r"weight"),
        ([{"text": "x", "weight": True}], r"weight"),
        ([{"text": "x"}], r"weight: missing"),
        ([{"text": "x", "weight": 1, "choices": [{"label": "a", "value": 1}]}], r"choices"),
        (
            [{"text": "x", "weight": 1, "choices": [{"label": "a", "value": 2}, {"label": "b", "value": 0}]}],
            r"value",
        ),
        (
            [{"text": "x", "weight": 1, "choices": [{"label": "a", "value": 1}, {"label": "A", "value": 0}]}],
            r"differ",
        ),
        ([{"text": "x", "weight": 1}, {"text": "X", "weight": 2}], r"unique"),
        ([], r"at least one criterion"),
        ("not json", r"not JSON"),
        (5, r"expected a list"),
    ],
)
def test_bad_rubrics_name_the_entry_and_field(data, problem):
    with pytest.raises(RubricError, match=problem):
        Rubric.from_data(data)


def test_a_dataset_column_may_hold_json_text():
    rubric = Rubric.from_data('{"id": "q1", "criteria": [{"text": "Mentions 42", "weight": 2}]}')
    assert rubric.id == "q1" and rubric.criteria[0].text == "Mentions 42"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_save_and_load_round_trip(tmp_path, suffix):
    rubric = Rubric(
        (
            Criterion("Gives the answer", 2.0, category="essential"),
            Criterion("Rambles", -1.0, provenance="elicited@step:3"),
        ),
        id="q7",
    )
    path = tmp_path / f"rubric{suffix}"
    rubric.save(path)
    assert Rubric.load(path) == rubric


def test_unreadable_files_say_so(tmp_path):
    with pytest.raises(RubricError, match="cannot read"):
        Rubric.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("criteria: [unclosed")
    with pytest.raises(RubricError, match="not valid"):
        Rubric.load(bad)


def test_missing_struct_fields_from_a_dataset_column_are_absent_not_invalid():
    # Arrow fills a struct's absent fields with None.
    rubric = Rubric.from_data(
        [
            {"text": "States the dose", "weight": 5, "id": None, "category": None, "provenance": None},
            {"text": None, "criterion": "Suggests a doctor", "points": 3, "weight": None, "choices": None},
        ]
    )
    first, second = rubric.criteria
    assert first.id == criterion_id("States the dose") and first.provenance == "hand-written"
    assert (second.text, second.weight) == ("Suggests a doctor", 3.0)


def test_a_pitfall_with_a_positive_weight_is_refused():
    with pytest.raises(RubricError, match=r"rubric\[0\]\.weight: a pitfall's weight is negative"):
        Rubric.from_data([{"text": "Invents a study", "category": "pitfall", "weight": 0.9}])


def test_metadata_is_kept(tmp_path):
    rubric = Rubric((Criterion("A", 1.0),), metadata={"source": "generated:reference"})
    rubric.save(tmp_path / "r.json")
    assert Rubric.load(tmp_path / "r.json").metadata == {"source": "generated:reference"}
