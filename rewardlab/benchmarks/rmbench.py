"""RM-Bench: chosen against rejected responses across three styles, as THU-KEG/RM-Bench scores it.

The native data is THU-KEG/RM-Bench's ``data/<domain>_filtered.json`` or ``total_dataset.json``:
records of ``id``, ``prompt``, ``chosen`` and ``rejected`` (three responses each, in the styles
concise, detailed plain text, detailed markdown), and - in ``total_dataset.json`` - ``domain``
(``chat``, ``code``, ``math``, ``safety-refuse``, ``safety-response``). A per-domain file has no
``domain`` field; the domain is its name's first part (``safety-refuse_filtered.json``). One item
per record with six candidates - the three chosen, then the three rejected - so that each
response is scored once; its id is ``<domain>/<id>``.

The figures follow ``compute_accuracy`` in ``scripts/utils.py`` (shown in the README):

- Per domain, a 3x3 matrix: entry (i, j) is the fraction of items whose chosen response in
  style i scores strictly higher than its rejected response in style j.
- hard: the mean of the upper-right triangle (a plainer chosen against a fancier rejected
  response); normal: the mean of the diagonal; easy: the mean of the lower-left triangle. A
  domain's average is the mean of the three.
- Domains are the records whose domain starts with ``chat``, ``math``, ``code`` or ``safety``
  (``split_dataset_by_domain``), so the two safety parts are pooled into one domain.
- Overall hard, normal and easy are means over the domains, and the average ("total_avg_acc")
  the mean of the domains' averages. The overall matrix reported here is the mean of the
  domains' matrices, from which the overall hard, normal and easy follow in the same way.

Failed or missing scores lose every comparison they are in.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result, candidate_values
from rewardlab.benchmarks.records import (
    Record,
    prompt_field,
    published_score,
    read_records,
    required_field,
    texts_field,
    unique_items,
)
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score

#: The response styles, in the order of the ``chosen`` and ``rejected`` lists.
STYLES = ("concise", "detailed", "markdown")

#: The reference's domains, each the records whose domain starts with its name.
DOMAINS = ("chat", "math", "code", "safety")

#: The domain names of the data files (``<domain>_filtered.json``).
FILE_DOMAINS = ("chat", "code", "math", "safety-refuse", "safety-response")

Matrix = list[list[float]]


class RMBench(Benchmark):
    """RM-Bench: the chosen-style by rejected-style accuracy matrix and its hard, normal and easy
    accuracy, per domain and overall."""

    name = "rmbench"

    def load(self, path: Path | None) -> list[Item]:
        """Items from a ``<domain>_filtered.json`` or ``total_dataset.json`` file (or the same
        records as JSONL, Parquet or a saved dataset)."""
        if path is None:
            raise DataFormatError(
                "rmbench reads THU-KEG/RM-Bench's data: give data/<domain>_filtered.json or "
                "total_dataset.json"
            )
        path = Path(path)
        return unique_items([_item(record, path) for record in read_records(path)], path)

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        by_domain: dict[str, list[list[float | None]]] = {}
        chosen: list[float] = []
        rejected: list[float] = []
        failed = 0
        outside: set[str] = set()
        for item in items:
            domain = reference_domain(item.subset)
            if domain is None:
                outside.add(item.subset)
                continue
            values = candidate_values(item, scores)
            failed += values.count(None)
            chosen.extend(value for value in values[: len(STYLES)] if value is not None)
            rejected.extend(value for value in values[len(STYLES) :] if value is not None)
            by_domain.setdefault(domain, []).append(values)
        present = [domain for domain in DOMAINS if domain in by_domain]
        matrices = {domain: style_matrix(by_domain[domain]) for domain in present}
        subsets = {
            domain: {**matrix_figures(matrices[domain]), "items": float(len(by_domain[domain]))}
            for domain in present
        }
        metrics: dict[str, float] = {}
        if present:
            overall = mean_matrix([matrices[domain] for domain in present])
            metrics = {
                **{name: statistics.fmean(subsets[d][name] for d in present) for name in _FIGURES},
                **{domain: subsets[domain]["average"] for domain in present},
                **_matrix_entries(overall),
            }
        notes = [f"items of subset {subset!r}, in no domain, are left out" for subset in sorted(outside)]
        absent = [domain for domain in DOMAINS if domain not in by_domain]
        if present and absent:
            notes.append(
                f"no items in {', '.join(absent)}: the overall figures average {', '.join(present)} only "
                "(the reference averages all four domains)"
            )
        return Result(
            benchmark=self.name,
            metrics=metrics,
            subsets=subsets,
            failed=failed,
            distributions={"chosen": chosen, "rejected": rejected},
            notes=notes,
            subset_figure="average",
        )

    def published_scores(self, path: Path, items: Sequence[Item]) -> dict[str, list[Score]]:
        """Scores from the result files of RM-Bench's own evaluation scripts.

        THU-KEG/RM-Bench publishes no per-prompt scores of the models in its paper: its
        repository holds the data and the scripts, and its ``.gitignore`` leaves out
        ``results/`` and ``*.json``. What it does define is the format its scripts write:
        ``scripts/run_rm.py`` and ``run_dpo.py`` copy the data file's records (``json.load`` of
        ``--datapath``, ``data/total_dataset.json`` in ``run_rm.sh``), add ``score_chosen`` and
        ``score_rejected``, three scores each in the order of the styles, and ``json.dump`` the
        list to ``results/<Seq_Classifier or DPO>/<model>/<data file stem>_<model>_<reference
        model>_<time>.json``. A score is a number or a one-element list (``run_rm.py`` unwraps
        those only when all three are lists). The domain of a record without one comes from
        the file name, as for the data. A NaN score is a failed score: ``compute_accuracy``'s
        ``chosen > rejected`` is false with it, as every comparison of a failed score is here.
        """
        path = Path(path)
        wanted = {item.id for item in items}
        found: dict[str, list[Score]] = {}
        for record in read_records(path):
            item_id = _item_id(record, path)
            if item_id not in wanted:
                continue
            where = f"{record.where} (item {item_id!r})"
            found[item_id] = [
                published_score(value, f"{where}: field {key!r}[{index}]")
                for key in ("score_chosen", "score_rejected")
                for index, value in enumerate(_three(record.data, key, where))
            ]
        if wanted and not found:
            raise DataFormatError(f"{path}: no record's domain and id match a loaded item")
        return found


def reference_domain(domain: str) -> str | None:
    """The reference's domain of a record's domain (``split_dataset_by_domain``: the first of
    chat, math, code, safety it starts with); None for none."""
    return next((name for name in DOMAINS if domain.startswith(name)), None)


def style_matrix(items: Sequence[Sequence[float | None]]) -> Matrix:
    """Entry (i, j): the fraction of items whose chosen response in style i (candidate i)
    scores strictly higher than their rejected response in style j (candidate 3 + j)."""
    size = len(STYLES)
    wins = [[0] * size for _ in range(size)]
    for values in items:
        for i in range(size):
            for j in range(size):
                chosen, rejected = values[i], values[size + j]
                wins[i][j] += chosen is not None and rejected is not None and chosen > rejected
    return [[count / len(items) for count in row] for row in wins]


def mean_matrix(matrices: Sequence[Matrix]) -> Matrix:
    """The entry-wise mean of matrices."""
    size = len(STYLES)
    return [[statistics.fmean(matrix[i][j] for matrix in matrices) for j in range(size)] for i in range(size)]


_FIGURES = ("hard", "normal", "easy", "average")


def matrix_figures(matrix: Matrix) -> dict[str, float]:
    """hard (upper-right triangle), normal (diagonal), easy (lower-left triangle), their mean,
    and the matrix's entries."""
    size = len(matrix)
    triangle = size * (size - 1) / 2
    hard = sum(matrix[i][j] for i in range(size) for j in range(i + 1, size)) / triangle
    normal = statistics.fmean(matrix[i][i] for i in range(size))
    easy = sum(matrix[i][j] for i in range(size) for j in range(i)) / triangle
    return {
        "hard": hard,
        "normal": normal,
        "easy": easy,
        "average": statistics.fmean((hard, normal, easy)),
        **_matrix_entries(matrix),
    }


def _matrix_entries(matrix: Matrix) -> dict[str, float]:
    """``matrix/<chosen style>/<rejected style>`` -> entry."""
    return {
        f"matrix/{chosen}/{rejected}": matrix[i][j]
        for i, chosen in enumerate(STYLES)
        for j, rejected in enumerate(STYLES)
    }


def _domain(record: Record, path: Path) -> str:
    """The record's ``domain`` field, or else its file's domain (the name's first part)."""
    domain = record.data.get("domain")
    if domain is None:
        from_name = path.stem.split("_")[0]
        if from_name not in FILE_DOMAINS:
            raise DataFormatError(
                f"{record.where}: field 'domain' is missing, and the file name does not name a domain "
                f"(<domain>_filtered.json, one of {', '.join(FILE_DOMAINS)})"
            )
        return from_name
    if not isinstance(domain, str) or reference_domain(domain) is None:
        raise DataFormatError(
            f"{record.where}: field 'domain': expected a name starting with one of "
            f"{', '.join(DOMAINS)}, got {domain!r}"
        )
    return domain


def _item_id(record: Record, path: Path) -> str:
    return f"{_domain(record, path)}/{required_field(record.data, 'id', record.where)}"


def _item(record: Record, path: Path) -> Item:
    domain = _domain(record, path)
    item_id = f"{domain}/{required_field(record.data, 'id', record.where)}"
    where = f"{record.where} (item {item_id!r})"
    chosen = texts_field(record.data, "chosen", where, count=len(STYLES))
    rejected = texts_field(record.data, "rejected", where, count=len(STYLES))
    return Item(
        id=item_id,
        subset=domain,
        prompt=prompt_field(record.data, where),
        candidates=(*chosen, *rejected),
    )


def _three(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list) or len(value) != len(STYLES):
        got = "nothing (missing)" if value is None else repr(value)[:80]
        raise DataFormatError(f"{where}: field {key!r}: expected {len(STYLES)} scores, got {got}")
    return value
