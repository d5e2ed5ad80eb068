"""Quality on real completions (perf/data/math_real_outputs.jsonl.gz: Qwen and Llama models'
own outputs on GSM8K and MATH problems, with labels no grader here produced; described in
perf/data/SOURCES-real-outputs.md), against the labels as adjudicated by hand
(perf/data/math_real_outputs_adjudication.json says why for each one changed)."""

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from rewardlab import Sample
from rewardlab.rewards.math.reward import MathAnswerReward

DATA = Path(__file__).resolve().parents[3] / "perf" / "data"


def covered(row_id, base):
    return row_id == base or row_id.startswith(f"{base}-")


@pytest.fixture(scope="module")
def graded():
    with gzip.open(DATA / "math_real_outputs.jsonl.gz", "rt") as lines:
        rows = [json.loads(line) for line in lines]
    adjudication = json.loads((DATA / "math_real_outputs_adjudication.json").read_text())
    for row in rows:
        for correction in adjudication["corrections"]:
            if covered(row["id"], correction["id"]):
                row["label"] = correction["label"]
    reward = MathAnswerReward()
    scores = reward.score(
        [
            Sample(prompt=r["question"], completion=r["completion"], reference=r["reference"], id=r["id"])
            for r in rows
        ]
    )
    reward.close()
    return rows, scores, [e["id"] for e in adjudication["explained"]]


@pytest.mark.parametrize("group", ["source", "generator", "format", "reference_kind"])
def test_agreement_is_at_least_99_percent_in_every_group(graded, group):
    rows, scores, explained = graded
    tallies = defaultdict(lambda: [0, 0])
    for row, score in zip(rows, scores, strict=True):
        if any(covered(row["id"], base) for base in explained):
            continue  # counted apart: see the next test
        tally = tallies[row[group]]
        tally[0] += (score.ok and score.value == 1.0) == row["label"]
        tally[1] += 1
    low = {
        name: agree / total
        for name, (agree, total) in tallies.items()
        if total >= 20 and agree / total < 0.99
    }
    assert not low, low


def test_every_disagreement_is_explained_and_every_row_gets_a_verdict(graded):
    rows, scores, explained = graded
    assert all(score.ok for score in scores)
    unexplained = [
        (row["id"], score.details.get("extracted"), score.reason)
        for row, score in zip(rows, scores, strict=True)
        if (score.value == 1.0) != row["label"] and not any(covered(row["id"], base) for base in explained)
    ]
    assert not unexplained, unexplained
