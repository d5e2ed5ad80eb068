"""Running a benchmark: every candidate scored into a resumable file, then the metric, then the
report.

Scoring is offline scoring (`rewardlab.offline.runner`): candidates are written to
``<output>/scores.jsonl`` batch by batch as they complete, so a killed run loses at most the
batches in flight and ``resume`` continues from the ids the file holds. Model-backed rewards
also keep their own answer cache, so a rerun with a changed metric costs nothing. The metric
reads the scores back from that file - the same path score-file mode takes - so a run and a
reproduction from its file cannot disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result
from rewardlab.benchmarks.report import write_report
from rewardlab.benchmarks.score_files import read_score_file
from rewardlab.errors import DataFormatError
from rewardlab.offline.rows import Row, RowSource
from rewardlab.offline.runner import RunOptions, ascore_rows
from rewardlab.offline.summary import Summary
from rewardlab.rewards.contract import Reward, Score, Status

SCORES_FILE = "scores.jsonl"


def align_scores(items: Sequence[Item], scores: Mapping[str, Sequence[Score]]) -> dict[str, list[Score]]:
    """Every item's scores, exactly one per candidate: a candidate without a score becomes a
    failure (so the metric counts it against its item); more scores than candidates means the
    scores belong to other data, which is an error."""
    aligned: dict[str, list[Score]] = {}
    for item in items:
        given = list(scores.get(item.id, ()))
        if len(given) > len(item.candidates):
            raise DataFormatError(
                f"item {item.id!r}: {len(given)} scores for {len(item.candidates)} candidates; "
                "are the scores from another version of the data?"
            )
        missing = Score.failure(Status.ERROR, "not scored")
        aligned[item.id] = given + [missing] * (len(item.candidates) - len(given))
    return aligned


def _candidate_rows(items: Sequence[Item]) -> RowSource:
    def rows() -> Iterator[Row]:
        index = 0
        for item in items:
            for sample in item.samples():
                yield Row(index=index, line=None, id=sample.id or "", sample=sample)
                index += 1

    return RowSource(rows=rows(), total=sum(len(item.candidates) for item in items))


async def ascore_benchmark(
    reward: Reward, items: Sequence[Item], output: Path, options: RunOptions | None = None
) -> tuple[ItemScores, Summary]:
    """Score every candidate of ``items`` into ``output/scores.jsonl`` (resumable; see the module
    docstring) and read the scores back per item."""
    scores_path = Path(output) / SCORES_FILE
    summary = await ascore_rows(
        reward, _candidate_rows(items), scores_path, dataclasses.replace(options or RunOptions(), limit=None)
    )
    return align_scores(items, read_score_file(scores_path)), summary


def evaluate_and_report(
    benchmark: Benchmark, items: Sequence[Item], scores: Mapping[str, Sequence[Score]], output: Path
) -> Result:
    """The benchmark's metric over ``scores``, written as a report to ``output``."""
    result = benchmark.evaluate(items, align_scores(items, scores))
    write_report(result, Path(output))
    return result
