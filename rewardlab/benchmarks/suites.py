"""Offline suites: benchmarks rewardlab generates itself, so ``rewardlab bench`` runs without a
download.

Every suite is built from the seeded arithmetic problems of `rewardlab.benchmarks.arithmetic`
(``Start with 7. Add 5, then multiply by 3, ... What is the result?``, solved one operation per
line and ending ``The answer is N.``), so every label is known by construction:

- ``arithmetic-pairs``: a correct and a corrupted solution of one problem, chosen first, scored
  as RewardBench v1 scores pairs (`rewardlab.benchmarks.rewardbench`: won only when the correct
  one scores strictly higher); subsets are the corruption's kind (``arithmetic``, ``copy``).
- ``arithmetic-steps``: one solution per problem, half with an injected first error, scored by
  ProcessBench's metric (`rewardlab.benchmarks.processbench`). It has two subsets: the
  threshold is chosen on ``validation`` and the figures are reported on ``test`` only, so a
  chosen threshold never flatters the scorer.
- ``arithmetic-bon``: eight solutions per problem, each correct with a probability drawn per
  problem (so some problems have none right), scored by best-of-n, majority@n and pass@n
  (`rewardlab.benchmarks.best_of_n`). A solution is correct when its final answer line states
  the true answer.

A corrupted solution (`rewardlab.benchmarks.arithmetic.corrupt`) has one first error of one of
the generator's two kinds - a result off by a few, or a line that starts from a misquoted value -
and is computed correctly from then on.
Its final answer is therefore always wrong: the error offsets the running value, adding and
subtracting keep the offset, and multiplying by 2-5 scales it, so it never returns to zero.

Items carry the true answer as ``reference`` (so ``math_answer`` can grade candidates) and each
candidate's steps in the ``steps`` field (so process rewards score the given lines). The same
``seed`` gives the same suite in any process; `write_suite` freezes a suite to a JSONL file that
``load(path)`` reads back.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from rewardlab.benchmarks.arithmetic import ERROR_KINDS, SteppedSolution, arithmetic_solutions, corrupt
from rewardlab.benchmarks.best_of_n import Aggregate, BestOfN
from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result
from rewardlab.benchmarks.processbench import evaluate_first_errors
from rewardlab.benchmarks.records import Record, read_jsonl, shown
from rewardlab.benchmarks.rewardbench import RewardBench
from rewardlab.errors import DataFormatError

#: Candidates per best-of-N problem.
BON_CANDIDATES = 8
#: The subset the arithmetic-steps threshold is chosen on, and the one it is reported on.
VALIDATION, TEST = "validation", "test"


def _problems(count: int, seed: int) -> tuple[list[SteppedSolution], random.Random]:
    """``count`` problems with their correct solutions, and a generator for what is drawn
    about them, seeded apart from the problems' own."""
    seeds = random.Random(seed)
    solutions = arithmetic_solutions(count, seed=seeds.getrandbits(64), error_rate=0.0)
    return solutions, random.Random(seeds.getrandbits(64))


def _text(solution: SteppedSolution) -> str:
    return "\n".join(solution.steps)


class Suite(Benchmark):
    """A generated suite: ``load(None)`` generates it, ``load(path)`` reads a frozen copy.

    Args:
        size: Problems to generate (per subset, for a suite with a validation subset); default
            the suite's own.
        seed: The generation seed; the same seed gives the same suite.
    """

    default_size: int

    def __init__(self, size: int | None = None, seed: int = 0):
        size = self.default_size if size is None else size
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self.seed = seed

    @abc.abstractmethod
    def generate(self) -> list[Item]:
        """The suite's items for ``size`` and ``seed``."""

    @abc.abstractmethod
    def check(self, item: Item, where: str) -> None:
        """Raise `DataFormatError` when a read item is not one of this suite's."""

    def load(self, path: Path | None) -> list[Item]:
        if path is None:
            return self.generate()
        items = [self._read(record) for record in read_jsonl(Path(path))]
        if not items:
            raise DataFormatError(f"{path}: no items")
        return items

    def _read(self, frozen: Record) -> Item:
        record, where = frozen.data, frozen.where
        if record.get("suite") != self.name:
            raise DataFormatError(
                f"{where}: field 'suite': this file holds {record.get('suite')!r} items, not {self.name!r}"
            )
        for key, (wanted, description) in _FIELDS.items():
            value = record.get(key)
            if not _is(value, wanted):
                raise DataFormatError(
                    f"{where}: field {key!r}: expected {description}, got {shown(record, key)}"
                )
        where = f"{where} (id {record['id']!r})"
        try:
            item = Item(
                id=record["id"],
                subset=record["subset"],
                prompt=record["prompt"],
                candidates=tuple(record["candidates"]),
                gold=record["gold"],
                reference=record["reference"],
                fields=record["fields"],
                candidate_fields=tuple(record["candidate_fields"]),
            )
        except ValueError as error:
            raise DataFormatError(f"{where}: {error}") from None
        self.check(item, where)
        return item


#: A frozen item's fields: what each holds (a list's entries are checked too), and how errors
#: name it.
_FIELDS: dict[str, tuple[type | tuple[type[list[Any]], type], str]] = {
    "id": (str, "a string"),
    "subset": (str, "a string"),
    "prompt": (str, "a string"),
    "candidates": ((list, str), "a list of texts"),
    "gold": (dict, "an object"),
    "reference": (str, "a string (the true answer)"),
    "fields": (dict, "an object"),
    "candidate_fields": ((list, dict), "a list of objects"),
}


def _is(value: Any, wanted: type | tuple[type[list[Any]], type]) -> bool:
    if isinstance(wanted, tuple):
        return isinstance(value, wanted[0]) and all(isinstance(entry, wanted[1]) for entry in value)
    return isinstance(value, wanted)


def write_suite(suite: Suite, path: Path) -> int:
    """Freeze ``suite`` as generated (its size and seed) to a JSONL file, one item a line, that
    ``suite.load(path)`` reads back; returns the number of items written."""
    items = suite.generate()
    with Path(path).open("w", encoding="utf-8") as file:
        for item in items:
            record = {"suite": suite.name, **dataclasses.asdict(item)}
            file.write(json.dumps(record) + "\n")
    return len(items)


def _fail(where: str, field: str, message: str) -> NoReturn:
    raise DataFormatError(f"{where}: field {field!r}: {message}")


class ArithmeticPairs(Suite):
    """A correct and a corrupted solution of each problem (chosen first), scored as RewardBench
    v1 pairs: accuracy overall and per corruption kind. Default size 200 pairs."""

    name = "arithmetic-pairs"
    default_size = 200

    def generate(self) -> list[Item]:
        solutions, rng = _problems(self.size, self.seed)
        items = []
        for index, solution in enumerate(solutions):
            kind = rng.choice(ERROR_KINDS)
            wrong = corrupt(solution, kind, rng)
            items.append(
                Item(
                    id=f"pair-{index}",
                    subset=kind,
                    prompt=solution.problem,
                    candidates=(_text(solution), _text(wrong)),
                    reference=str(solution.answer),
                    candidate_fields=({"steps": list(solution.steps)}, {"steps": list(wrong.steps)}),
                )
            )
        return items

    def check(self, item: Item, where: str) -> None:
        if len(item.candidates) != 2:
            _fail(
                where,
                "candidates",
                f"expected a correct and a corrupted solution, got {len(item.candidates)}",
            )

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        pairs = RewardBench().evaluate(items, scores)
        total = sum(figures["items"] for figures in pairs.subsets.values())
        won = sum(figures["accuracy"] * figures["items"] for figures in pairs.subsets.values())
        return dataclasses.replace(
            pairs,
            benchmark=self.name,
            metrics={"accuracy": won / total if total else 0.0},
            notes=["a pair is won when the correct solution scores strictly higher (RewardBench v1)"],
        )


class ArithmeticSteps(Suite):
    """Step-labelled solutions, half with an injected first error, scored by ProcessBench's
    metric: a ``validation`` and a ``test`` subset of ``size`` problems each, generated apart.

    Args:
        threshold: A step scored below it is wrong. ``None`` (the default) chooses it on the
            validation subset; either way only the test subset is reported.
    """

    name = "arithmetic-steps"
    default_size = 100

    def __init__(self, size: int | None = None, seed: int = 0, threshold: float | None = None):
        super().__init__(size, seed)
        self.threshold = threshold

    def generate(self) -> list[Item]:
        seeds = random.Random(self.seed)
        items = []
        for subset in (VALIDATION, TEST):
            for index, solution in enumerate(arithmetic_solutions(self.size, seed=seeds.getrandbits(64))):
                items.append(
                    Item(
                        id=f"{subset}-{index}",
                        subset=subset,
                        prompt=solution.problem,
                        candidates=(_text(solution),),
                        gold={"label": solution.first_error},
                        reference=str(solution.answer),
                        fields={"steps": list(solution.steps)},
                    )
                )
        return items

    def check(self, item: Item, where: str) -> None:
        if item.subset not in (VALIDATION, TEST):
            _fail(where, "subset", f"expected {VALIDATION!r} or {TEST!r}, got {item.subset!r}")
        steps = item.fields.get("steps")
        if not isinstance(steps, list) or len(item.candidates) != 1:
            _fail(where, "fields", "expected one candidate and its 'steps'")
        label = item.gold.get("label")
        if not isinstance(label, int) or isinstance(label, bool) or not -1 <= label < len(steps):
            _fail(where, "gold", f"expected a 'label' of -1 or a step index, got {label!r}")

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        return evaluate_first_errors(
            self.name, items, scores, threshold=self.threshold, validation_subset=VALIDATION
        )


class ArithmeticBestOfN(Suite):
    """Eight solutions per problem, some correct, scored by best-of-n, majority@n and pass@n.

    Args:
        aggregate: How a candidate is ranked (`rewardlab.benchmarks.best_of_n.BestOfN`):
            ``"value"`` (default), or its step scores' ``"min"``, ``"last"`` or ``"product"``.
    """

    name = "arithmetic-bon"
    default_size = 50

    def __init__(self, size: int | None = None, seed: int = 0, aggregate: Aggregate = "value"):
        super().__init__(size, seed)
        self.metric = BestOfN(aggregate=aggregate)

    def generate(self) -> list[Item]:
        solutions, rng = _problems(self.size, self.seed)
        items = []
        for index, solution in enumerate(solutions):
            accuracy = rng.random()  # how often this problem's "policy" is right
            candidates = [
                solution if rng.random() < accuracy else corrupt(solution, rng.choice(ERROR_KINDS), rng)
                for _ in range(BON_CANDIDATES)
            ]
            items.append(
                Item(
                    id=f"bon-{index}",
                    subset="arithmetic",
                    prompt=solution.problem,
                    candidates=tuple(_text(candidate) for candidate in candidates),
                    gold={
                        "correct": [candidate.first_error == -1 for candidate in candidates],
                        "answers": [_final_answer(candidate) for candidate in candidates],
                    },
                    reference=str(solution.answer),
                    candidate_fields=tuple({"steps": list(candidate.steps)} for candidate in candidates),
                )
            )
        return items

    def check(self, item: Item, where: str) -> None:
        correct, answers = item.gold.get("correct"), item.gold.get("answers")
        for key, value in (("correct", correct), ("answers", answers)):
            if not isinstance(value, list) or len(value) != len(item.candidates):
                _fail(where, "gold", f"expected {key!r} with one entry per candidate, got {value!r}")

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        result = self.metric.evaluate(items, scores)
        return dataclasses.replace(result, benchmark=self.name)


def _final_answer(solution: SteppedSolution) -> str:
    """The number the answer line states (``The answer is 32.`` -> ``"32"``)."""
    return solution.steps[-1].removeprefix("The answer is ").removesuffix(".")
