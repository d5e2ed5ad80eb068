import asyncio
import json

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.runner import SCORES_FILE, align_scores, ascore_benchmark, evaluate_and_report
from rewardlab.errors import DataFormatError, OutputError
from rewardlab.offline.runner import RunOptions
from rewardlab.rewards.contract import Score
from tests.benchmarks.toy import LengthReward, ToyPairs

PAIRS = [
    # (id, subset, chosen, rejected): LengthReward prefers the longer response.
    ("a", "easy", "a long answer", "short"),
    ("b", "easy", "tiny", "a much longer answer"),
    ("c", "hard", "same", "size"),  # a tie loses
    ("d", "hard", "FAIL here", "x"),  # the chosen one fails to score
]


def toy_items():
    return [Item(id=i, subset=s, prompt="q", candidates=(c, r)) for i, s, c, r in PAIRS]


def run(items, output, **options):
    return asyncio.run(ascore_benchmark(LengthReward(), items, output, RunOptions(progress=False, **options)))


def test_every_candidate_is_scored_once_into_a_file_and_the_metric_reads_it_back(tmp_path):
    LengthReward.scored = []
    scores, summary = run(toy_items(), tmp_path, batch_size=3)
    assert sorted(LengthReward.scored) == sorted(f"{i}#{k}" for i, *_ in PAIRS for k in (0, 1))
    assert [s.value for s in scores["a"]] == [len("a long answer"), len("short")]
    assert not scores["d"][0].ok and "asked to fail" in scores["d"][0].reason
    assert summary.scored == 8
    records = [json.loads(line) for line in (tmp_path / SCORES_FILE).read_text().splitlines()]
    assert {r["id"] for r in records} == set(LengthReward.scored)
    result = evaluate_and_report(ToyPairs(), toy_items(), scores, tmp_path)
    # Only "a" is won: "b" is lost, "c" ties, "d" failed.
    assert result.metrics["accuracy"] == pytest.approx(1 / 4)
    assert result.subsets == {"easy": {"accuracy": 0.5, "items": 2}, "hard": {"accuracy": 0.0, "items": 2}}
    assert result.failed == 1


def test_a_killed_run_resumes_scoring_only_what_is_missing(tmp_path):
    run(toy_items(), tmp_path / "full")
    complete = (tmp_path / "full" / SCORES_FILE).read_text().splitlines(keepends=True)
    killed = tmp_path / "killed"
    killed.mkdir()
    # Three whole records and half of the fourth: what a kill mid-write leaves.
    (killed / SCORES_FILE).write_text("".join(complete[:3]) + complete[3][:10])
    done = {json.loads(line)["id"] for line in complete[:3]}

    with pytest.raises(OutputError, match="--resume"):
        run(toy_items(), killed)
    LengthReward.scored = []
    scores, _ = run(toy_items(), killed, resume=True)
    assert sorted(LengthReward.scored) == sorted({f"{i}#{k}" for i, *_ in PAIRS for k in (0, 1)} - done)
    full, _ = run(toy_items(), tmp_path / "again")
    values = {i: [s.value for s in v] for i, v in scores.items()}
    assert values == {i: [s.value for s in v] for i, v in full.items()}


def test_scores_are_aligned_to_the_candidates():
    items = toy_items()[:2]
    aligned = align_scores(items, {"a": [Score(value=1.0)]})
    assert aligned["a"][0].value == 1.0
    assert not aligned["a"][1].ok and aligned["a"][1].reason == "not scored"
    assert [s.ok for s in aligned["b"]] == [False, False]
    with pytest.raises(DataFormatError, match=r"item 'a': 3 scores for 2 candidates"):
        align_scores(items, {"a": [Score(value=1.0)] * 3})


def test_a_pairwise_judge_sees_the_candidates_of_one_item_as_a_group():
    first, second = toy_items()[0].samples()
    assert first.fields["group_id"] == second.fields["group_id"] == "a"
    assert (first.id, second.id) == ("a#0", "a#1")
    assert first.fields["subset"] == "easy"
