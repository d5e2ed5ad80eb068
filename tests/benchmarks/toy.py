"""A toy pair benchmark and a counting reward, for testing the runner, reports and CLI apart
from any real benchmark's metric."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import rewardlab
from rewardlab import RuleReward, Sample, Score
from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result
from rewardlab.errors import DataFormatError


class ToyPairs(Benchmark):
    """JSONL of {id, subset, prompt, chosen, rejected}; a pair is won when chosen scores higher."""

    name = "toy"

    def __init__(self, margin: float = 0.0):
        self.margin = margin

    def load(self, path: Path | None) -> list[Item]:
        if path is None:
            raise DataFormatError("toy needs --data")
        items = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            record = json.loads(line)
            for key in ("id", "subset", "prompt", "chosen", "rejected"):
                if key not in record:
                    raise DataFormatError(f"{path}, line {number}: missing field {key!r}")
            items.append(
                Item(
                    id=record["id"],
                    subset=record["subset"],
                    prompt=record["prompt"],
                    candidates=(record["chosen"], record["rejected"]),
                )
            )
        return items

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        won: dict[str, list[bool]] = {}
        failed = 0
        chosen, rejected = [], []
        for item in items:
            pair = scores[item.id]
            failed += sum(not score.ok for score in pair)
            ok = all(score.ok for score in pair)
            if ok:
                chosen.append(pair[0].value)
                rejected.append(pair[1].value)
            won.setdefault(item.subset, []).append(ok and pair[0].value > pair[1].value + self.margin)
        subsets = {name: {"accuracy": sum(w) / len(w), "items": len(w)} for name, w in won.items()}
        everything = [w for ws in won.values() for w in ws]
        return Result(
            benchmark=self.name,
            metrics={"accuracy": sum(everything) / len(everything)},
            subsets=subsets,
            failed=failed,
            distributions={"chosen": chosen, "rejected": rejected},
        )


@rewardlab.register("bench_test_length")
class LengthReward(RuleReward):
    """The completion's length in characters; fails completions that contain "FAIL"; counts the
    samples it scores, so that a resumed run can be seen to skip what was done."""

    name = "bench_test_length"
    scored: ClassVar[list[str]] = []

    def check(self, sample: Sample) -> Score:
        LengthReward.scored.append(sample.id)
        if "FAIL" in sample.completion_text:
            raise ValueError("asked to fail")
        return Score(value=len(sample.completion_text))


def equation_holds(line: str) -> bool:
    """Whether a line ``a <op> b = c`` computes correctly; a line that is not such an equation
    (the answer line) holds."""
    parts = line.split()
    if len(parts) != 5 or parts[3] != "=" or parts[1] not in "+-*":
        return True
    a, b, c = int(parts[0]), int(parts[2]), int(parts[4])
    return {"+": a + b, "-": a - b, "*": a * b}[parts[1]] == c


@rewardlab.register("bench_test_equations")
class EquationSteps(RuleReward):
    """A step reward: 1.0 for each given step whose equation holds, 0.0 otherwise; the value is
    the weakest step. It sees a wrong result, not a misquoted operand."""

    name = "bench_test_equations"

    def check(self, sample: Sample) -> Score:
        steps = [1.0 if equation_holds(step) else 0.0 for step in sample.fields["steps"]]
        return Score(value=min(steps), steps=steps)
