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


def test_only_changes_that_take_effect_are_logged_and_merges_keep_the_version(tmp_path):
    store = RubricStore(tmp_path / "rubrics.sqlite")
    a = Criterion("A", 1.0)
    store.put("q", Rubric((a,), metadata={"source": "generated:reference"}))
    same = store.apply("q", [Change("add", a), Change("merge", Criterion("A!", 1.0), a.id, "overlap")])
    assert same.version == 1 and same.metadata == {"source": "generated:reference"}
    assert [(r.version, r.action) for r in store.history("q")] == [(1, "set"), (1, "merge")]
    gone = store.apply("q", [Change("retire", criterion_id="c-missing")])
    assert gone.version == 1 and len(store.history("q")) == 2


def test_writers_in_several_processes_keep_every_change(tmp_path):
    """Each process adds its own criteria through its own handle; the latest version is read
    inside the writing transaction, so none is lost."""
    import multiprocessing

    path = tmp_path / "rubrics.sqlite"
    RubricStore(path).put("q", Rubric((Criterion("seed", 1.0),)))
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    workers = [context.Process(target=_add_many, args=(str(path), name, start)) for name in "xyz"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    texts = {c.text for c in RubricStore(path).rubric("q").criteria}
    assert texts == {"seed"} | {f"{name}{i}" for name in "xyz" for i in range(30)}
    assert RubricStore(path).rubric("q").version == 91


def _add_many(path, name, start):
    store = RubricStore(path)
    store.rubric("q")  # connected before the race starts
    start.wait()
    for i in range(30):
        store.apply("q", [Change("add", Criterion(f"{name}{i}", 1.0))])
