"""Best-of-N: N sampled solutions per problem; does the reward pick a right one?

The metric follows Qwen2.5-Math's ``evaluation/rm_maj_eval.py`` (QwenLM/Qwen2.5-Math):

- ``rm@n`` (``eval_rm_k_metrics``), here best-of-n: the candidate with the highest score among
  the first n is picked - the first of equal scores (``rm_score.index(max(rm_score))``) - and
  the problem is right when the pick is correct.
- ``maj@n`` (``eval_maj_k_metrics``), here majority@n: the most common extracted answer among
  the first n, compared exactly as text (``group_pred(strip=False, use_symbol=False)``); equal
  counts go to the answer that appeared first (``Counter.most_common(1)``), and the problem is
  right when the first candidate with that answer is correct.
- pass@n: any of the first n is correct (the oracle bound; not in the reference).

The reference has no reward-weighted majority, so neither has this. It reports one file - one
benchmark - at a time; here each file (or ``data_source``/``subset``) is a subset, and the
headline and the curves average over subsets, as Qwen2.5-Math averages its benchmarks.

A candidate whose score failed or is missing makes best-of-n wrong for every n that includes
it; majority@n and pass@n do not read scores. With step rewards, a candidate's value is
aggregated from `Score.steps` by ``aggregate``: ``min``, ``last`` or ``product`` (a candidate
without steps then counts as failed), or ``value`` (the reward's own value).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result, calibration_pairs
from rewardlab.benchmarks.records import read_record_files, text_field
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score

Aggregate = Literal["value", "min", "last", "product"]
AGGREGATES: tuple[Aggregate, ...] = ("value", "min", "last", "product")

#: The curves over n, with how their figure at one n is named.
CURVES = {"best-of-n": "best-of-{n}", "pass@n": "pass@{n}", "majority@n": "majority@{n}"}


def selection_value(score: Score | None, aggregate: Aggregate) -> float | None:
    """What a candidate is ranked by: its value, or its steps aggregated; ``None`` when the
    score failed or has no steps to aggregate."""
    if score is None or not score.ok:
        return None
    if aggregate == "value":
        return score.value
    if not score.steps:
        return None
    if aggregate == "min":
        return min(score.steps)
    if aggregate == "last":
        return score.steps[-1]
    return math.prod(score.steps)


def best_of_n_right(values: Sequence[float | None], correct: Sequence[bool]) -> bool:
    """``eval_rm_k_metrics`` for one problem: the first highest-valued candidate is correct; a
    candidate without a value makes it wrong."""
    ranked = [value for value in values if value is not None]
    if not values or len(ranked) < len(values):
        return False
    return correct[ranked.index(max(ranked))]


def majority_right(answers: Sequence[Any], correct: Sequence[bool]) -> bool:
    """``eval_maj_k_metrics`` for one problem: the first candidate with the most common answer
    (ties to the answer seen first) is correct."""
    majority = Counter(answers).most_common(1)[0][0]
    return correct[answers.index(majority)]


def _list(record: Mapping[str, Any], name: str, where: str, size: int | None) -> list[Any]:
    """A record's non-empty list field, with ``size`` entries when given."""
    if name not in record:
        raise DataFormatError(f"{where}: field {name!r}: missing")
    value = record[name]
    if not isinstance(value, list) or not value:
        shape = "an empty list" if value == [] else type(value).__name__
        raise DataFormatError(f"{where}: field {name!r}: expected a non-empty list, got {shape}")
    if size is not None and len(value) != size:
        raise DataFormatError(f"{where}: field {name!r}: {len(value)} entries for {size} responses")
    return value


def _flags(record: Mapping[str, Any], name: str, where: str, size: int) -> list[bool]:
    flags = _list(record, name, where, size)
    if not all(isinstance(flag, bool) or flag in (0, 1) for flag in flags):
        raise DataFormatError(f"{where}: field {name!r}: expected true/false per response")
    return [bool(flag) for flag in flags]


def _answers(record: Mapping[str, Any], name: str, where: str, size: int) -> list[Any]:
    answers = _list(record, name, where, size)
    if not all(answer is None or isinstance(answer, str | int | float) for answer in answers):
        raise DataFormatError(f"{where}: field {name!r}: expected one answer (text or null) per response")
    return answers


def _item_id(record: Mapping[str, Any], stem: str, position: int) -> str:
    """``<file stem>/<id>``, the id being the record's ``id`` or ``idx``, else its position."""
    own = next((record[name] for name in ("id", "idx") if isinstance(record.get(name), str | int)), position)
    return f"{stem}/{own}"


def _qwen_item(record: Mapping[str, Any], stem: str, position: int, where: str) -> Item:
    """A record of Qwen2.5-Math's evaluation output (``eval_rm_maj_example``)."""
    responses = _list(record, "code" if "code" in record else "response", where, None)
    size = len(responses)
    return Item(
        id=_item_id(record, stem, position),
        subset=str(record.get("data_source") or stem),
        prompt=text_field(record, "question", where),
        candidates=tuple(str(response) for response in responses),
        gold={
            "correct": _flags(record, "score", where, size),
            "answers": _answers(record, "pred", where, size),
        },
        reference=None if record.get("gt") is None else str(record["gt"]),
    )


def _generic_item(record: Mapping[str, Any], stem: str, position: int, where: str) -> Item:
    """A record of the generic layout: prompt, responses, correct, optional answers, subset."""
    responses = _list(record, "responses", where, None)
    size = len(responses)
    if "prompt" not in record:
        raise DataFormatError(f"{where}: field 'prompt': missing")
    gold: dict[str, Any] = {"correct": _flags(record, "correct", where, size)}
    if "answers" in record:
        gold["answers"] = _answers(record, "answers", where, size)
    reference = record.get("reference")
    return Item(
        id=_item_id(record, stem, position),
        subset=str(record.get("subset") or stem),
        prompt=record["prompt"],
        candidates=tuple(responses),
        gold=gold,
        reference=None if reference is None else str(reference),
    )


def _item(record: Mapping[str, Any], stem: str, position: int, where: str) -> Item:
    if "responses" in record:
        return _generic_item(record, stem, position, where)
    if "code" in record or "response" in record:
        return _qwen_item(record, stem, position, where)
    raise DataFormatError(
        f"{where}: field 'responses': missing (nor Qwen2.5-Math's 'code'/'response'): no candidates"
    )


class BestOfN(Benchmark):
    """Best-of-n, majority@n and pass@n for n = 1..N over N sampled solutions per problem.

    Args:
        aggregate: How a candidate's value is read: ``"value"`` (default), or its step scores'
            ``"min"``, ``"last"`` or ``"product"``.
        n: The N of the headline figures; default the fewest candidates any item has. Items with
            more use their first N, as the reference's ``[:k]`` does.

    Example:
        >>> bench = BestOfN(aggregate="min")
        >>> items = bench.load(Path("math_cot_100.jsonl"))  # doctest: +SKIP
        >>> bench.evaluate(items, bench.published_scores(Path("math_cot_100.jsonl"), items))  # doctest: +SKIP
    """

    name = "best_of_n"

    def __init__(self, aggregate: Aggregate = "value", n: int | None = None):
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        if n is not None and n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.aggregate = aggregate
        self.n = n

    def load(self, path: Path | None) -> list[Item]:
        """The problems of a JSONL file, or of every ``.jsonl`` file in a directory: Qwen2.5-Math
        evaluation outputs (``question``, ``code``, ``pred``, ``score``, ``gt``) or the generic
        layout (``prompt``, ``responses``, ``correct``, optional ``answers``, ``subset``,
        ``reference``, ``id``). A record without ``data_source``/``subset`` belongs to the
        subset named after its file."""
        if path is None:
            raise DataFormatError("best_of_n needs a data file or directory of JSONL files")
        items: list[Item] = []
        seen: set[str] = set()
        for stem, records in read_record_files(Path(path), ".jsonl", saved_datasets=False):
            for position, record in enumerate(records):
                item = _item(record.data, stem, position, record.where)
                if item.id in seen:
                    raise DataFormatError(f"{record.where}: item id {item.id!r} appears twice")
                seen.add(item.id)
                items.append(item)
        return items

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        if not items:
            raise ValueError("best_of_n: no problems to evaluate")
        n = self.n or min(len(item.candidates) for item in items)
        short = next((item for item in items if len(item.candidates) < n), None)
        if short is not None:
            raise ValueError(f"best_of_n: item {short.id!r} has {len(short.candidates)} candidates, n is {n}")
        with_answers = all("answers" in item.gold for item in items)
        rights: dict[str, list[dict[str, list[bool]]]] = {}  # subset -> per item, curve -> right per n
        failed = 0
        distributions: dict[str, list[float]] = {"correct": [], "incorrect": []}
        for item in items:
            given = list(scores.get(item.id, ()))[:n]
            values = [selection_value(score, self.aggregate) for score in given]
            values += [None] * (n - len(values))
            correct = list(item.gold["correct"][:n])
            failed += values.count(None)
            for value, right in zip(values, correct, strict=True):
                if value is not None:
                    distributions["correct" if right else "incorrect"].append(value)
            answers = list(item.gold["answers"][:n]) if with_answers else None
            rights.setdefault(item.subset, []).append(_item_rights(values, correct, answers))
        subset_curves = {subset: _share_right(rows) for subset, rows in sorted(rights.items())}
        curves = {
            name: [sum(c[name][m] for c in subset_curves.values()) / len(subset_curves) for m in range(n)]
            for name in next(iter(subset_curves.values()))
        }
        notes = [f"best-of-n picks by {self.aggregate!r}; figures average {len(subset_curves)} subset(s)"]
        if not with_answers:
            notes.append("no majority@n: some items have no extracted answers")
        if failed:
            notes.append(f"{failed} candidates had no usable score: best-of-n is wrong wherever they count")
        return Result(
            benchmark=self.name,
            metrics=_at(curves, n),
            subsets={
                subset: {"items": len(rights[subset]), **_at(c, n)} for subset, c in subset_curves.items()
            },
            failed=failed,
            distributions=distributions,
            curves=curves,
            calibration=calibration_pairs(distributions["correct"], distributions["incorrect"]),
            notes=notes,
            subset_figure=CURVES["best-of-n"].format(n=n),
        )

    def published_scores(self, path: Path, items: Sequence[Item]) -> dict[str, list[Score]]:
        """The rewards in Qwen2.5-Math's evaluation outputs: ``pred_score``, one list per
        response. ``eval_rm_k_metrics`` flattens the lists and asserts one number per response,
        so a one-element list is that number; a longer one is read as step scores, valued by its
        last (``steps`` keeps it all, for ``aggregate``). Ids are matched as `load` makes them."""
        sizes = {item.id: len(item.candidates) for item in items}
        published: dict[str, list[Score]] = {}
        for stem, records in read_record_files(Path(path), ".jsonl", saved_datasets=False):
            for position, record in enumerate(records):
                item_id = _item_id(record.data, stem, position)
                if item_id in sizes:
                    where = record.where
                    published[item_id] = [
                        _published_score(entry, f"{where}: field 'pred_score'[{index}]")
                        for index, entry in enumerate(_list(record.data, "pred_score", where, sizes[item_id]))
                    ]
        return published


def _published_score(entry: Any, where: str) -> Score:
    steps = entry if isinstance(entry, list) else [entry]
    if not steps or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in steps):
        raise DataFormatError(f"{where}: expected a number or a non-empty list of numbers, got {entry!r}")
    return Score(value=float(steps[-1]), steps=[float(x) for x in steps])


def _item_rights(
    values: Sequence[float | None], correct: Sequence[bool], answers: Sequence[Any] | None
) -> dict[str, list[bool]]:
    """Per curve, whether the item is right with its first 1, 2, ..., N candidates."""
    sizes = range(1, len(values) + 1)
    rights = {
        "best-of-n": [best_of_n_right(values[:m], correct) for m in sizes],
        "pass@n": [any(correct[:m]) for m in sizes],
    }
    if answers is not None:
        rights["majority@n"] = [majority_right(answers[:m], correct) for m in sizes]
    return rights


def _share_right(rows: Sequence[Mapping[str, list[bool]]]) -> dict[str, list[float]]:
    """Per curve, the share of items right at each n."""
    return {
        name: [sum(row[name][m] for row in rows) / len(rows) for m in range(len(ys))]
        for name, ys in rows[0].items()
    }


def _at(curves: Mapping[str, list[float]], n: int) -> dict[str, float]:
    """The curves' figures at n, named for n (``best-of-8``)."""
    return {CURVES[name].format(n=n): ys[n - 1] for name, ys in curves.items()}
