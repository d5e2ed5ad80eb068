import json
from pathlib import Path

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.rmbench import RMBench
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

DATA = Path(__file__).parent / "data" / "rmbench"
STYLES = ("concise", "detailed", "markdown")


def item(item_id: str, domain: str) -> Item:
    return Item(id=item_id, subset=domain, prompt="p", candidates=tuple(f"r{k}" for k in range(6)))


def ok(*values: float) -> list[Score]:
    return [Score(value=value) for value in values]


def matrix(result, prefix="matrix") -> list[list[float]]:
    figures = result.metrics if prefix == "matrix" else result.subsets[prefix]
    return [[figures[f"matrix/{c}/{r}"] for r in STYLES] for c in STYLES]


def test_a_domain_file_loads_with_its_domain_from_the_file_name():
    items = RMBench().load(DATA / "chat_filtered.json")
    assert [i.id for i in items] == ["chat/8", "chat/9"]
    assert items[0].subset == "chat"
    assert items[0].candidates[0] == "A sock drawer."  # chosen, concise
    assert items[0].candidates[3] == "A cutlery drawer."  # rejected, concise
    assert len(items[0].candidates) == 6


def test_records_with_a_domain_keep_it(tmp_path):
    record = {"id": 1, "prompt": "p", "chosen": ["a", "b", "c"], "rejected": ["d", "e", "f"]}
    path = tmp_path / "total_dataset.json"
    path.write_text(json.dumps([{**record, "domain": "safety-refuse"}, {**record, "domain": "math"}]))
    items = RMBench().load(path)
    assert [(i.id, i.subset) for i in items] == [("safety-refuse/1", "safety-refuse"), ("math/1", "math")]


def test_malformed_records_are_refused_naming_the_field(tmp_path):
    record = {"id": 1, "prompt": "p", "chosen": ["a", "b", "c"], "rejected": ["d", "e", "f"]}
    path = tmp_path / "total_dataset.json"
    path.write_text(json.dumps([record]))
    with pytest.raises(DataFormatError, match=r"record 0: field 'domain' is missing, and the file name"):
        RMBench().load(path)
    path.write_text(json.dumps([{**record, "domain": "poetry"}]))
    with pytest.raises(DataFormatError, match="field 'domain': expected a name starting with one of"):
        RMBench().load(path)
    path = tmp_path / "code_filtered.json"
    path.write_text(json.dumps([{**record, "rejected": ["d", "e"]}]))
    with pytest.raises(
        DataFormatError, match=r"\(item 'code/1'\): field 'rejected': expected a list of 3 strings"
    ):
        RMBench().load(path)
    path.write_text(json.dumps([{key: value for key, value in record.items() if key != "id"}]))
    with pytest.raises(DataFormatError, match="record 0: field 'id' is missing"):
        RMBench().load(path)


def test_the_style_matrix_and_its_triangles_follow_compute_accuracy():
    items = [item("chat/a", "chat"), item("chat/b", "chat")]
    scores = {
        # chosen (concise, detailed, markdown), then rejected in the same styles
        "chat/a": ok(3, 2, 1, 2.5, 1.5, 0.5),  # rows: [1, 1, 1], [0, 1, 1], [0, 0, 1]
        "chat/b": ok(1, 1, 1, 1, 0, 2),  # every row [0, 1, 0]: a tie (1 vs 1) loses
    }
    result = RMBench().evaluate(items, scores)
    # Sum over the two items, divided by 2.
    expected = [[0.5, 1.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.5, 0.5]]
    assert matrix(result, "chat") == expected
    chat = result.subsets["chat"]
    assert chat["hard"] == pytest.approx((1.0 + 0.5 + 0.5) / 3)  # upper-right triangle
    assert chat["normal"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)  # diagonal
    assert chat["easy"] == pytest.approx((0.0 + 0.0 + 0.5) / 3)  # lower-left triangle
    assert chat["average"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 6) / 3)  # 0.5
    assert chat["items"] == 2.0
    # One domain: the overall figures are the domain's.
    assert result.metrics["hard"] == pytest.approx(2 / 3)
    assert matrix(result) == expected
    assert result.distributions["chosen"] == [3, 2, 1, 1, 1, 1]


def test_safety_parts_are_pooled_and_domains_are_averaged():
    win, lose = ok(1, 1, 1, 0, 0, 0), ok(0, 0, 0, 1, 1, 1)
    items = [
        item("safety-refuse/1", "safety-refuse"),
        item("safety-refuse/2", "safety-refuse"),
        item("safety-response/1", "safety-response"),
        item("math/1", "math"),
    ]
    scores = {"safety-refuse/1": win, "safety-refuse/2": win, "safety-response/1": lose, "math/1": lose}
    result = RMBench().evaluate(items, scores)
    # Safety pools its three items (2 won everything, 1 lost everything): every entry 2/3, where
    # averaging the two parts would give 1/2.
    assert set(result.subsets) == {"safety", "math"}
    assert result.subsets["safety"]["items"] == 3.0
    assert result.subsets["safety"]["hard"] == pytest.approx(2 / 3)
    assert result.subsets["math"]["average"] == 0.0
    # Overall: the mean of the two domains' figures, and of their matrices.
    assert result.metrics["easy"] == pytest.approx((2 / 3 + 0) / 2)
    assert result.metrics["average"] == pytest.approx((2 / 3 + 0) / 2)
    assert result.metrics["safety"] == pytest.approx(2 / 3)
    assert matrix(result)[0][2] == pytest.approx(1 / 3)
    assert any("no items in chat, code" in note for note in result.notes)


def test_failed_and_missing_scores_lose_their_comparisons():
    items = [item("code/1", "code"), item("code/2", "code")]
    scores = {"code/1": [Score.failure(Status.ERROR, "boom"), *ok(1, 1, 0, 0, 0)]}
    result = RMBench().evaluate(items, scores)
    assert result.failed == 1 + 6
    # code/1 wins every comparison but those of its failed concise chosen response; code/2 has
    # no scores. Row 0 is 0, the others 1/2.
    assert matrix(result, "code") == [[0, 0, 0], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]


def test_published_results_read_back_by_domain_and_id(tmp_path):
    items = RMBench().load(DATA / "chat_filtered.json")
    records = json.loads((DATA / "chat_filtered.json").read_text())
    records[0].update(score_chosen=[[3.0], [2.0], [1.0]], score_rejected=[2.5, 1.5, 0.5])
    records[1].update(score_chosen=[1, 1, 1], score_rejected=[1, 0, 2])
    path = tmp_path / "chat_filtered_SomeRM_REWORD_MODEL_20240101_000000.json"
    path.write_text(json.dumps(records))
    scores = RMBench().published_scores(path, items)
    assert scores["chat/8"] == ok(3, 2, 1, 2.5, 1.5, 0.5)
    # The same numbers as the matrix test above: hard 2/3.
    assert RMBench().evaluate(items, scores).metrics["hard"] == pytest.approx(2 / 3)
    records[1]["score_rejected"] = [1, 0]
    path.write_text(json.dumps(records))
    with pytest.raises(
        DataFormatError, match=r"record 1 \(item 'chat/9'\): field 'score_rejected': expected 3"
    ):
        RMBench().published_scores(path, items)


def run_rm_results(tmp_path, scores: dict[str, tuple[list, list]]) -> Path:
    """THU-KEG/RM-Bench's scripts/run_rm.py output: the data file's records (json.load of
    --datapath, data/total_dataset.json in run_rm.sh) with score_chosen and score_rejected added,
    one-element lists unwrapped only when all three are, json.dump'ed with indent=4 to
    results/Seq_Classifier/<model>/<data file stem>_<model>_REWORD_MODEL_<time>.json."""
    data = [
        {
            "id": number,
            "prompt": "p",
            "chosen": ["a", "b", "c"],
            "rejected": ["d", "e", "f"],
            "domain": domain,
        }
        for domain, number in (key.split("/") for key in scores)
    ]
    (tmp_path / "data.json").write_text(json.dumps(data))
    records = json.loads((tmp_path / "data.json").read_text())
    for record, (chosen, rejected) in zip(records, scores.values(), strict=True):
        record["score_chosen"] = (
            [c[0] for c in chosen] if all(isinstance(c, list) for c in chosen) else chosen
        )
        record["score_rejected"] = rejected
    path = tmp_path / "results" / "Seq_Classifier" / "org" / "rm"
    path.mkdir(parents=True)
    path /= "total_dataset_rm_REWORD_MODEL_20241021_101010.json"
    path.write_text(json.dumps(records, indent=4, ensure_ascii=False))
    return path


def test_run_rm_results_reproduce_compute_accuracy(tmp_path):
    path = run_rm_results(
        tmp_path,
        {
            # chosen (concise, detailed, markdown), rejected (the same styles)
            "chat/1": ([[3.0], [2.0], [1.0]], [2.5, 1.5, 0.5]),  # unwrapped: all one-element lists
            "chat/2": ([1, 1, 1], [1, 0, 2]),
            "math/7": ([0.5, 0.5, 0.5], [0.0, 1.0, 0.5]),
        },
    )
    items = RMBench().load(tmp_path / "data.json")
    scores = RMBench().published_scores(path, items)
    assert scores["chat/2"] == ok(1, 1, 1, 1, 0, 2)
    result = RMBench().evaluate(items, scores)
    # compute_accuracy (the README's) on chat: chat/1 wins [1, 1, 1], [0, 1, 1], [0, 0, 1]; chat/2
    # wins [0, 1, 0] in every row (1 vs 1 is no win); divided by 2 items.
    chat = [[1 / 2, 2 / 2, 1 / 2], [0 / 2, 2 / 2, 1 / 2], [0 / 2, 1 / 2, 1 / 2]]
    assert matrix(result, "chat") == chat
    chat_hard = (chat[0][1] + chat[0][2] + chat[1][2]) / 3
    assert result.subsets["chat"]["hard"] == pytest.approx(chat_hard)
    # math/7: every chosen 0.5 beats only the rejected 0.0 (concise): column 0 is 1, the rest 0.
    assert matrix(result, "math") == [[1, 0, 0], [1, 0, 0], [1, 0, 0]]
    assert result.metrics["hard"] == pytest.approx((chat_hard + 0) / 2)
    assert result.metrics["easy"] == pytest.approx(((0 + 0 + 1 / 2) / 3 + (1 + 1 + 0) / 3) / 2)


def test_a_nan_score_loses_its_comparisons_and_bad_rows_are_refused(tmp_path):
    path = run_rm_results(tmp_path, {"code/1": ([float("nan"), 2.0, 2.0], [1.0, 1.0, 1.0])})
    assert "NaN" in path.read_text()  # json.dump writes a NaN score as NaN
    items = RMBench().load(tmp_path / "data.json")
    scores = RMBench().published_scores(path, items)
    assert not scores["code/1"][0].ok
    # compute_accuracy: NaN > 1.0 is false, so row 0 is [0, 0, 0]; rows 1 and 2 win everything.
    assert matrix(RMBench().evaluate(items, scores), "code") == [[0, 0, 0], [1, 1, 1], [1, 1, 1]]
    records = json.loads(path.read_text())
    records[0]["score_chosen"][1] = "2.0"
    path.write_text(json.dumps(records))
    with pytest.raises(DataFormatError) as refused:
        RMBench().published_scores(path, items)
    assert str(refused.value) == (
        f"{path}, record 0 (item 'code/1'): field 'score_chosen'[1]: expected a finite number, got '2.0'"
    )
