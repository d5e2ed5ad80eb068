"""ProcessBench's data as items, scored by its first-error metric (`processbench`).

The native files are QwenLM/ProcessBench's ``dataset/<split>.json``: a JSON list of records
(``id``, ``generator``, ``problem``, ``steps``, ``final_answer_correct``, ``label``: the index
of the earliest wrong step, -1 when there is none). One item per record: the solution's given
steps joined by blank lines are the one candidate, and the steps themselves travel in the
``steps`` field, so a process reward scores exactly the steps the label indexes.

The figures follow the reference evaluation, ``code/run_eval_prm_trl.py`` of QwenLM/ProcessBench:
per split, the accuracy on erroneous items, on correct items, and their harmonic mean; overall,
the mean F1 over splits ("Average F1"). That script flags a step whose positive-class
probability does not win the argmax, i.e. a fixed threshold of 0.5, so 0.5 is the default here.
The one difference: a step scored exactly 0.5 is wrong there (``torch.argmax`` takes the first
of equal logits, the "wrong" class) and right here (`predicted_first_error` flags scores
strictly below the threshold). A threshold can instead be chosen on data other than the split
it is reported on (``threshold=None``): on the other splits, or on a named validation subset.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.benchmarks.first_error import choose_threshold, first_error_f1, predicted_first_error
from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result, calibration_pairs
from rewardlab.benchmarks.records import read_record_files, shown, text_field, texts_field, unique_items
from rewardlab.errors import DataFormatError

#: The prediction of an item whose score failed: equal to no label, so it is never right.
_WRONG = -2


@dataclass(frozen=True, slots=True)
class _Scored:
    """One item's label and its step scores; ``steps`` is None when the score failed."""

    label: int
    steps: list[float] | None


class ProcessBench(Benchmark):
    """ProcessBench: find the earliest wrong step of a math solution.

    Args:
        threshold: A step scored below it is wrong (default 0.5, the reference's argmax).
            ``None`` chooses it with `choose_threshold` on data the figures do not cover: with
            ``validation_subset``, on that subset; otherwise, per split, on the other splits
            (leave-one-split-out), which needs at least two splits.
        validation_subset: A subset used only to choose the threshold; it is left out of the
            figures whatever the threshold.

    A candidate whose score failed, has no step scores, or has a different number of step scores
    than the item has steps, counts as a wrong prediction and in `Result.failed`.
    """

    name = "processbench"

    def __init__(self, threshold: float | None = 0.5, validation_subset: str | None = None):
        self.threshold = threshold
        self.validation_subset = validation_subset

    def load(self, path: Path | None) -> list[Item]:
        """Items from a ``<split>.json`` file (the split is the file's stem; JSONL and Parquet
        are read too), a directory of them (one split per file), or a directory written by
        ``datasets``' ``save_to_disk`` (its splits; a saved ``Dataset`` is one, named after the
        directory)."""
        if path is None:
            raise DataFormatError(
                "processbench reads QwenLM/ProcessBench's data: give a dataset/<split>.json file, "
                "a directory of them, or a saved datasets directory"
            )
        items = [
            processbench_item(record.data, split, record.where)
            for split, records in read_record_files(Path(path), ".json", saved_datasets=True)
            for record in records
        ]
        return unique_items(items, Path(path))

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        return evaluate_first_errors(
            self.name, items, scores, threshold=self.threshold, validation_subset=self.validation_subset
        )


def processbench_item(record: Mapping[str, Any], split: str, where: str) -> Item:
    """One ProcessBench record as an item; ``where`` names the record in errors."""
    record_id = record.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise DataFormatError(f"{where}: field 'id': expected a non-empty string, got {shown(record, 'id')}")
    where = f"{where} (id {record_id!r})"
    problem = text_field(record, "problem", where)
    steps = texts_field(record, "steps", where)
    label = record.get("label")
    if not isinstance(label, int) or isinstance(label, bool) or not -1 <= label < len(steps):
        raise DataFormatError(
            f"{where}: field 'label': expected -1 or a step index below {len(steps)}, "
            f"got {shown(record, 'label')}"
        )
    return Item(
        id=record_id,
        subset=split,
        prompt=problem,
        candidates=("\n\n".join(steps),),
        gold={"label": label},
        fields={"steps": list(steps)},
    )


def evaluate_first_errors(
    benchmark: str,
    items: Sequence[Item],
    scores: ItemScores,
    *,
    threshold: float | None,
    validation_subset: str | None = None,
) -> Result:
    """ProcessBench's figures for items whose gold is ``{"label": first error}`` and whose one
    candidate is scored per step; see `ProcessBench` for ``threshold`` and ``validation_subset``.

    Per reported subset: ``error_accuracy``, ``correct_accuracy``, ``f1`` (`first_error_f1`);
    ``metrics["f1"]`` is their mean over subsets, as ProcessBench's "Average F1". A threshold
    chosen here is written in `Result.notes`; the scores of steps before the first error and
    of the first wrong steps go to `Result.distributions`.
    """
    by_subset: dict[str, list[_Scored]] = {}
    failed = mismatched = 0
    for item in items:
        steps, problem = _step_scores(item, scores)
        failed += problem is not None
        mismatched += problem == "mismatch"
        by_subset.setdefault(item.subset, []).append(_Scored(int(item.gold["label"]), steps))
    reported = sorted(subset for subset in by_subset if subset != validation_subset)
    if validation_subset is not None and validation_subset not in by_subset:
        raise ValueError(
            f"validation subset {validation_subset!r} has no items (subsets: {', '.join(sorted(by_subset))})"
        )
    if not reported:
        raise ValueError("no items to report: every item is in the validation subset, or there are none")
    notes: list[str] = []
    thresholds = _thresholds(by_subset, reported, threshold, validation_subset, notes)
    subsets: dict[str, dict[str, float]] = {}
    for subset in reported:
        chosen = thresholds[subset]
        predicted = [
            _WRONG if scored.steps is None or chosen is None else predicted_first_error(scored.steps, chosen)
            for scored in by_subset[subset]
        ]
        figures = first_error_f1(predicted, [scored.label for scored in by_subset[subset]])
        subsets[subset] = {
            "error_accuracy": figures.error_accuracy,
            "correct_accuracy": figures.correct_accuracy,
            "f1": figures.f1,
            "items": figures.items,
        }
    if mismatched:
        notes.append(
            f"{mismatched} candidate(s) had a number of step scores other than their given steps "
            "(counted as failed: the label indexes the given steps)"
        )
    distributions = _step_distributions(by_subset[subset] for subset in reported)
    return Result(
        benchmark=benchmark,
        metrics={"f1": statistics.fmean(subsets[subset]["f1"] for subset in reported)},
        subsets=subsets,
        failed=failed,
        distributions=distributions,
        calibration=calibration_pairs(*distributions.values()),
        notes=notes,
        subset_figure="f1",
    )


def _step_scores(item: Item, scores: ItemScores) -> tuple[list[float] | None, str | None]:
    """The item's step scores, or None and why not (``"failed"``, ``"mismatch"``)."""
    given = scores.get(item.id, ())
    if not given or not given[0].ok or not given[0].steps:
        return None, "failed"
    if len(given[0].steps) != len(item.fields["steps"]):
        return None, "mismatch"
    return list(given[0].steps), None


def _thresholds(
    by_subset: Mapping[str, list[_Scored]],
    reported: list[str],
    threshold: float | None,
    validation_subset: str | None,
    notes: list[str],
) -> dict[str, float | None]:
    """The threshold each reported subset is scored at; None where none could be chosen (every
    item it would be chosen on failed)."""
    if threshold is not None:
        notes.append(f"threshold {threshold:g} (fixed)")
        return dict.fromkeys(reported, threshold)
    if validation_subset is not None:
        chosen = _chosen(by_subset[validation_subset])
        notes.append(f"threshold {_shown_threshold(chosen)} chosen on subset {validation_subset!r}")
        return dict.fromkeys(reported, chosen)
    if len(by_subset) < 2:
        raise ValueError(
            f"threshold=None chooses each split's threshold on the other splits, and there is only one "
            f"split ({next(iter(by_subset))!r}): give a threshold, a validation subset, or more splits"
        )
    thresholds: dict[str, float | None] = {}
    for subset in reported:
        others = sorted(other for other in by_subset if other != subset)
        thresholds[subset] = _chosen([scored for other in others for scored in by_subset[other]])
        notes.append(
            f"{subset}: threshold {_shown_threshold(thresholds[subset])} chosen on {', '.join(others)}"
        )
    return thresholds


def _chosen(scored: Sequence[_Scored]) -> float | None:
    usable = [item for item in scored if item.steps is not None]
    if not usable:
        return None
    return choose_threshold([item.steps or [] for item in usable], [item.label for item in usable])


def _shown_threshold(threshold: float | None) -> str:
    return (
        "none (every item it would be chosen on failed; all counted wrong)"
        if threshold is None
        else f"{threshold:.6g}"
    )


def _step_distributions(groups: Iterator[list[_Scored]]) -> dict[str, list[float]]:
    """Scores of the steps known to be right (before the first error) and of the first wrong
    steps: the two a threshold has to separate."""
    right: list[float] = []
    first_wrong: list[float] = []
    for group in groups:
        for scored in group:
            if scored.steps is None:
                continue
            cut = len(scored.steps) if scored.label == -1 else scored.label
            right.extend(scored.steps[:cut])
            if scored.label != -1:
                first_wrong.append(scored.steps[scored.label])
    return {"steps before the first error": right, "first wrong steps": first_wrong}
