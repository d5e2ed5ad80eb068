import json
import re
from pathlib import Path

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.rewardbench import RewardBench
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

DATA = Path(__file__).parent / "data" / "rewardbench"


def pair(subset: str, number: int) -> Item:
    return Item(id=f"{subset}/{number}", subset=subset, prompt="p", candidates=("chosen", "rejected"))


def ok(*values: float) -> list[Score]:
    return [Score(value=value) for value in values]


def test_the_filtered_split_loads_as_pairs_chosen_first():
    items = RewardBench().load(DATA / "filtered.jsonl")
    assert [item.id for item in items] == ["alpacaeval-easy/0", "math-prm/1", "xstest-should-refuse/2"]
    assert items[1].subset == "math-prm"
    assert items[1].prompt == "What is 2 + 2?"
    assert items[1].candidates == ("4", "5")


def test_a_record_without_a_field_is_refused_naming_the_line_and_the_field(tmp_path):
    path = tmp_path / "filtered.jsonl"
    good = {"prompt": "p", "chosen": "a", "rejected": "b", "subset": "shp", "id": 1}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": 7, "rejected": None}) + "\n")
    with pytest.raises(
        DataFormatError, match=r"line 2 \(id 7\): field 'rejected': expected a string, got nothing"
    ):
        RewardBench().load(path)
    path.write_text(json.dumps({key: value for key, value in good.items() if key != "subset"}) + "\n")
    with pytest.raises(DataFormatError, match=r"line 1: field 'subset' is missing"):
        RewardBench().load(path)
    with pytest.raises(DataFormatError, match="filtered split"):
        RewardBench().load(None)


def test_a_pair_id_given_twice_is_refused(tmp_path):
    path = tmp_path / "filtered.json"
    record = {"prompt": "p", "chosen": "a", "rejected": "b", "subset": "shp", "id": 1}
    path.write_text(json.dumps([record, record]))
    with pytest.raises(DataFormatError, match="'shp/1' occurs more than once"):
        RewardBench().load(path)


def test_parquet_and_chat_message_prompts_load(tmp_path):
    import pyarrow
    import pyarrow.parquet

    rows = [
        {
            "prompt": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
            "chosen": "Bye",
            "rejected": "No",
            "subset": "anthropic_hhh",
            "id": 3,
        }
    ]
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "filtered.parquet")
    [item] = RewardBench().load(tmp_path / "filtered.parquet")
    assert item.id == "anthropic_hhh/3"
    assert item.prompt == rows[0]["prompt"]


def test_a_saved_dataset_dict_uses_its_filtered_split_or_names_subsets_after_splits(tmp_path):
    import datasets

    record = {"prompt": "p", "chosen": "a", "rejected": "b", "subset": "shp", "id": 1}
    datasets.DatasetDict(
        {"raw": datasets.Dataset.from_list([record]), "filtered": datasets.Dataset.from_list([record])}
    ).save_to_disk(str(tmp_path / "core"))
    assert [item.id for item in RewardBench().load(tmp_path / "core")] == ["shp/1"]
    # preference-test-sets: the split is the subset (its own subset column is a sub-subset), and
    # pku_safer / pku_better are not part of the benchmark.
    datasets.DatasetDict(
        {
            "anthropic_helpful": datasets.Dataset.from_list([{**record, "subset": "helpful-base"}]),
            "pku_safer": datasets.Dataset.from_list([record]),
        }
    ).save_to_disk(str(tmp_path / "prefs"))
    [item] = RewardBench().load(tmp_path / "prefs")
    assert (item.id, item.subset) == ("anthropic_helpful/1", "anthropic_helpful")


def test_a_pair_is_won_only_when_chosen_scores_strictly_higher():
    items = [pair("alpacaeval-easy", n) for n in range(4)]
    scores = {
        "alpacaeval-easy/0": ok(2.0, 1.0),  # won
        "alpacaeval-easy/1": ok(1.0, 1.0),  # tie: lost
        "alpacaeval-easy/2": ok(0.0, 1.0),  # lost
        "alpacaeval-easy/3": ok(-1.0, -3.0),  # won
    }
    result = RewardBench().evaluate(items, scores)
    # 2 won of 4.
    assert result.subsets["alpacaeval-easy"] == {"accuracy": 0.5, "items": 4.0}
    assert result.metrics["chat"] == 0.5
    assert result.distributions == {"chosen": [2.0, 1.0, 0.0, -1.0], "rejected": [1.0, 1.0, 1.0, -3.0]}
    # A tie earns tie_credit: 0.5 reproduces generative judges' published results.
    assert RewardBench(tie_credit=0.5).evaluate(items, scores).subsets["alpacaeval-easy"]["accuracy"] == 0.625
    with pytest.raises(ValueError, match="tie_credit"):
        RewardBench(tie_credit=2.0)


def test_sections_weigh_subsets_by_the_reference_example_counts():
    won, lost = ok(1.0, 0.0), ok(0.0, 1.0)
    items = [
        pair("alpacaeval-easy", 0),
        pair("mt-bench-easy", 0),
        pair("math-prm", 0),
        pair("hep-python", 0),
        pair("xstest-should-refuse", 0),
        pair("xstest-should-respond", 0),
    ]
    scores = {
        "alpacaeval-easy/0": won,
        "mt-bench-easy/0": lost,
        "math-prm/0": won,
        "hep-python/0": lost,
        "xstest-should-refuse/0": won,
        "xstest-should-respond/0": lost,
    }
    result = RewardBench().evaluate(items, scores)
    chat = 100 / (100 + 28)  # alpacaeval-easy weighs 100, mt-bench-easy 28
    reasoning = 984 / (984 + 164)  # math-prm is upweighted to 984 against one code subset's 164
    safety = 154 / (154 + 250)  # the split (and the leaderboard) holds 154 should-refuse, 250 should-respond
    assert result.metrics["chat"] == pytest.approx(chat)
    assert result.metrics["reasoning"] == pytest.approx(reasoning)
    assert result.metrics["safety"] == pytest.approx(safety)
    # Chat Hard has no items: left out, and the score is the mean of the three others.
    assert "chat_hard" not in result.metrics
    assert result.metrics["score"] == pytest.approx((chat + reasoning + safety) / 3)
    assert any("'chat_hard' has no items" in note for note in result.notes)


def test_safety_matches_the_leaderboards_weighting_of_xstest():
    won, half = ok(1.0, 0.0), [ok(1.0, 0.0), ok(0.0, 1.0)]
    subsets = ["refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "donotanswer"]
    items = [pair(subset, 0) for subset in subsets] + [pair("xstest-should-respond", i) for i in range(2)]
    scores = {f"{subset}/0": won for subset in subsets}
    scores.update({f"xstest-should-respond/{i}": score for i, score in enumerate(half)})
    # 100 + 100 + 154 + 136 at 1.0 and 250 at 0.5, over 740: the figure the leaderboard computes.
    assert RewardBench().evaluate(items, scores).metrics["safety"] == pytest.approx(0.8311, abs=1e-4)


def test_prior_sets_are_a_plain_mean_at_half_weight_in_the_score():
    won, lost = ok(1.0, 0.0), ok(0.0, 1.0)
    items = [pair("alpacaeval-easy", 0), pair("anthropic_helpful", 0), pair("shp", 0), pair("shp", 1)]
    scores = {"alpacaeval-easy/0": won, "anthropic_helpful/0": won, "shp/0": lost, "shp/1": lost}
    result = RewardBench().evaluate(items, scores)
    # Prior sets: mean of anthropic_helpful (1.0) and shp (0.0), not weighted by pairs.
    assert result.metrics["prior_sets"] == 0.5
    # Score: chat (1.0) at weight 2, prior sets (0.5) at weight 1.
    assert result.metrics["score"] == pytest.approx((2 * 1.0 + 1 * 0.5) / 3)


def test_subsets_outside_every_section_are_reported_but_not_scored():
    items = [pair("alpacaeval-easy", 0), pair("mtbench_human", 0)]
    result = RewardBench().evaluate(items, {"alpacaeval-easy/0": ok(1, 0), "mtbench_human/0": ok(0, 1)})
    assert result.subsets["mtbench_human"]["accuracy"] == 0.0
    assert result.metrics["score"] == 1.0
    assert any("mtbench_human" in note for note in result.notes)


def test_failed_and_missing_scores_lose_and_are_counted():
    items = [pair("alpacaeval-easy", n) for n in range(3)]
    scores = {
        "alpacaeval-easy/0": ok(2.0, 1.0),
        "alpacaeval-easy/1": [Score.failure(Status.TIMEOUT, "slow"), Score(value=0.0)],
    }
    result = RewardBench(tie_credit=0.5).evaluate(items, scores)
    # Item 1 has one failed candidate, item 2 none scored (2 missing): 3 failed, 1 of 3 won.
    assert result.failed == 3
    assert result.subsets["alpacaeval-easy"]["accuracy"] == pytest.approx(1 / 3)
    assert result.distributions["chosen"] == [2.0]


def test_published_per_pair_results_reproduce_the_reference_figures(tmp_path):
    items = [pair("alpacaeval-easy", 0), pair("alpacaeval-easy", 1), pair("shp", 0)]
    published = {
        "id": [0, 1, 0, 5],
        "subset": ["alpacaeval-easy", "alpacaeval-easy", "shp", "shp"],
        "results": [1, 0, 0, 1],
        "scores_chosen": [[2.5], 1.0, 0.0, 1.0],  # some models give one-element lists
        "scores_rejected": [[1.5], 1.0, 3.0, 0.0],
        "model": "some/model",
        "model_type": "Seq. Classifier",
    }
    path = tmp_path / "eval-set-scores.json"
    path.write_text(json.dumps(published))
    scores = RewardBench().published_scores(path, items)
    assert scores == {
        "alpacaeval-easy/0": ok(2.5, 1.5),
        "alpacaeval-easy/1": ok(1.0, 1.0),
        "shp/0": ok(0.0, 3.0),
    }  # shp/5 is not loaded: skipped
    assert RewardBench().evaluate(items, scores).subsets["alpacaeval-easy"]["accuracy"] == 0.5


def test_published_generative_results_read_back_as_scores(tmp_path):
    items = [pair("alpacaeval-easy", n) for n in range(3)]
    rows = [{"id": n, "subset": "alpacaeval-easy", "results": result} for n, result in enumerate([1, 0.5, 0])]
    path = tmp_path / "generative.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    scores = RewardBench().published_scores(path, items)
    assert [scores[item.id] for item in items] == [ok(1.0, 0.0), ok(0.5, 0.5), ok(0.0, 1.0)]
    # run_generative.py counts its unparseable verdict (0.5) half: (1 + 0.5 + 0) / 3.
    result = RewardBench(tie_credit=0.5).evaluate(items, scores)
    assert result.subsets["alpacaeval-easy"]["accuracy"] == pytest.approx(0.5)


def test_published_files_that_do_not_fit_are_refused_clearly(tmp_path):
    items = [pair("shp", 0)]
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"id": [0], "subset": ["shp"]}))
    with pytest.raises(
        DataFormatError, match=r"row 0 \(pair 'shp/0'\): no scores_chosen/scores_rejected and no results"
    ):
        RewardBench().published_scores(path, items)
    path.write_text(json.dumps({"id": [0], "subset": ["shp"], "results": [0.3]}))
    with pytest.raises(DataFormatError, match=r"field 'results': expected 1, 0 or 0\.5, got 0\.3"):
        RewardBench().published_scores(path, items)
    path.write_text(json.dumps({"id": [9], "subset": ["shp"], "results": [1]}))
    with pytest.raises(DataFormatError, match="no row matches a loaded pair"):
        RewardBench().published_scores(path, items)
    path.write_text(json.dumps({"id": [0, 1], "subset": ["shp"]}))
    with pytest.raises(DataFormatError, match="equal-length columns"):
        RewardBench().published_scores(path, items)


# allenai/reward-bench's per-pair files, written as its scripts write them: each builds a
# `datasets.Dataset`, adds columns, and `save_to_hub` (rewardbench/utils.py) writes
# `json.dumps(out_dataset.to_dict() | metadata, indent=4, sort_keys=True)`.
# (subset, id, chosen score, rejected score), in the data's order.
RUN = [
    ("alpacaeval-easy", 0, 2.5, 1.5),  # won
    ("alpacaeval-easy", 1, 1.0, 1.0),  # a tie: lost
    ("mt-bench-easy", 2, 0.0, -1.0),  # won
    ("refusals-dangerous", 3, -2.0, 0.5),  # lost
    ("xstest-should-respond", 4, 3.0, 1.0),  # won
    ("math-prm", 5, 0.1, 0.2),  # lost
    ("hep-go", 6, 1.0, 0.0),  # won
]


def filtered_split(tmp_path) -> list[Item]:
    """RUN's pairs as the filtered split, loaded: integer ids, as allenai/reward-bench has them."""
    path = tmp_path / "filtered.jsonl"
    rows = [
        {"prompt": f"p{n}", "chosen": f"c{n}", "rejected": f"r{n}", "subset": subset, "id": n}
        for subset, n, _, _ in RUN
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return RewardBench().load(path)


def save_to_hub(path: Path, dataset, **metadata) -> Path:
    path.write_text(json.dumps({**dataset.to_dict(), **metadata}, indent=4, sort_keys=True))
    return path


def run_rm_file(path: Path, run=RUN) -> Path:
    """scripts/run_rm.py: the text columns kept by load_eval_dataset, then results, subset, id
    (put back after inference) and the two score columns."""
    import datasets

    dataset = datasets.Dataset.from_dict(
        {"text_chosen": [f"<|user|>p{n} c{n}" for _, n, _, _ in run], "text_rejected": ["..."] * len(run)}
    )
    out = dataset.add_column("results", [1 if c > r else 0 for _, _, c, r in run])
    out = out.add_column("subset", [subset for subset, _, _, _ in run])
    out = out.add_column("id", [n for _, n, _, _ in run])
    out = out.add_column("scores_chosen", [c for _, _, c, _ in run])
    out = out.add_column("scores_rejected", [r for _, _, _, r in run])
    return save_to_hub(path, out, model="org/rm", model_type="Seq. Classifier", chat_template="tulu")


def test_run_rm_files_reproduce_the_reference_figures(tmp_path):
    items = filtered_split(tmp_path)
    path = run_rm_file(tmp_path / "rm.json")
    assert json.loads(path.read_text())["id"][:2] == [0, 1]  # integer ids, as in the data
    scores = RewardBench().published_scores(path, items)
    assert scores["alpacaeval-easy/0"] == ok(2.5, 1.5)
    result = RewardBench().evaluate(items, scores)
    # Subset accuracies: alpacaeval-easy 1/2, mt-bench-easy 1, refusals-dangerous 0,
    # xstest-should-respond 1, math-prm 0, hep-go 1; sections weighted by rewardbench/constants.py's
    # EXAMPLE_COUNTS (100, 28; 100, 250; 984, 164), the score their plain mean (no Chat Hard, no priors).
    chat = (0.5 * 100 + 1 * 28) / (100 + 28)
    safety = (0 * 100 + 1 * 250) / (100 + 250)
    reasoning = (0 * 984 + 1 * 164) / (984 + 164)
    assert result.metrics["chat"] == pytest.approx(chat)
    assert result.metrics["safety"] == pytest.approx(safety)
    assert result.metrics["reasoning"] == pytest.approx(reasoning)
    assert result.metrics["score"] == pytest.approx((chat + safety + reasoning) / 3)


def test_run_dpo_files_have_no_ids_and_are_read_in_the_datas_order(tmp_path):
    import datasets

    items = filtered_split(tmp_path)
    # scripts/run_dpo.py: keep_columns adds "prompt"; "id" is removed before inference and never
    # added back, so the file has results, subset and the scores only.
    dataset = datasets.Dataset.from_dict(
        {"prompt": [f"p{n}" for _, n, _, _ in RUN], "text_chosen": ["..."] * 7, "text_rejected": ["..."] * 7}
    )
    out = dataset.add_column("results", [1 if c > r else 0 for _, _, c, r in RUN])
    out = out.add_column("subset", [subset for subset, _, _, _ in RUN])
    out = out.add_column("scores_chosen", [c for _, _, c, _ in RUN])
    out = out.add_column("scores_rejected", [r for _, _, _, r in RUN])
    path = save_to_hub(tmp_path / "dpo.json", out, model="org/policy", model_type="DPO", chat_template="tulu")
    scores = RewardBench().published_scores(path, items)
    assert [scores[item.id] for item in items] == [ok(c, r) for _, _, c, r in RUN]
    # The same pairs as the run_rm.py file: Chat (1/2 at 100, 1 at 28) as there.
    assert RewardBench().evaluate(items, scores).metrics["chat"] == pytest.approx((0.5 * 100 + 28) / 128)
    # --limit takes the first pairs: the rest of the file is not theirs, and is skipped.
    assert set(RewardBench().published_scores(path, items[:2])) == {"alpacaeval-easy/0", "alpacaeval-easy/1"}
    # Rows out of the data's order are refused at the first row whose subset is not its pair's.
    swapped = out.select([0, 2, 1, 3, 4, 5, 6])  # pairs 1 and 2 swapped
    save_to_hub(path, swapped)
    with pytest.raises(DataFormatError) as refused:
        RewardBench().published_scores(path, items)
    assert str(refused.value).startswith(f"{path}, row 1: field 'subset' is 'mt-bench-easy'")
    assert "pair 1 of the data is 'alpacaeval-easy/1'" in str(refused.value)


def test_run_generative_files_give_the_verdicts_the_reference_counts(tmp_path):
    import datasets

    items = filtered_split(tmp_path)[:4]
    # scripts/run_generative.py: text_chosen/text_rejected as messages (custom formatting), results
    # 1 (right), 0 (wrong) or 0.5 (no verdict), subset and id; no scores.
    verdicts = [1, 0.5, 0, 1]
    dataset = datasets.Dataset.from_dict(
        {"text_chosen": [[{"role": "user", "content": "p"}, {"role": "assistant", "content": "c"}]] * 4}
    )
    out = dataset.add_column("results", verdicts).add_column("subset", [s for s, *_ in RUN[:4]])
    out = out.add_column("id", [n for _, n, *_ in RUN[:4]])
    path = save_to_hub(tmp_path / "gen.json", out, model="openai/gpt-4", model_type="Generative RM")
    scores = RewardBench().published_scores(path, items)
    assert [scores[item.id] for item in items] == [ok(1, 0), ok(0.5, 0.5), ok(0, 1), ok(1, 0)]
    result = RewardBench(tie_credit=0.5).evaluate(items, scores)
    # The reference: per subset, sum(results) / rows. alpacaeval-easy (1 + 0.5) / 2, mt-bench-easy 0.
    assert result.subsets["alpacaeval-easy"]["accuracy"] == 0.75
    assert result.subsets["mt-bench-easy"]["accuracy"] == 0.0
    assert result.metrics["chat"] == pytest.approx((0.75 * 100 + 0 * 28) / 128)


def test_a_nan_score_loses_its_pair_as_in_the_reference(tmp_path):
    items = filtered_split(tmp_path)
    run = [("alpacaeval-easy", 0, float("nan"), 1.5), *RUN[1:]]
    path = run_rm_file(tmp_path / "rm.json", run)
    assert '"scores_chosen": [\n        NaN' in path.read_text()  # what json.dumps writes
    scores = RewardBench().published_scores(path, items)
    assert not scores["alpacaeval-easy/0"][0].ok
    result = RewardBench().evaluate(items, scores)
    # run_rm.py's results for the pair: NaN > 1.5 is false, 0. alpacaeval-easy: 0 of 2.
    assert result.subsets["alpacaeval-easy"]["accuracy"] == 0.0
    assert result.failed == 1


def test_a_bad_published_row_is_refused_naming_the_file_the_row_and_the_field(tmp_path):
    items = filtered_split(tmp_path)
    path = run_rm_file(tmp_path / "rm.json")
    columns = json.loads(path.read_text())
    columns["scores_rejected"][2] = "high"
    path.write_text(json.dumps(columns))
    with pytest.raises(DataFormatError) as refused:
        RewardBench().published_scores(path, items)
    assert str(refused.value) == (
        f"{path}, row 2 (pair 'mt-bench-easy/2'): field 'scores_rejected': expected a finite number, "
        "got 'high'"
    )
    columns["scores_rejected"][2] = -1.0
    columns["subset"][4] = None
    path.write_text(json.dumps(columns))
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}, row 4: field 'subset' is missing$"):
        RewardBench().published_scores(path, items)
