"""Precomputed scores read back for a benchmark's metric: score-file mode.

Two layouts are read, told apart per record:

- **Candidate records**, one per scored candidate: what `rewardlab score` and the benchmark
  runner write (``{"id": "<item id>#<k>", "value": ..., "status": ..., "steps": ...}``). A record
  without ``status`` is ok when its value is a number.
- **Item records**, one per item: ``{"id": "<item id>", "scores": [s0, s1, ...]}`` with one entry
  per candidate, in candidate order. An entry is a number (the score), a list of numbers (step
  scores; the value is their minimum), or ``null`` (the candidate could not be scored).

Benchmark-specific published formats (per-pair verdicts, per-response rewards) are read by each
benchmark's `Benchmark.published_scores`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from rewardlab.benchmarks.items import split_candidate_id
from rewardlab.benchmarks.records import read_jsonl
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status


def score_from_record(record: Mapping[str, Any], where: str) -> Score:
    """A `Score` from a candidate record (the `Score.to_dict` layout); ``where`` names the record
    in errors."""
    status = record.get("status", Status.OK.value)
    try:
        status = Status(status)
    except ValueError:
        raise DataFormatError(f"{where}: field 'status': unknown status {status!r}") from None
    steps = record.get("steps")
    if steps is not None and not _numbers(steps):
        raise DataFormatError(f"{where}: field 'steps': expected a list of numbers, got {steps!r}")
    if status is not Status.OK:
        return Score.failure(status, str(record.get("reason") or status.value), steps=steps)
    value = record.get("value")
    if not _number(value):
        raise DataFormatError(f"{where}: field 'value': expected a finite number, got {value!r}")
    return Score(value=float(value), steps=steps, reason=record.get("reason"))


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and all(_number(value) for value in values)


def _item_entry(entry: Any, where: str) -> Score:
    if entry is None:
        return Score.failure(Status.ERROR, "no score in the score file")
    if _number(entry):
        return Score(value=float(entry))
    if _numbers(entry) and entry:
        return Score(value=float(min(entry)), steps=[float(value) for value in entry])
    raise DataFormatError(f"{where}: expected a number, a non-empty list of numbers or null, got {entry!r}")


def read_score_file(path: Path) -> dict[str, list[Score]]:
    """Per item id, the scores of its candidates in order, from a JSONL file in either layout.

    A candidate record missing before the item's last one becomes a failure (`align_scores`
    pads the end); a candidate given twice keeps its last record (a resumed run that rescored
    it).
    """
    by_candidate: dict[str, dict[int, Score]] = {}
    by_item: dict[str, list[Score]] = {}
    for line in read_jsonl(path):
        record, where = line.data, line.where
        if not isinstance(record.get("id"), str):
            raise DataFormatError(f"{where}: field 'id': every record needs a string id")
        if "scores" in record:
            if not isinstance(record["scores"], list):
                raise DataFormatError(f"{where}: field 'scores': expected a list, one entry per candidate")
            by_item[record["id"]] = [
                _item_entry(entry, f"{where}: field 'scores'[{index}]")
                for index, entry in enumerate(record["scores"])
            ]
            continue
        try:
            item_id, index = split_candidate_id(record["id"])
        except ValueError as error:
            raise DataFormatError(f"{where}: field 'id': {error}, and the record has no 'scores'") from None
        by_candidate.setdefault(item_id, {})[index] = score_from_record(record, where)
    for item_id, candidates in by_candidate.items():
        missing = Score.failure(Status.ERROR, "no score in the score file")
        by_item[item_id] = [candidates.get(index, missing) for index in range(max(candidates) + 1)]
    return by_item
