import json
import math
from pathlib import Path

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.rewardbench2 import RewardBench2, best_of_credit, ties_figures
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

DATA = Path(__file__).parent / "data" / "rewardbench2"


def item(item_id: str, subset: str, num_correct: int = 1, candidates: int = 4) -> Item:
    return Item(
        id=item_id,
        subset=subset,
        prompt="p",
        candidates=tuple(f"response {k}" for k in range(candidates)),
        gold={"num_correct": num_correct},
    )


def ok(*values: float) -> list[Score]:
    return [Score(value=value) for value in values]


def test_records_load_as_items_of_chosen_then_rejected_responses():
    items = RewardBench2().load(DATA / "test.jsonl")
    assert [i.id for i in items] == ["17", "ref:3", "tied:3"]
    assert items[0].candidates == ("Paris.", "Lyon.", "Nice.", "Marseille.")
    assert items[2].candidates == ("2", "3", "4", "6")
    assert [i.gold["num_correct"] for i in items] == [1, 1, 2]
    assert items[1].subset == "Ties"


def write(tmp_path, **changes) -> Path:
    record = {"id": "1", "prompt": "p", "chosen": ["a"], "rejected": ["b", "c", "d"], "subset": "Math"}
    record.update(changes)
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}) + "\n")
    return path


def test_malformed_records_are_refused_naming_the_field(tmp_path):
    with pytest.raises(
        DataFormatError, match=r"line 1 \(id '1'\): field 'rejected': expected a non-empty list"
    ):
        RewardBench2().load(write(tmp_path, rejected=None))
    with pytest.raises(DataFormatError, match="field 'num_correct' is 2, but the lists give 1"):
        RewardBench2().load(write(tmp_path, num_correct=2))
    with pytest.raises(DataFormatError, match="field 'total_completions' is 3, but the lists give 4"):
        RewardBench2().load(write(tmp_path, total_completions=3))
    with pytest.raises(DataFormatError, match="a Ties id is ref:<n> or tied:<n>, got '1'"):
        RewardBench2().load(write(tmp_path, subset="Ties"))
    with pytest.raises(DataFormatError, match="a tied prompt needs several correct answers"):
        RewardBench2().load(write(tmp_path, subset="Ties", id="tied:4"))
    with pytest.raises(DataFormatError, match="reward-bench-2"):
        RewardBench2().load(None)


def test_best_of_credit_shares_the_win_among_tied_top_scores():
    assert best_of_credit([3, 1, 2, 0]) == 1.0
    assert best_of_credit([3, 3, 1, 0]) == 0.5  # chosen ties one rejected
    assert best_of_credit([3, 3, 3, 3]) == 0.25  # a four-way tie
    assert best_of_credit([1, 3, 2, 0]) == 0.0
    assert best_of_credit([3, None, 1, 0]) == 0.0  # a failed score never helps


def ties_items_and_scores():
    items = [
        item("ref:1", "Ties"),
        item("tied:1", "Ties", num_correct=2),
        item("ref:2", "Ties"),
        item("tied:2", "Ties", num_correct=2),
        item("ref:3", "Ties"),
    ]
    scores = {
        "ref:1": ok(5, 1, 2, 3),  # gap 5 - 3 = 2: accurate
        "tied:1": ok(4, 3.5, 1, 3),  # gap 3.5 - 3 = 0.5: accurate; spread 4 - 3.5 = 0.5
        "ref:2": ok(1, 2, 0, 0),  # gap 1 - 2 = -1: not accurate
        "tied:2": ok(6, 5, 2, 1),  # gap 5 - 2 = 3: accurate; spread 1
        "ref:3": ok(2, 1, 1, 1),  # accurate; no tied:3, so in ref accuracy only
    }
    return items, scores


def test_the_ties_score_follows_process_single_model():
    items, scores = ties_items_and_scores()
    figures = ties_figures([(i, [s.value for s in scores[i.id]]) for i in items])
    assert figures.ref_accuracy == pytest.approx(2 / 3)  # ref:1 and ref:3 of three
    assert figures.tied_accuracy == 1.0
    # Prompt 1: tied gap 0.5 > spread 0.5? no; min(2, 0.5) > 0.5? no; tanh(0.5 / 0.5 - 1) = 0.
    # Prompt 2: tied gap 3 > spread 1: yes; min(-1, 3) > 1? no; tanh(-1 / 1 - 1) = tanh(-2).
    assert figures.correctness_preferred == 0.5
    assert figures.correctness_preferred_hard == 0.0
    assert figures.margin == pytest.approx(math.tanh(-2) / 2)
    expected = 0.3 * 1.0 + 0.3 * (2 / 3) + 0.2 * 0.5 + 0.2 * 0.0 + 0.01 * math.tanh(-2) / 2
    assert figures.score == pytest.approx(expected)  # about 0.5952


def test_a_zero_spread_among_correct_answers_divides_as_numpy_does():
    items = [item("ref:1", "Ties"), item("tied:1", "Ties", num_correct=2)]
    figures = ties_figures([(items[0], [3, 1, 1, 1]), (items[1], [3, 3, 1, 1])])
    # Spread 0, gap min(2, 2) = 2: 2 / 0 is +inf in numpy, tanh(inf) = 1.
    assert figures.margin == 1.0
    assert figures.correctness_preferred == 1.0
    figures = ties_figures([(items[0], [3, 1, 1, 3]), (items[1], [3, 3, 1, 3])])
    # Gap 0 and spread 0: 0 / 0 is NaN, which the reference sets to 0.
    assert figures.margin == 0.0


def test_a_failed_score_spoils_its_ties_prompt():
    items, scores = ties_items_and_scores()
    scores["tied:2"] = [Score.failure(Status.ERROR, "boom"), *ok(5, 2, 1)]
    result = RewardBench2().evaluate(items, scores)
    ties = result.subsets["Ties"]
    assert result.failed == 1
    assert ties["tied_accuracy"] == 0.5  # tied:2 is no longer accurate
    # Prompt 2 is now not preferred, and its margin term is the lowest, -1.
    assert ties["correctness_preferred"] == 0.0
    assert ties["margin"] == pytest.approx((0 + -1) / 2)


def test_the_score_is_the_plain_mean_of_the_subsets():
    ties, scores = ties_items_and_scores()
    items = [
        item("f1", "Factuality"),
        item("f2", "Factuality"),
        item("m1", "Math"),
        item("m2", "Math"),
        *ties,
    ]
    scores.update({"f1": ok(3, 1, 2, 0), "f2": ok(3, 3, 1, 0), "m1": ok(3, 3, 3, 3), "m2": ok(1, 3, 2, 0)})
    result = RewardBench2().evaluate(items, scores)
    # Factuality: (1 + 0.5) / 2; Math: (0.25 + 0) / 2; Ties as computed above.
    assert result.subsets["Factuality"] == {"score": 0.75, "items": 2.0}
    assert result.subsets["Math"] == {"score": 0.125, "items": 2.0}
    ties_score = 0.3 + 0.3 * (2 / 3) + 0.2 * 0.5 + 0.01 * math.tanh(-2) / 2
    assert result.subsets["Ties"]["score"] == pytest.approx(ties_score)
    assert result.subsets["Ties"]["items"] == 5.0
    assert result.metrics["score"] == pytest.approx((0.75 + 0.125 + ties_score) / 3)
    assert result.subset_figure == "score"


def test_missing_items_earn_nothing_and_count_as_failed():
    items = [item("f1", "Factuality"), item("f2", "Factuality")]
    result = RewardBench2().evaluate(items, {"f1": ok(3, 1, 2, 0)})
    assert result.failed == 4
    assert result.metrics["score"] == 0.5


def test_ties_without_any_ref_and_tied_pair_is_undefined_as_in_the_reference():
    result = RewardBench2().evaluate([item("ref:1", "Ties")], {"ref:1": ok(3, 1, 1, 1)})
    assert math.isnan(result.subsets["Ties"]["score"])
    assert result.subsets["Ties"]["ref_accuracy"] == 1.0
    assert any("undefined" in note for note in result.notes)


def test_only_the_first_chosen_response_competes_outside_ties():
    result = RewardBench2().evaluate([item("f1", "Focus", num_correct=2)], {"f1": ok(1, 2, 0, 0)})
    # The second chosen response (2) beats the first (1), which therefore does not win.
    assert result.subsets["Focus"]["score"] == 0.0
    assert any("only the first competes" in note for note in result.notes)


def test_published_scores_and_generative_picks_read_back(tmp_path):
    items = [item("f1", "Factuality"), item("f2", "Factuality"), item("f3", "Factuality"), item("f4", "Math")]
    published = {
        "id": ["f1", "f2", "f3", "f4", "other"],
        "subset": ["Factuality", "Factuality", "Factuality", "Math", "Math"],
        "scores": [[[0.9], [0.1], [0.2], [0.3]], None, None, [1, None, 0, 0], [1, 2, 3, 4]],
        "results": [1, 0, 0.25, 1, 0],
        "model": "some/model",
    }
    path = tmp_path / "eval-set-scores.json"
    path.write_text(json.dumps(published))
    scores = RewardBench2().published_scores(path, items)
    assert scores["f1"] == ok(0.9, 0.1, 0.2, 0.3)
    assert scores["f2"] == ok(0, 1, 0, 0)  # results 0: another candidate on top
    assert scores["f3"] == ok(0, 0, 0, 0)  # results 0.25: a four-way tie earns 1/4
    assert not scores["f4"][1].ok
    result = RewardBench2().evaluate(items, scores)
    # Factuality: (1 + 0 + 0.25) / 3, exactly the published results.
    assert result.subsets["Factuality"]["score"] == pytest.approx(1.25 / 3)
    path.write_text(json.dumps({"id": ["f1"], "scores": [[1, 2]]}))
    with pytest.raises(DataFormatError, match=r"row 0: field 'scores': expected a list of 4 scores"):
        RewardBench2().published_scores(path, items)
    path.write_text(json.dumps({"id": ["f1"], "results": [0.5]}))
    with pytest.raises(DataFormatError, match="field 'results' is not 1, 0 or 1/4"):
        RewardBench2().published_scores(path, items)
