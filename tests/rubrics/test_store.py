import pickle

import pytest

from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.rubrics.store import Change, RubricStore, prompt_key


def test_versions_snapshots_and_history(tmp_path):
    store = RubricStore(tmp_path / "rubrics.sqlite")
    base = Rubric((Criterion("Answers the question", 1.0),))
    first = store.put("q1", base, step=0, reason="initial")
    added = Criterion("Cites a source", 0.7, provenance="elicited@step:1")
    second = store.apply("q1", [Change("add", added, reason="elicited")], step=1)
    third = store.apply(
        "q1",
        [
            Change("retire", criterion_id=base.criteria[0].id, reason="no variance"),
            Change("merge", Criterion("Cites sources", 0.7), added.id),
        ],
        step=2,
    )
    assert (first.version, second.version, third.version) == (1, 2, 3)
    assert [c.text for c in store.rubric("q1").criteria] == ["Cites a source"]
    assert [c.text for c in store.rubric("q1", version=2).criteria] == [
        "Answers the question",
        "Cites a source",
    ]
    assert store.rubric("q1", version=2).version == 2
    log = store.history("q1")
    assert [(r.version, r.step, r.action, r.criterion_id) for r in log] == [
        (1, 0, "set", None),
        (2, 1, "add", added.id),
        (3, 2, "retire", base.criteria[0].id),
        (3, 2, "merge", added.id),
    ]
    assert log[1].detail["criterion"]["provenance"] == "elicited@step:1"
    assert store.rubric("unknown") is None


def test_a_change_cannot_empty_a_rubric(tmp_path):
    store = RubricStore(tmp_path / "rubrics.sqlite")
    only = Criterion("Only one", 1.0)
    store.put("q", Rubric((only,)))
    with pytest.raises(ValueError, match="without criteria"):
        store.apply("q", [Change("retire", criterion_id=only.id)])
    assert store.rubric("q").version == 1


def test_two_handles_on_one_file_see_each_others_changes(tmp_path):
    path = tmp_path / "rubrics.sqlite"
    writer, reader = RubricStore(path), pickle.loads(pickle.dumps(RubricStore(path)))
    writer.put("q", Rubric((Criterion("A", 1.0),)))
    assert reader.rubric("q").version == 1
    writer.apply("q", [Change("add", Criterion("B", 1.0))])
    assert [c.text for c in reader.rubric("q").criteria] == ["A", "B"]
    assert reader.prompt_ids() == ["q"]


def test_prompt_keys_are_stable_and_distinct():
    assert prompt_key("What is 2+2?") == prompt_key("What is 2+2?") != prompt_key("What is 2+3?")
