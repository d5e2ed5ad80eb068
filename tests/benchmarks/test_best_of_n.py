import json
import re

import pytest

from rewardlab.benchmarks.best_of_n import BestOfN, majority_right, selection_value
from rewardlab.benchmarks.items import Item
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def problem(item_id, subset, correct, answers=None):
    gold = {"correct": correct} if answers is None else {"correct": correct, "answers": answers}
    return Item(id=item_id, subset=subset, prompt="p", candidates=tuple("xyz"[: len(correct)]), gold=gold)


def values(*numbers):
    return [Score.failure(Status.ERROR, "boom") if number is None else Score(number) for number in numbers]


ITEMS = [
    problem("a", "s1", [False, True, True], ["1", "2", "2"]),
    problem("b", "s1", [True, False, False], ["7", "8", "8"]),
    problem("c", "s2", [False, False, True], ["x", "y", "z"]),
]
SCORES = {
    "a": values(0.5, 0.9, 0.9),
    "b": values(0.2, 0.1, 0.3),
    "c": values(1.0, None, 3.0),
}


def test_curves_over_n_averaged_over_subsets():
    # a: best-of n=1 picks 0 (wrong); n=2 picks 1 (0.9, right); n=3 ties 0.9 at 1 and 2, the
    #    first (1) is picked: right. pass: F T T. majority: n=1 "1" (wrong); n=2 "1" and "2"
    #    tie, "1" came first (wrong); n=3 "2" twice, its first is 1 (right).
    # b: best-of n=1 picks 0 (right); n=2 0 (0.2 > 0.1, right); n=3 2 (0.3, wrong). pass: T T T.
    #    majority: "7"; "7" (tie, first seen); "8" twice, first at 1 (wrong).
    # c: the failed score at 1 makes best-of wrong from n=2; n=1 picks 0 (wrong). pass: F F T.
    #    majority: "x" each time (all once, first seen), wrong.
    # s1 = {a, b}: best-of [1/2, 2/2, 1/2], pass [1/2, 2/2, 2/2], majority [1/2, 1/2, 1/2].
    # s2 = {c}: best-of [0, 0, 0], pass [0, 0, 1], majority [0, 0, 0].
    # Averaged over the two subsets (not over the three items):
    result = BestOfN().evaluate(ITEMS, SCORES)
    assert result.curves == {
        "best-of-n": [0.25, 0.5, 0.25],
        "pass@n": [0.25, 0.5, 1.0],
        "majority@n": [0.25, 0.25, 0.25],
    }
    assert result.metrics == {"best-of-3": 0.25, "pass@3": 1.0, "majority@3": 0.25}
    assert result.subsets == {
        "s1": {"items": 2, "best-of-3": 0.5, "pass@3": 1.0, "majority@3": 0.5},
        "s2": {"items": 1, "best-of-3": 0.0, "pass@3": 1.0, "majority@3": 0.0},
    }
    assert result.failed == 1
    assert result.subset_figure == "best-of-3"
    # Correct candidates: a1 0.9, a2 0.9, b0 0.2, c2 3.0; the failed c1 has no value.
    assert sorted(result.distributions["correct"]) == [0.2, 0.9, 0.9, 3.0]
    assert sorted(result.distributions["incorrect"]) == [0.1, 0.3, 0.5, 1.0]
    assert any("1 candidates had no usable score" in note for note in result.notes)


def test_a_missing_item_is_wrong_for_best_of_n_only():
    items = [problem("a", "s", [True, True], ["1", "1"])]
    result = BestOfN().evaluate(items, {})
    assert result.curves == {"best-of-n": [0.0, 0.0], "pass@n": [1.0, 1.0], "majority@n": [1.0, 1.0]}
    assert result.failed == 2


def test_all_correct_candidates_score_one_everywhere():
    items = [problem("a", "s", [True, True, True], ["4", "four", "4.0"])]
    result = BestOfN().evaluate(items, {"a": values(0.1, 0.1, 0.1)})
    assert result.curves == {"best-of-n": [1.0] * 3, "pass@n": [1.0] * 3, "majority@n": [1.0] * 3}
    assert result.failed == 0


def test_without_extracted_answers_there_is_no_majority():
    items = [problem("a", "s", [False, True])]
    result = BestOfN().evaluate(items, {"a": values(0.0, 1.0)})
    assert result.curves == {"best-of-n": [0.0, 1.0], "pass@n": [0.0, 1.0]}
    assert result.metrics == {"best-of-2": 1.0, "pass@2": 1.0}
    assert "no majority@n: some items have no extracted answers" in result.notes


def test_majority_ties_go_to_the_answer_seen_first():
    # Counter.most_common(1) keeps the first-inserted of equal counts.
    assert majority_right(["b", "a", "a", "b"], [True, False, False, True]) is True
    assert majority_right(["a", "b", "b", "a"], [True, False, False, True]) is True
    assert majority_right(["a", "b"], [False, True]) is False


def test_n_limits_the_candidates_and_must_not_exceed_any_item():
    items = [problem("a", "s", [False, True, True]), problem("b", "s", [True, False])]
    scores = {"a": values(0.0, 1.0, 2.0), "b": values(1.0, 0.0)}
    # Default n is the fewest candidates, 2: a picks 1 (right), b picks 0 (right).
    assert BestOfN().evaluate(items, scores).curves["best-of-n"] == [0.5, 1.0]
    assert BestOfN(n=1).evaluate(items, scores).metrics == {"best-of-1": 0.5, "pass@1": 0.5}
    with pytest.raises(ValueError, match="item 'b' has 2 candidates, n is 3"):
        BestOfN(n=3).evaluate(items, scores)
    with pytest.raises(ValueError, match="n must be at least 1"):
        BestOfN(n=0)
    with pytest.raises(ValueError, match="no problems"):
        BestOfN().evaluate([], {})


def test_step_scores_are_aggregated_as_asked():
    score = Score(0.95, steps=[0.9, 0.2, 0.5])
    assert selection_value(score, "value") == 0.95
    assert selection_value(score, "min") == 0.2
    assert selection_value(score, "last") == 0.5
    assert selection_value(score, "product") == pytest.approx(0.9 * 0.2 * 0.5)
    assert selection_value(Score(1.0), "min") is None  # no steps to aggregate
    assert selection_value(Score.failure(Status.TIMEOUT, "slow"), "value") is None
    with pytest.raises(ValueError, match="aggregate must be one of value, min, last, product"):
        BestOfN(aggregate="mean")


def test_the_aggregate_decides_the_pick():
    items = [problem("a", "s", [True, False, True])]
    scores = {
        "a": [
            Score(0.95, steps=[0.9, 0.2]),  # min 0.2, last 0.2, product 0.18
            Score(0.10, steps=[0.6, 0.7]),  # min 0.6, last 0.7, product 0.42
            Score(0.50, steps=[0.5, 0.5, 0.99]),  # min 0.5, last 0.99, product 0.2475
        ]
    }
    picks_right = {
        aggregate: BestOfN(aggregate=aggregate).evaluate(items, scores).metrics["best-of-3"]
        for aggregate in ("value", "min", "last", "product")
    }
    # value picks 0 (right), min 1 (wrong), last 2 (right), product 1 (wrong).
    assert picks_right == {"value": 1.0, "min": 0.0, "last": 1.0, "product": 0.0}


def test_a_reward_without_steps_fails_under_a_step_aggregate():
    items = [problem("a", "s", [True, False])]
    result = BestOfN(aggregate="min").evaluate(items, {"a": values(1.0, 0.0)})
    assert result.curves["best-of-n"] == [0.0, 0.0]
    assert result.failed == 2


def qwen_record(idx, **overrides):
    return {
        "idx": idx,
        "question": f"question {idx}",
        "gt": "42",
        "code": ["first", "second"],
        "response": ["first", "second"],
        "pred": ["41", "42"],
        "score": [False, True],
        "pred_score": [[0.7], [0.3]],
        **overrides,
    }


def test_qwen_outputs_load_and_their_rewards_are_the_published_scores(tmp_path):
    data = write_jsonl(
        tmp_path / "math_cot.jsonl",
        [qwen_record(0), qwen_record(5, pred_score=[[0.01, 0.2], [0.9, 0.05]], score=[True, False])],
    )
    bench = BestOfN()
    items = bench.load(data)
    first = items[0]
    assert (first.id, first.subset, first.prompt, first.reference) == (
        "math_cot/0",
        "math_cot",
        "question 0",
        "42",
    )
    assert first.candidates == ("first", "second")
    assert first.gold == {"correct": [False, True], "answers": ["41", "42"]}
    scores = bench.published_scores(data, items)
    assert [score.value for score in scores["math_cot/0"]] == [0.7, 0.3]
    # A list of several numbers is valued by its last and kept as steps.
    assert [score.value for score in scores["math_cot/5"]] == [0.2, 0.05]
    assert scores["math_cot/5"][1].steps == [0.9, 0.05]
    # By value: 0 picks 0 (0.7 > 0.3), wrong; 5 picks 0 (0.2 > 0.05), right: 1/2.
    assert bench.evaluate(items, scores).metrics["best-of-2"] == 0.5
    # By min: 0 still picks 0, wrong; 5 picks 1 (0.05 > 0.01), wrong: 0/2.
    assert BestOfN(aggregate="min").evaluate(items, scores).metrics["best-of-2"] == 0.0


@pytest.mark.parametrize(
    ("record", "field", "problem_text"),
    [
        ({k: v for k, v in qwen_record(0).items() if k != "score"}, "score", "missing"),
        ({k: v for k, v in qwen_record(0).items() if k != "pred"}, "pred", "missing"),
        (
            {k: v for k, v in qwen_record(0).items() if k != "question"},
            "question",
            "expected a string, got nothing (missing)",
        ),
        (qwen_record(0, score=[True]), "score", "1 entries for 2 responses"),
        (qwen_record(0, score=["yes", "no"]), "score", "expected true/false per response"),
        (qwen_record(0, code=[]), "code", "expected a non-empty list, got an empty list"),
        (qwen_record(0, pred=[["4"], "5"]), "pred", "expected one answer"),
    ],
)
def test_a_malformed_qwen_record_names_the_line_and_field(tmp_path, record, field, problem_text):
    data = write_jsonl(tmp_path / "out.jsonl", [qwen_record(3), record])
    with pytest.raises(
        DataFormatError, match=re.escape(f"out.jsonl, line 2: field {field!r}: {problem_text}")
    ):
        BestOfN().load(data)


def test_malformed_published_rewards_name_the_field(tmp_path):
    items = [problem("out/0", "out", [False, True])]
    short = write_jsonl(tmp_path / "out.jsonl", [qwen_record(0, pred_score=[[0.5]])])
    with pytest.raises(
        DataFormatError, match=re.escape("line 1: field 'pred_score': 1 entries for 2 responses")
    ):
        BestOfN().published_scores(short, items)
    bad = write_jsonl(tmp_path / "out.jsonl", [qwen_record(0, pred_score=[[0.5], []])])
    with pytest.raises(DataFormatError, match=re.escape("line 1: field 'pred_score'[1]: expected a number")):
        BestOfN().published_scores(bad, items)
    missing = write_jsonl(
        tmp_path / "out.jsonl", [{k: v for k, v in qwen_record(0).items() if k != "pred_score"}]
    )
    with pytest.raises(DataFormatError, match=re.escape("line 1: field 'pred_score': missing")):
        BestOfN().published_scores(missing, items)


def test_generic_records_from_a_directory_with_a_subset_per_file(tmp_path):
    write_jsonl(
        tmp_path / "gsm8k.jsonl",
        [
            {
                "prompt": "1+1?",
                "responses": ["2", "3"],
                "correct": [True, False],
                "answers": ["2", "3"],
                "reference": 2,
            },
            {"id": "q9", "prompt": "2+2?", "responses": ["4"], "correct": [1], "subset": "easy"},
        ],
    )
    write_jsonl(tmp_path / "math.jsonl", [{"prompt": "x?", "responses": ["y"], "correct": [False]}])
    (tmp_path / "notes.txt").write_text("not data", encoding="utf-8")
    items = BestOfN().load(tmp_path)
    # A record without a subset belongs to its file's subset.
    assert [(item.id, item.subset) for item in items] == [
        ("gsm8k/0", "gsm8k"),
        ("gsm8k/q9", "easy"),
        ("math/0", "math"),
    ]
    assert items[0].reference == "2"
    assert items[1].gold == {"correct": [True]}
    assert items[2].reference is None


def test_a_malformed_generic_record_names_the_field(tmp_path):
    cases = [
        ({"prompt": "p", "candidates": ["a"]}, "field 'responses': missing"),
        ({"responses": ["a"], "correct": [True]}, "field 'prompt': missing"),
        (
            {"prompt": "p", "responses": ["a", "b"], "correct": [True]},
            "field 'correct': 1 entries for 2 responses",
        ),
        ({"prompt": "p", "responses": ["a"]}, "field 'correct': missing"),
    ]
    for record, message in cases:
        data = write_jsonl(tmp_path / "data.jsonl", [record])
        with pytest.raises(DataFormatError, match=re.escape(f"data.jsonl, line 1: {message}")):
            BestOfN().load(data)


def test_unreadable_inputs_are_refused(tmp_path):
    with pytest.raises(DataFormatError, match="no such file"):
        BestOfN().load(tmp_path / "absent.jsonl")
    with pytest.raises(DataFormatError, match=r"no \.jsonl files"):
        BestOfN().load(tmp_path)
    with pytest.raises(DataFormatError, match="needs a data file"):
        BestOfN().load(None)
    twice = write_jsonl(tmp_path / "twice.jsonl", [qwen_record(1), qwen_record(1)])
    with pytest.raises(DataFormatError, match=re.escape("line 2: item id 'twice/1' appears twice")):
        BestOfN().load(twice)
