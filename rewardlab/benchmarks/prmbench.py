"""PRMBench: step-level error detection, scored per error category by PRMScore.

The native file is ``prmbench_Preview.jsonl`` (ssmisya/PRMBench; the format of
``docs/data_format.md`` and ``mr_eval/tasks/prmtest_classified_subset400/data/target_data.jsonl``):
one record per modified solution, with ``idx`` (shared by the records made from one original
solution), ``classification`` (the error category), ``modified_question``,
``modified_process`` (a list of steps), ``error_steps`` (1-based indices of the wrong steps),
and the ``original_question`` and ``original_process`` it was made from.

Items follow the reference loader, ``load_data_function`` of
``mr_eval/tasks/prmtest_classified/task.py``: one item per record (id
``<classification>_<idx>``, the first record of a duplicate id kept), and one more item,
``correct_<idx>`` in subset ``correct``, holding the original process, for every ``idx`` that has
a ``redundency`` record (only those: the reference adds the original processes there).

The metric follows ``evaluate_function`` and ``eval_on_hallucination_step`` of the same file,
and PRMScore the leaderboard notebook
``mr_visualize/eval_res_view/draw_tabs/form_excel_strs.ipynb``:

- A step is predicted right when its score is above 0.5 (``step_level_validity_labels`` are
  ``score > validity_threshold``, 0.5 by default in ``mr_eval/models/abstract_model.py``).
- Right steps are the positive class: TP a right step predicted right, FN predicted wrong, TN
  an error step predicted wrong, FP predicted right. F1 is the positive class's, negative F1 the
  error steps' (precision TN / (TN + FN), recall TN / (TN + FP)).
- PRMScore = 0.5 F1 + 0.5 negative F1, per category and over every category but ``correct``
  (the reference keeps the original processes out of the totals).
- Where the reference divides by zero it writes -1 and computes on with it; so does this, so
  that published figures reproduce (o1-mini's multi_solutions PRMScore is 0.0: F1 1, negative
  F1 -1). A category without error steps has no negative class: the README leaderboard shows its
  F1 instead (MS.), and so does the per-subset ``score`` here.
- Category groups as in the README: simplicity (NR., NCL.), soundness (ES., SC., DC., CI.),
  sensitivity (PS., DR., MS.), each the mean of its categories' ``score``.

Where rewardlab departs from the reference: a candidate whose score failed, or whose step
scores do not match its steps in number, counts as every step mispredicted (the reference drops
such items); and only validity (step) scores are read - the reference's separate redundancy
labels for ReasonEval do not exist in rewardlab's `Score`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result, calibration_pairs
from rewardlab.benchmarks.records import read_record_files, shown, text_field, texts_field
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score

#: The category whose records also bring the original, correct process (the reference's
#: ``correct_sample_classification``, spelt as in the data).
CORRECT_FROM = "redundency"
#: The subset of the original processes.
CORRECT = "correct"
#: The README's category groups, by the data's category names.
GROUPS = {
    "simplicity": ("redundency", "circular"),
    "soundness": ("counterfactual", "step_contradiction", "domain_inconsistency", "confidence"),
    "sensitivity": ("missing_condition", "deception", "multi_solutions"),
}


@dataclass(slots=True)
class Confusion:
    """Step counts, right steps being the positive class (the reference's ``f1_matrix``)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def add(self, other: Confusion) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.tn += other.tn
        self.fn += other.fn

    @property
    def f1(self) -> float:
        return reference_f1(self.tp, self.fp, self.fn)

    @property
    def negative_f1(self) -> float:
        return reference_f1(self.tn, self.fn, self.fp)

    @property
    def prmscore(self) -> float:
        return 0.5 * self.f1 + 0.5 * self.negative_f1


def reference_f1(hits: int, false_alarms: int, misses: int) -> float:
    """F1 with the reference's -1 for a zero denominator, carried into the next step as it is
    there (precision or recall -1, F1 computed from them; -1 when they sum to 0)."""
    precision = hits / (hits + false_alarms) if hits + false_alarms else -1
    recall = hits / (hits + misses) if hits + misses else -1
    return 2 * precision * recall / (precision + recall) if precision + recall else -1


def step_confusion(error_steps: Sequence[int], predicted_right: Sequence[bool]) -> Confusion:
    """The confusion counts of one process: ``error_steps`` 1-based, one prediction per step."""
    wrong = {step - 1 for step in error_steps}
    counts = Confusion()
    for index, right in enumerate(predicted_right):
        if index in wrong:
            counts.fp += right
            counts.tn += not right
        else:
            counts.tp += right
            counts.fn += not right
    return counts


class PRMBench(Benchmark):
    """PRMBench: which steps of a modified solution are wrong, per error category.

    Args:
        threshold: A step scored above it is predicted right (default 0.5, the reference's
            ``validity_threshold``).
    """

    name = "prmbench"

    def __init__(self, threshold: float = 0.5):
        self.threshold = threshold

    def load(self, path: Path | None) -> list[Item]:
        """Items from ``prmbench_Preview.jsonl`` (or the same records as JSON or Parquet), a
        directory of such JSONL files (the reference reads a directory), or a directory written by
        ``datasets``' ``save_to_disk``."""
        if path is None:
            raise DataFormatError(
                "prmbench reads ssmisya/PRMBench's data: give prmbench_Preview.jsonl, a directory "
                "of such files, or a saved datasets directory"
            )
        items: list[Item] = []
        seen: set[str] = set()
        for _, records in read_record_files(Path(path), ".jsonl", saved_datasets=True):
            for record in records:
                for item in prmbench_items(record.data, record.where):
                    if item.id not in seen:
                        seen.add(item.id)
                        items.append(item)
        return items

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        by_subset: dict[str, Confusion] = {}
        subset_items: dict[str, int] = {}
        failed = 0
        distributions: dict[str, list[float]] = {"right steps": [], "error steps": []}
        for item in items:
            error_steps = set(item.gold["error_steps"])
            steps = _step_scores(scores.get(item.id, ()), len(item.fields["steps"]))
            if steps is None:
                failed += 1
                predicted = [index + 1 in error_steps for index in range(len(item.fields["steps"]))]
            else:
                predicted = [score > self.threshold for score in steps]
                for index, score in enumerate(steps):
                    distributions["error steps" if index + 1 in error_steps else "right steps"].append(score)
            by_subset.setdefault(item.subset, Confusion()).add(
                step_confusion(item.gold["error_steps"], predicted)
            )
            subset_items[item.subset] = subset_items.get(item.subset, 0) + 1
        if not by_subset:
            raise ValueError("no items to evaluate")
        total = Confusion()
        for subset, counts in by_subset.items():
            if subset != CORRECT:
                total.add(counts)
        subsets = {
            subset: {
                "f1": counts.f1,
                "negative_f1": counts.negative_f1,
                "prmscore": counts.prmscore,
                "score": counts.prmscore if counts.tn + counts.fp else counts.f1,
                "items": float(subset_items[subset]),
            }
            for subset, counts in sorted(by_subset.items())
        }
        metrics = {"prmscore": total.prmscore, "f1": total.f1, "negative_f1": total.negative_f1}
        notes = [f"a step is predicted right when its score is above {self.threshold:g}"]
        for group, categories in GROUPS.items():
            missing = [category for category in categories if category not in subsets]
            if missing:
                notes.append(f"no {group} average: no items of {', '.join(missing)}")
            else:
                metrics[group] = statistics.fmean(subsets[category]["score"] for category in categories)
        return Result(
            benchmark=self.name,
            metrics=metrics,
            subsets=subsets,
            failed=failed,
            distributions=distributions,
            calibration=calibration_pairs(distributions["right steps"], distributions["error steps"]),
            notes=notes,
            subset_figure="score",
        )


def _step_scores(given: Sequence[Score], steps: int) -> list[float] | None:
    """The candidate's step scores; None when its score failed or does not cover its steps."""
    if not given or not given[0].ok or given[0].steps is None or len(given[0].steps) != steps:
        return None
    return list(given[0].steps)


def prmbench_items(record: Mapping[str, Any], where: str) -> list[Item]:
    """The items of one record: its modified process, and for a ``redundency`` record also the
    original process (`CORRECT`)."""
    idx = record.get("idx")
    if not isinstance(idx, str) or not idx:
        raise DataFormatError(
            f"{where}: field 'idx': expected a non-empty string, got {shown(record, 'idx')}"
        )
    where = f"{where} (idx {idx!r})"
    classification = text_field(record, "classification", where)
    error_steps = record.get("error_steps")
    if not isinstance(error_steps, list) or not all(
        isinstance(step, int) and not isinstance(step, bool) and step >= 1 for step in error_steps
    ):
        raise DataFormatError(
            f"{where}: field 'error_steps': expected a list of 1-based step numbers, "
            f"got {shown(record, 'error_steps')}"
        )
    items = [
        _process_item(
            f"{classification}_{idx}",
            classification,
            text_field(record, "modified_question", where),
            texts_field(record, "modified_process", where),
            error_steps,
        )
    ]
    if classification == CORRECT_FROM:
        items.append(
            _process_item(
                f"{CORRECT}_{idx}",
                CORRECT,
                text_field(record, "original_question", where),
                texts_field(record, "original_process", where),
                [],
            )
        )
    return items


def _process_item(item_id: str, subset: str, question: str, steps: list[str], error_steps: list[int]) -> Item:
    return Item(
        id=item_id,
        subset=subset,
        prompt=question,
        candidates=("\n\n".join(steps),),
        gold={"error_steps": list(error_steps)},
        fields={"steps": list(steps)},
    )
