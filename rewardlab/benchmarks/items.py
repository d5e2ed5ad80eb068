"""What every benchmark is made of: items of candidates, per-candidate scores, and a result.

A benchmark question becomes an `Item`: one prompt and the candidates a reward scores (a chosen
and a rejected response, four responses of which one is right, N sampled solutions, one
step-labelled solution). Every candidate is scored on its own as a `Sample` - the reward never
sees which one is gold - and the benchmark's metric reads the scores back per item. A pairwise
or listwise judge still sees the whole item: the candidates of one item share a ``group_id``.

Scores come from running a reward (`rewardlab.benchmarks.runner`) or from a file of
precomputed scores, so a metric never knows which.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Sample, Score, Text

#: The `Sample.fields` key that groups the candidates of one item, read by pairwise and
#: listwise judges (their ``group_field`` default).
GROUP_FIELD = "group_id"

#: Per item id, the scores of its candidates in candidate order.
ItemScores = Mapping[str, Sequence[Score]]


def calibration_pairs(right: Iterable[float], wrong: Iterable[float]) -> list[tuple[float, bool]]:
    """(score, outcome) pairs for `Result.calibration`: the scores of candidates (or steps) known
    right and known wrong - when every one is a probability, within [0, 1]. Otherwise none: a
    reliability curve of unbounded scores means nothing."""
    pairs = [(value, True) for value in right] + [(value, False) for value in wrong]
    return pairs if all(0.0 <= value <= 1.0 for value, _ in pairs) else []


def candidate_id(item_id: str, index: int) -> str:
    """The sample id of an item's ``index``-th candidate: ``<item id>#<index>``."""
    return f"{item_id}#{index}"


def split_candidate_id(sample_id: str) -> tuple[str, int]:
    """The inverse of `candidate_id`."""
    item_id, _, index = sample_id.rpartition("#")
    if not item_id or not index.isdigit():
        raise ValueError(f"{sample_id!r} is not a candidate id (<item id>#<index>)")
    return item_id, int(index)


@dataclass(frozen=True, slots=True)
class Item:
    """One benchmark question.

    Attributes:
        id: Unique within the benchmark; candidate sample ids derive from it.
        subset: The subset (or split, or source) the metric groups by.
        prompt: What the candidates answer: text or chat messages.
        candidates: The responses to score, each as a separate sample.
        gold: What the metric needs and the reward must not see: which candidate is chosen,
            which are correct, the first-error index, ...
        reference: A reference answer a reward may use (e.g. the gold answer for `math_answer`);
            ``None`` where the benchmark gives the reward none.
        fields: Extra data a reward may use, copied into every candidate's `Sample.fields`
            (e.g. ``steps``: a solution's given steps for a process reward).
        candidate_fields: Per-candidate extras, merged over ``fields`` (empty, or one mapping
            per candidate).
    """

    id: str
    subset: str
    prompt: Text
    candidates: tuple[Text, ...]
    gold: Mapping[str, Any] = field(default_factory=dict)
    reference: str | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    candidate_fields: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.candidate_fields and len(self.candidate_fields) != len(self.candidates):
            raise ValueError(
                f"item {self.id!r}: {len(self.candidate_fields)} candidate_fields for "
                f"{len(self.candidates)} candidates"
            )

    def samples(self) -> list[Sample]:
        """The candidates as samples, in order, grouped by the item's id."""
        return [
            Sample(
                prompt=self.prompt,
                completion=completion,
                reference=self.reference,
                id=candidate_id(self.id, index),
                fields={
                    **self.fields,
                    **(self.candidate_fields[index] if self.candidate_fields else {}),
                    GROUP_FIELD: self.id,
                    "subset": self.subset,
                },
            )
            for index, completion in enumerate(self.candidates)
        ]


@dataclass(slots=True)
class Result:
    """A benchmark's figures, and the data its plots are drawn from.

    Attributes:
        benchmark: The benchmark's name.
        metrics: Headline figures, by name (e.g. ``score``, ``chat``, ``hard``).
        subsets: Per subset, its figures by name; each has ``items``.
        failed: Candidates whose score failed (each counts against its item, never for it).
        distributions: Score values by group, for the chosen-vs-rejected histogram
            (e.g. ``{"chosen": [...], "rejected": [...]}``).
        curves: Named curves over n, for the best-of-N plot: name -> y per n = 1, 2, ...
        calibration: (probability, outcome) pairs, where scores are probabilities of being right.
        notes: Anything a reader of the report must know (a chosen threshold, skipped items).
        subset_figure: The per-subset figure the report's bar chart shows.
    """

    benchmark: str
    metrics: dict[str, float]
    subsets: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: int = 0
    distributions: dict[str, list[float]] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)
    calibration: list[tuple[float, bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    subset_figure: str = "accuracy"

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "metrics": self.metrics,
            "subsets": self.subsets,
            "failed": self.failed,
            "curves": self.curves,
            "notes": self.notes,
        }


def candidate_values(item: Item, scores: ItemScores) -> list[float | None]:
    """The values of an item's candidates in order; None for a candidate whose score is missing
    or failed, which every metric counts against its item."""
    given = list(scores.get(item.id, ()))[: len(item.candidates)]
    values = [score.value if score.ok else None for score in given]
    return values + [None] * (len(item.candidates) - len(values))


class Benchmark(abc.ABC):
    """A benchmark: how to read its files into items, and its metric, exactly as its reference
    code computes it.

    ``name`` is the name ``rewardlab bench NAME`` takes. Subclasses that ship a generated suite
    accept ``path=None`` in `load`; the others raise `DataFormatError` for it.
    """

    name: str

    @abc.abstractmethod
    def load(self, path: Path | None) -> list[Item]:
        """The items of the benchmark file (or directory, or saved dataset) at ``path``."""

    @abc.abstractmethod
    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        """The metric over ``items`` given every candidate's score. A missing or failed score
        counts as the reward getting that item wrong, and is counted in `Result.failed`."""

    def published_scores(self, path: Path, items: Sequence[Item]) -> dict[str, list[Score]]:
        """Scores from a file in the format the benchmark's own repository publishes (per-pair
        outputs, per-response rewards), keyed like `ItemScores`. Benchmarks without such a
        format accept only rewardlab's own score files."""
        raise DataFormatError(f"{self.name} has no published score format; give a rewardlab score file")
