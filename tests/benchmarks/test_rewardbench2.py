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
    assert scores["f3"] == ok(1, 1, 1, 1)  # results 0.25: a four-way tie earns 1/4
    assert not scores["f4"][1].ok
    result = RewardBench2().evaluate(items, scores)
    # Factuality: (1 + 0 + 0.25) / 3, exactly the published results.
    assert result.subsets["Factuality"]["score"] == pytest.approx(1.25 / 3)
    path.write_text(json.dumps({"id": ["f1"], "scores": [[1, 2]]}))
    with pytest.raises(
        DataFormatError,
        match=r"row 0 \(item 'f1'\): field 'scores': expected a list of 4 scores, got \[1, 2\]",
    ):
        RewardBench2().published_scores(path, items)
    path.write_text(json.dumps({"id": ["f1"], "results": [0.2]}))
    with pytest.raises(
        DataFormatError, match=r"field 'results' is 0\.2; expected 0 or 1/k for k from 1 to 4"
    ):
        RewardBench2().published_scores(path, items)


# allenai/reward-bench-2-results' per-prompt files, as the scripts write them: `save_to_hub(...,
# best_of_n=True)` (rewardbench/utils.py) writes `json.dumps(out_dataset.to_dict() | metadata,
# indent=4, sort_keys=True)`.
def save_to_hub(path: Path, columns: dict, **metadata) -> Path:
    path.write_text(json.dumps({**columns, **metadata}, indent=4, sort_keys=True))
    return path


# (id, subset, num_correct, scores): the scores give the Ties prompts of ties_items_and_scores.
RUN_V2 = [
    ("f1", "Factuality", 1, [0.9, 0.1, 0.2, 0.3]),  # the first on top: 1
    ("f2", "Factuality", 1, [[0.5], [0.5], [0.1], [0.2]]),  # one-element lists; a 2-way top: 1/2
    ("x1", "Focus", 1, [0.1, 0.3, 0.2, 0.0]),  # another on top: 0
    ("ref:1", "Ties", 1, [5, 1, 2, 3]),
    ("tied:1", "Ties", 2, [4, 3.5, 1, 3]),
    ("ref:2", "Ties", 1, [1, 2, 0, 0]),
    ("tied:2", "Ties", 2, [6, 5, 2, 1]),
]


def run_v2_file(path: Path) -> Path:
    """scripts/run_v2.py: reroll_and_score_dataset's rows (text and scores combined into lists,
    results 1/k when the first of k top scores, subset and id), then num_correct."""

    def reroll_result(scores: list) -> float:
        flat = [score[0] if isinstance(score, list) else score for score in scores]
        return 1 / flat.count(max(flat)) if flat[0] == max(flat) else 0

    columns = {
        "text": [[f"<|user|>p<|assistant|>{k}" for k in range(len(scores))] for *_, scores in RUN_V2],
        "scores": [scores for *_, scores in RUN_V2],
        "subset": [subset for _, subset, _, _ in RUN_V2],
        "id": [item_id for item_id, *_ in RUN_V2],
        "results": [reroll_result(scores) for *_, scores in RUN_V2],
        "num_correct": [num_correct for _, _, num_correct, _ in RUN_V2],
    }
    return save_to_hub(path, columns, model="org/rm", model_type="Seq. Classifier", chat_template="tokenizer")


def test_run_v2_files_reproduce_the_reference_figures_ties_included(tmp_path):
    items = [item(item_id, subset, num_correct) for item_id, subset, num_correct, _ in RUN_V2]
    path = run_v2_file(tmp_path / "rm.json")
    scores = RewardBench2().published_scores(path, items)
    assert scores["f2"] == ok(0.5, 0.5, 0.1, 0.2)
    result = RewardBench2().evaluate(items, scores)
    # Factuality (1 + 1/2) / 2; Focus 0. Ties by process_single_model: ref accuracy 1/2 (ref:2's
    # correct 1 is below its incorrect 2), tied accuracy 1; prompt 1 neither preferred (gap 3.5 - 3
    # = 0.5 not above spread 4 - 3.5 = 0.5) nor hard, margin tanh(0.5 / 0.5 - 1) = 0; prompt 2
    # preferred (gap 3 > spread 1) but not hard (min(-1, 3) = -1), margin tanh(-1 / 1 - 1).
    ties = 0.3 * 1 + 0.3 * 0.5 + 0.2 * (1 / 2) + 0.2 * 0 + 0.01 * (0 + math.tanh(-2)) / 2
    assert result.subsets["Factuality"]["score"] == 0.75
    assert result.subsets["Focus"]["score"] == 0.0
    assert result.subsets["Ties"]["score"] == pytest.approx(ties)
    assert result.metrics["score"] == pytest.approx((0.75 + 0 + ties) / 3)


def test_run_generative_v2_files_give_the_picks_and_the_ties_ratings(tmp_path):
    # scripts/run_generative_v2.py: the rows outside Ties carry results - 1, 0, 1/k for a k-way top
    # rating (--score_w_ratings), 0.25 for no verdict - and no scores; the Ties rows the judge's
    # ratings (-1 for a failed rating) in scores and results None (process_single_model).
    picks = [1, 0, 0.5, 1 / 3, 0.25]
    ratings = {"ref:1": [9, 3, 5, -1], "tied:1": [8, 8, 2, 6]}
    items = [item(f"g{n}", "Factuality") for n in range(len(picks))]
    items += [item("ref:1", "Ties"), item("tied:1", "Ties", num_correct=2)]
    columns = {
        "texts_chosen": [[[{"role": "user", "content": "p"}, {"role": "assistant", "content": "a"}]]] * 7,
        "texts_rejected": [[[{"role": "user", "content": "p"}, {"role": "assistant", "content": "b"}]] * 3]
        * 7,
        "subset": ["Factuality"] * 5 + ["Ties"] * 2,
        "num_correct": [1] * 5 + [1, 2],
        "results": [*picks, None, None],
        "id": [f"g{n}" for n in range(5)] + ["ref:1", "tied:1"],
        "scores": [None] * 5 + [ratings["ref:1"], ratings["tied:1"]],
    }
    path = save_to_hub(tmp_path / "judge.json", columns, model="openai/gpt-4o", model_type="Generative RM")
    scores = RewardBench2().published_scores(path, items)
    assert [scores[f"g{n}"] for n in range(5)] == [
        ok(1, 0, 0, 0),
        ok(0, 1, 0, 0),
        ok(1, 1, 0, 0),
        ok(1, 1, 1, 0),
        ok(1, 1, 1, 1),
    ]
    result = RewardBench2().evaluate(items, scores)
    # The reference: sum(results) / rows.
    assert result.subsets["Factuality"]["score"] == pytest.approx((1 + 0 + 0.5 + 1 / 3 + 0.25) / 5)
    # Ties: both prompts accurate (ref: 9 > 5; tied: 8 > 6); tied gap 2 > spread 0 and min(4, 2) > 0;
    # the margin 2 / 0 is inf in numpy, and tanh(inf - 1) = 1.
    assert result.subsets["Ties"]["score"] == pytest.approx(0.3 + 0.3 + 0.2 + 0.2 + 0.01 * 1)


def test_a_bad_v2_row_is_refused_naming_the_file_the_row_and_the_field(tmp_path):
    items = [item(item_id, subset, num_correct) for item_id, subset, num_correct, _ in RUN_V2]
    path = run_v2_file(tmp_path / "rm.json")
    columns = json.loads(path.read_text())
    columns["num_correct"][4] = 1
    save_to_hub(path, columns)
    with pytest.raises(DataFormatError) as refused:
        RewardBench2().published_scores(path, items)
    assert str(refused.value) == (
        f"{path}, row 4 (item 'tied:1'): field 'num_correct' is 1 here but 2 in the data; are these "
        "scores for other data?"
    )
    columns = json.loads(run_v2_file(path).read_text())
    columns["subset"][2] = "Precise IF"
    save_to_hub(path, columns)
    with pytest.raises(DataFormatError, match=r"row 2 \(item 'x1'\): field 'subset' is 'Precise IF' here"):
        RewardBench2().published_scores(path, items)
    columns = json.loads(run_v2_file(path).read_text())
    columns["scores"][3] = None  # a Ties row with results only
    save_to_hub(path, columns)
    with pytest.raises(DataFormatError) as refused:
        RewardBench2().published_scores(path, items)
    assert str(refused.value).startswith(
        f"{path}, row 3 (item 'ref:1'): field 'scores' is missing; a Ties row needs a score per candidate"
    )
    columns["scores"][3] = [5, 1, "2", 3]
    save_to_hub(path, columns)
    with pytest.raises(
        DataFormatError, match=r"row 3 \(item 'ref:1'\): field 'scores'\[2\]: expected a finite"
    ):
        RewardBench2().published_scores(path, items)
    columns = json.loads(run_v2_file(path).read_text())
    columns["scores"][0], columns["results"][0] = None, 0.3
    save_to_hub(path, columns)
    with pytest.raises(
        DataFormatError, match=r"row 0 \(item 'f1'\): no field 'scores', and field 'results' is 0\.3"
    ):
        RewardBench2().published_scores(path, items)


def test_a_nan_score_earns_nothing_as_in_the_reference(tmp_path):
    items = [item("f1", "Factuality")]
    path = save_to_hub(
        tmp_path / "rm.json",
        {
            "id": ["f1"],
            "subset": ["Factuality"],
            "num_correct": [1],
            "scores": [[2.0, float("nan"), 1.0, 0.0]],
        },
    )
    scores = RewardBench2().published_scores(path, items)
    assert not scores["f1"][1].ok
    # reroll_and_score_dataset: np.max is NaN, nothing equals it, results 0.
    result = RewardBench2().evaluate(items, scores)
    assert result.subsets["Factuality"]["score"] == 0.0
    assert result.failed == 1
