import json
import re

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.judgebench import JudgeBench, category, combined_verdict, flip
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status


def pair(pair_id, source, label, **extra):
    return {
        "pair_id": pair_id,
        "original_id": 1,
        "source": source,
        "question": f"question {pair_id}",
        "response_model": "some-model",
        "response_A": f"A of {pair_id}",
        "response_B": f"B of {pair_id}",
        "label": label,
        **extra,
    }


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def items_of(*pairs):
    return [
        Item(
            id=pair_id,
            subset=subset,
            prompt="q",
            candidates=("a", "b"),
            gold={"label": label},
        )
        for pair_id, subset, label in pairs
    ]


def test_pairs_load_with_their_category_as_subset(tmp_path):
    data = write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            pair("p1", "mmlu-pro-law", "A>B"),
            pair("p2", "livebench-reasoning", "B>A"),
            pair("p3", "livebench-math", "A>B"),
            pair("p4", "livecodebench", "B>A"),
            pair("p5", "arena-hard", "A>B"),
        ],
    )
    items = JudgeBench().load(data)
    assert [item.subset for item in items] == ["knowledge", "reasoning", "math", "coding", "arena-hard"]
    first = items[0]
    assert (first.id, first.prompt, first.candidates) == ("p1", "question p1", ("A of p1", "B of p1"))
    assert first.gold == {"label": "A>B"}
    assert first.fields == {"source": "mmlu-pro-law"}
    assert [sample.id for sample in first.samples()] == ["p1#0", "p1#1"]


def test_the_category_is_the_source_prefix_run_judge_groups_by():
    assert category("mmlu-pro-computer science") == "knowledge"
    assert category("livebench-math") == "math"
    assert category("something-else") == "something-else"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {k: v for k, v in pair("p1", "livecodebench", "A>B").items() if k != "response_B"},
            r"'response_B': expected a string, got nothing \(missing\)",
        ),
        (pair("p1", "livecodebench", "A=B"), r"\(pair 'p1'\): field 'label': expected A>B or B>A, got 'A=B'"),
        ({**pair("p1", "livecodebench", "A>B"), "question": 7}, "field 'question': expected a string, got 7"),
    ],
)
def test_a_malformed_pair_names_the_file_line_and_field(tmp_path, record, message):
    data = write_jsonl(tmp_path / "pairs.jsonl", [pair("p0", "livecodebench", "B>A"), record])
    with pytest.raises(DataFormatError, match=rf"pairs\.jsonl, line 2\b.*{message}"):
        JudgeBench().load(data)


def test_a_repeated_pair_id_or_a_line_that_is_not_json_is_refused(tmp_path):
    twice = write_jsonl(tmp_path / "twice.jsonl", [pair("p1", "livecodebench", "A>B")] * 2)
    with pytest.raises(
        DataFormatError, match=re.escape("twice.jsonl, line 2: field 'pair_id': 'p1' appears twice")
    ):
        JudgeBench().load(twice)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=re.escape("broken.jsonl, line 1: not JSON")):
        JudgeBench().load(broken)
    with pytest.raises(DataFormatError, match="needs a data file"):
        JudgeBench().load(None)


def test_accuracy_per_category_and_over_all_pairs():
    items = items_of(
        ("k1", "knowledge", "A>B"),
        ("k2", "knowledge", "B>A"),
        ("m1", "math", "A>B"),
        ("m2", "math", "B>A"),
        ("c1", "coding", "A>B"),
        ("r1", "reasoning", "B>A"),
    )
    scores = {
        "k1": [Score(2.0), Score(1.0)],  # A higher, label A>B: right
        "k2": [Score(0.3), Score(0.3)],  # equal: a tie, wrong although the label is B>A
        "m1": [Score(0.0), Score(1.0)],  # B higher, label A>B: wrong
        "m2": [Score(0.5), Score.failure(Status.TIMEOUT, "slow")],  # a failed score: wrong
        # c1 has no scores at all: wrong, both candidates failed
        "r1": [Score(0.2), Score(0.9)],  # B higher, label B>A: right
    }
    result = JudgeBench().evaluate(items, scores)
    # Overall is over all 6 pairs (2 right), not the mean of the categories ((1/2 + 1 + 0 + 0) / 4).
    assert result.metrics == {"accuracy": pytest.approx(2 / 6), "ties": pytest.approx(1 / 6)}
    assert list(result.subsets) == ["knowledge", "reasoning", "math", "coding"]
    assert result.subsets["knowledge"] == {"items": 2, "accuracy": 0.5, "ties": 0.5}
    assert result.subsets["reasoning"] == {"items": 1, "accuracy": 1.0, "ties": 0.0}
    assert result.subsets["math"] == {"items": 2, "accuracy": 0.0, "ties": 0.0}
    assert result.subsets["coding"] == {"items": 1, "accuracy": 0.0, "ties": 0.0}
    assert result.failed == 3  # m2's B, and both of c1's
    # Chosen is the labelled winner's score: k1 A=2, k2 B=0.3, m1 A=0, r1 B=0.9.
    assert result.distributions == {"chosen": [2.0, 0.3, 0.0, 0.9], "rejected": [1.0, 0.3, 1.0, 0.2]}
    assert result.subset_figure == "accuracy"
    assert any("ties" in note for note in result.notes)


def test_a_category_the_reward_gets_all_right_scores_one():
    items = items_of(("a", "coding", "A>B"), ("b", "coding", "B>A"))
    result = JudgeBench().evaluate(items, {"a": [Score(1.0), Score(0.0)], "b": [Score(-3.0), Score(-1.0)]})
    assert result.subsets == {"coding": {"items": 2, "accuracy": 1.0, "ties": 0.0}}
    assert result.metrics["accuracy"] == 1.0
    assert result.failed == 0
    assert result.notes == []


def test_no_pairs_is_an_error():
    with pytest.raises(ValueError, match="no pairs"):
        JudgeBench().evaluate([], {})


def test_the_second_game_is_flipped_back_and_the_games_vote():
    assert flip("A>B") == "B>A"
    assert flip("B>A") == "A>B"
    assert flip("A=B") == "A=B"
    assert flip(None) is None
    assert combined_verdict(["A>B", "A>B"]) == "A>B"
    assert combined_verdict(["A>B", "B>A"]) == "tie"  # a split verdict
    assert combined_verdict(["A=B", "B>A"]) == "B>A"  # one tie, one vote
    assert combined_verdict([None, None]) == "tie"
    assert combined_verdict(["B>A"]) == "B>A"  # a single game


def judged(pair_id, label, *decisions):
    games = [None if decision == "raised" else {"decision": decision} for decision in decisions]
    return {**pair(pair_id, "livecodebench", label), "judge_name": "arena_hard", "judgments": games}


def test_published_judgments_reproduce_the_reference_count(tmp_path):
    # The second game judged (B, A); its decision is flipped back before comparing to the label.
    outputs = write_jsonl(
        tmp_path / "outputs.jsonl",
        [
            judged("q1", "A>B", "A>B", "B>A"),  # A>B, A>B: count +2, right
            judged("q2", "A>B", "A>B", "A>B"),  # A>B, B>A: count 0 (split), wrong
            judged("q3", "B>A", "A=B", "A>B"),  # A=B, B>A: count +1, right
            judged("q4", "A>B", "raised", None),  # no decision: count 0, wrong
            judged("q5", "B>A", "B>A"),  # one game (--single_game): B>A, right
            judged("q6", "A>B", "B>A", "A=B"),  # B>A, A=B: count -1, wrong
            judged("elsewhere", "A>B", "A>B", "B>A"),  # not among the items: ignored
        ],
    )
    labels = {"q1": "A>B", "q2": "A>B", "q3": "B>A", "q4": "A>B", "q5": "B>A", "q6": "A>B"}
    items = items_of(*((pair_id, "coding", label) for pair_id, label in labels.items()))
    bench = JudgeBench()
    scores = bench.published_scores(outputs, items)
    assert sorted(scores) == sorted(labels)
    values = {pair_id: [score.value for score in pair_scores] for pair_id, pair_scores in scores.items()}
    assert values == {
        "q1": [1.0, 0.0],
        "q2": [0.5, 0.5],
        "q3": [0.0, 1.0],
        "q4": [None, None],
        "q5": [0.0, 1.0],
        "q6": [0.0, 1.0],
    }
    assert scores["q4"][0].status is Status.PARSE_ERROR
    assert scores["q3"][0].details == {"decisions": ["A=B", "B>A"]}
    result = bench.evaluate(items, scores)
    assert result.metrics["accuracy"] == pytest.approx(3 / 6)  # q1, q3, q5
    assert result.failed == 2  # q4's two candidates


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({k: v for k, v in judged("q1", "A>B", "A>B").items() if k != "judgments"}, "'judgments': missing"),
        (
            judged("q1", "A>B", "A>B", "A>B", "A>B"),
            "'judgments': expected a list of 1 or 2 games, got a list of 3",
        ),
        ({**judged("q1", "A>B", "A>B"), "judgments": [{"verdict": "A>B"}]}, "each game needs a 'decision'"),
        (judged("q1", "B>A", "A>B"), "field 'label': 'B>A' here, 'A>B' in the data"),
    ],
)
def test_a_malformed_output_record_names_the_line_pair_and_field(tmp_path, record, message):
    outputs = write_jsonl(tmp_path / "outputs.jsonl", [record])
    with pytest.raises(DataFormatError, match=rf"outputs.jsonl, line 1 \(pair 'q1'\): .*{message}"):
        JudgeBench().published_scores(outputs, items_of(("q1", "coding", "A>B")))


def test_an_output_record_without_a_pair_id_is_refused(tmp_path):
    outputs = write_jsonl(tmp_path / "outputs.jsonl", [{"judgments": []}])
    with pytest.raises(
        DataFormatError,
        match=re.escape("outputs.jsonl, line 1: field 'pair_id': expected a string, got nothing (missing)"),
    ):
        JudgeBench().published_scores(outputs, items_of(("q1", "coding", "A>B")))
