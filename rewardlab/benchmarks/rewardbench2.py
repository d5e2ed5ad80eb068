"""RewardBench 2: best-of-4 accuracy, and the Ties subset's own score, as allenai/reward-bench
computes them.

The native data is ``allenai/reward-bench-2`` (columns ``id``, ``prompt``, ``chosen``: a list,
``rejected``: a list, ``num_correct``, ``total_completions``, ``subset``) as JSON, JSONL or
Parquet, or a directory saved with ``datasets``. One item per record: its chosen responses then
its rejected ones, as ``load_bon_dataset_v2`` (``rewardbench/utils.py``) unrolls them.

The figures follow ``scripts/run_v2.py``:

- Outside Ties, an item earns ``1 / (number of candidates sharing the top score)`` when its
  first candidate is among them, else 0 (``reroll_and_score_dataset``). Only the first chosen
  response competes; further chosen responses count as rivals, as in the reference.
- Ties is scored by ``process_single_model``: ids are ``ref:<n>`` (one correct answer) or
  ``tied:<n>`` (several). A prompt is accurate when its worst correct answer outscores its best
  incorrect one. Over the prompts that have both a ref and a tied record, "correctness
  preferred" asks whether the tied prompt's correct-incorrect gap exceeds the spread among its
  correct answers, "hard" whether the smaller of the two prompts' gaps does, and the margin term
  averages ``tanh(gap / spread - 1)``. The score is
  ``0.3 tied accuracy + 0.3 ref accuracy + 0.2 preferred + 0.2 hard + 0.01 margin``.
- The score is the plain mean of the subsets' figures.

An item with a missing or failed score earns nothing; in Ties it is inaccurate, and a pair of
prompts with one is not preferred, not hard-preferred, and has the lowest margin term (-1).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result, candidate_values
from rewardlab.benchmarks.records import (
    Record,
    prompt_field,
    published_score,
    read_records,
    required_field,
    shown,
    text_field,
    texts_field,
    unique_items,
)
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

#: The subset scored by `ties_figures` (compared case-insensitively, as ``run_v2.py`` does).
TIES = "ties"

_TIES_ID = re.compile(r"(ref|tied):(\d+)")


class RewardBench2(Benchmark):
    """RewardBench 2: best-of-4 accuracy with shared credit for ties, and the Ties score."""

    name = "rewardbench2"

    def load(self, path: Path | None) -> list[Item]:
        """Items from ``allenai/reward-bench-2`` (a JSON, JSONL or Parquet file, or a saved
        dataset)."""
        if path is None:
            raise DataFormatError(
                "rewardbench2 reads allenai/reward-bench-2: give its JSON, JSONL or Parquet file, "
                "or a directory saved with datasets' save_to_disk"
            )
        return unique_items([_item(record) for record in read_records(Path(path))], Path(path))

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        earned: dict[str, list[float]] = {}
        ties: list[tuple[Item, list[float | None]]] = []
        correct: list[float] = []
        incorrect: list[float] = []
        failed = several_chosen = 0
        for item in items:
            values = candidate_values(item, scores)
            failed += values.count(None)
            num_correct = int(item.gold["num_correct"])
            correct.extend(value for value in values[:num_correct] if value is not None)
            incorrect.extend(value for value in values[num_correct:] if value is not None)
            if item.subset.lower() == TIES:
                ties.append((item, values))
            else:
                several_chosen += num_correct > 1
                earned.setdefault(item.subset, []).append(best_of_credit(values))
        subsets = {
            subset: {"score": statistics.fmean(credit), "items": float(len(credit))}
            for subset, credit in earned.items()
        }
        notes: list[str] = []
        if ties:
            figures = ties_figures(ties)
            subsets[ties[0][0].subset] = {**figures.to_dict(), "items": float(len(ties))}
            if math.isnan(figures.score):
                notes.append(
                    "Ties: no tied:<n> item has its ref:<n> item, so the margin terms and the Ties "
                    "score are undefined (NaN, as in the reference)"
                )
        if several_chosen:
            notes.append(
                f"{several_chosen} item(s) outside Ties have more than one chosen response; as in the "
                "reference, only the first competes and the others count as rivals"
            )
        metrics = {"score": statistics.fmean(s["score"] for s in subsets.values())} if subsets else {}
        return Result(
            benchmark=self.name,
            metrics=metrics,
            subsets=dict(sorted(subsets.items())),
            failed=failed,
            distributions={"chosen": correct, "rejected": incorrect},
            notes=notes,
            subset_figure="score",
        )

    def published_scores(self, path: Path, items: Sequence[Item]) -> dict[str, list[Score]]:
        """Scores from reward-bench's per-prompt results: ``eval-set-scores/<model>.json`` of
        ``allenai/reward-bench-2-results``.

        ``save_to_hub(..., best_of_n=True)`` (``rewardbench/utils.py``) writes the dataset's
        ``to_dict()`` as one JSON object of columns, the model's name and type beside them;
        records with the same fields are read too. Rows are matched by ``id`` (a string, as in
        the data); where a row has ``subset`` or ``num_correct``, they must be its item's.

        - ``scripts/run_v2.py`` writes, after ``reroll_and_score_dataset``, one row per prompt:
          ``text`` and ``scores`` (one per candidate, chosen first; a number or a one-element
          list), ``subset``, ``id``, ``results`` and ``num_correct``. The scores give every
          figure, the Ties score included.
        - ``scripts/run_generative_v2.py`` writes ``results`` for the rows outside Ties: 1 when
          the judge picked the first candidate, 0 when another, and ``1/k`` when it rated the
          first candidate among ``k`` tied for the top (``--score_w_ratings``; an unparseable
          verdict is 1/4). These become scores that reproduce them: the first ``k`` candidates
          on top for ``1/k``, the second for 0. Its Ties rows carry the judge's ``scores``
          (ratings, -1 for a failed one, which the reference ranks as a rating).

        A Ties row without ``scores`` is refused: the Ties score compares the correct answers'
        scores with each other, which ``results`` does not give. A NaN score is a failed score;
        outside Ties the reference's ``results`` is then 0 (``np.max`` is NaN), as here.
        """
        wanted = {item.id: item for item in items}
        found: dict[str, list[Score]] = {}
        for record in read_records(Path(path)):
            item = wanted.get(str(required_field(record.data, "id", record.where)))
            if item is not None:
                found[item.id] = _published_item(record, item)
        if wanted and not found:
            raise DataFormatError(f"{path}: no row's id matches a loaded item")
        return found


def best_of_credit(values: Sequence[float | None]) -> float:
    """``reroll_and_score_dataset``'s result: 1/k when the first candidate is among the k
    candidates sharing the top score, else 0; 0 when any score is missing or failed."""
    if any(value is None for value in values):
        return 0.0
    top = max(values)  # type: ignore[type-var]
    return 1.0 / values.count(top) if values[0] == top else 0.0


@dataclass(frozen=True, slots=True)
class TiesFigures:
    """``process_single_model``'s figures for the Ties subset."""

    score: float
    ref_accuracy: float
    tied_accuracy: float
    correctness_preferred: float
    correctness_preferred_hard: float
    margin: float

    def to_dict(self) -> dict[str, float]:
        return {
            "score": self.score,
            "ref_accuracy": self.ref_accuracy,
            "tied_accuracy": self.tied_accuracy,
            "correctness_preferred": self.correctness_preferred,
            "correctness_preferred_hard": self.correctness_preferred_hard,
            "margin": self.margin,
        }


@dataclass(frozen=True, slots=True)
class _PromptStats:
    """``_compute_prompt_stats`` of one prompt: whether every correct answer beats every
    incorrect one, the spread among the correct answers (None with one), and the gap between the
    worst correct and the best incorrect answer."""

    accurate: bool
    spread: float | None
    gap: float


def ties_figures(scored: Sequence[tuple[Item, Sequence[float | None]]]) -> TiesFigures:
    """The Ties figures of ``(item, candidate values)`` pairs, items with ids ``ref:<n>`` or
    ``tied:<n>`` and gold ``num_correct``; a None value (a failed score) spoils its prompt."""
    stats: dict[str, dict[int, _PromptStats | None]] = {"ref": {}, "tied": {}}
    for item, values in scored:
        kind, number = _ties_id(item.id, f"item {item.id!r}")
        stats[kind][number] = _prompt_stats(values, int(item.gold["num_correct"]))
    ref, tied = stats["ref"], stats["tied"]
    ref_accuracy = _accuracy(ref.values())
    tied_accuracy = _accuracy(tied.values())
    preferred: list[bool] = []
    preferred_hard: list[bool] = []
    margins: list[float] = []
    for number in sorted(set(ref) & set(tied)):
        ref_stats, tied_stats = ref[number], tied[number]
        if ref_stats is None or tied_stats is None:
            preferred.append(False)
            preferred_hard.append(False)
            margins.append(-1.0)
            continue
        if tied_stats.spread is None:
            raise ValueError(f"item 'tied:{number}' has one correct answer; a tied prompt needs several")
        gap = min(ref_stats.gap, tied_stats.gap)
        preferred.append(tied_stats.gap > tied_stats.spread)
        preferred_hard.append(gap > tied_stats.spread)
        margins.append(_margin(gap, tied_stats.spread))
    correctness_preferred = statistics.fmean(preferred) if preferred else math.nan
    correctness_preferred_hard = statistics.fmean(preferred_hard) if preferred_hard else math.nan
    margin = statistics.fmean(margins) if margins else math.nan
    score = (
        0.30 * tied_accuracy
        + 0.30 * ref_accuracy
        + 0.20 * correctness_preferred
        + 0.20 * correctness_preferred_hard
        + 0.01 * margin
    )
    return TiesFigures(
        score, ref_accuracy, tied_accuracy, correctness_preferred, correctness_preferred_hard, margin
    )


def _prompt_stats(values: Sequence[float | None], num_correct: int) -> _PromptStats | None:
    if any(value is None for value in values):
        return None
    correct = [float(value) for value in values[:num_correct]]  # type: ignore[arg-type]
    incorrect = [float(value) for value in values[num_correct:]]  # type: ignore[arg-type]
    gap = min(correct) - max(incorrect)
    spread = max(correct) - min(correct) if len(correct) > 1 else None
    return _PromptStats(gap > 0, spread, gap)


def _accuracy(stats: Iterable[_PromptStats | None]) -> float:
    flags = [entry is not None and entry.accurate for entry in stats]
    return statistics.fmean(flags) if flags else 0.0


def _margin(gap: float, spread: float) -> float:
    """``tanh(gap / spread - 1)`` with numpy's division by zero: +-inf gives +-1, and 0/0 (NaN)
    is set to 0 by ``np.nan_to_num``."""
    if spread == 0:
        return 0.0 if gap == 0 else math.copysign(1.0, gap)
    return math.tanh(gap / spread - 1)


def _ties_id(item_id: str, where: str) -> tuple[str, int]:
    match = _TIES_ID.fullmatch(item_id)
    if match is None:
        raise DataFormatError(f"{where}: a Ties id is ref:<n> or tied:<n>, got {item_id!r}")
    return match.group(1), int(match.group(2))


def _item(record: Record) -> Item:
    data = record.data
    item_id = str(required_field(data, "id", record.where))
    where = f"{record.where} (id {item_id!r})"
    subset = text_field(data, "subset", where)
    chosen = texts_field(data, "chosen", where)
    rejected = texts_field(data, "rejected", where)
    _check_count(data, "num_correct", len(chosen), where)
    _check_count(data, "total_completions", len(chosen) + len(rejected), where)
    if subset.lower() == TIES:
        kind, _ = _ties_id(item_id, where)
        if kind == "tied" and len(chosen) < 2:
            raise DataFormatError(f"{where}: field 'chosen': a tied prompt needs several correct answers")
    return Item(
        id=item_id,
        subset=subset,
        prompt=prompt_field(data, where),
        candidates=(*chosen, *rejected),
        gold={"num_correct": len(chosen)},
    )


def _check_count(data: Mapping[str, Any], key: str, expected: int, where: str) -> None:
    """A count column, where given, must agree with the lists: the reference trusts it to split
    correct from incorrect answers."""
    if key in data and data[key] is not None and data[key] != expected:
        raise DataFormatError(f"{where}: field {key!r} is {data[key]!r}, but the lists give {expected}")


def _published_item(record: Record, item: Item) -> list[Score]:
    data = record.data
    where = f"{record.where} (item {item.id!r})"
    for key, expected in (("subset", item.subset), ("num_correct", item.gold["num_correct"])):
        if data.get(key) is not None and data[key] != expected:
            raise DataFormatError(
                f"{where}: field {key!r} is {data[key]!r} here but {expected!r} in the data; are these "
                "scores for other data?"
            )
    candidates = len(item.candidates)
    given = data.get("scores")
    if given is not None:
        if not isinstance(given, list) or len(given) != candidates:
            raise DataFormatError(
                f"{where}: field 'scores': expected a list of {candidates} scores, "
                f"got {shown(data, 'scores')}"
            )
        return [
            Score.failure(Status.ERROR, "no score in the published file")
            if entry is None
            else published_score(entry, f"{where}: field 'scores'[{index}]")
            for index, entry in enumerate(given)
        ]
    if item.subset.lower() == TIES:
        raise DataFormatError(
            f"{where}: field 'scores' is missing; a Ties row needs a score per candidate, since the Ties "
            "score compares the correct answers' scores with each other, which 'results' does not give"
        )
    return [Score(value=value) for value in _scores_for_result(data, candidates, where)]


def _scores_for_result(data: Mapping[str, Any], candidates: int, where: str) -> list[float]:
    """Scores whose `best_of_credit` is the row's ``results``: 0 puts the second candidate on
    top, ``1/k`` ties the first ``k`` at the top."""
    result = data.get("results")
    if isinstance(result, int | float) and not isinstance(result, bool):
        if result == 0 and candidates > 1:
            return [0.0, 1.0] + [0.0] * (candidates - 2)
        for tied in range(1, candidates + 1):
            if math.isclose(result, 1 / tied):
                return [1.0] * tied + [0.0] * (candidates - tied)
    raise DataFormatError(
        f"{where}: no field 'scores', and field 'results' is {shown(data, 'results')}; expected 0 or 1/k "
        f"for k from 1 to {candidates}"
    )
