"""How often answer graders agree with correctness labels on real model completions.

The labelled equivalence set (perf/math_accuracy.py) asks whether two answers are equal; an RL
reward also has to find the answer in a whole completion, in the style its model writes, against a
reference that may be a bare answer or a whole solution. perf/data/math_real_outputs.jsonl.gz
(built by perf/build_real_outputs.py, described in perf/data/SOURCES-real-outputs.md) holds real
completions from Qwen and Llama models with labels that no grader here produced. This script
scores every row with three graders in one process and reports agreement with the label per
source, per generator, per answer format and per reference kind:

* rewardlab: `MathAnswerReward` through the public `Reward.score` API, in batches, with the
  question as the prompt (as a trainer passes it); a row is accepted when its score is ok with
  value 1.0. A non-ok status is a reject, also counted apart.
* math-verify as its README uses it: ``verify(parse(f"${gold}$"), parse(completion))``; an
  exception is a reject.
* TRL's ``trl.rewards.accuracy_reward``, one row per call, with the reference as ``solution``
  unchanged (TRL parses it itself, expecting a solution text; a bare answer gets no ``$...$``);
  its None (gold not parseable, the row skipped in training) is a reject, also counted apart.

Labels are reported twice: as published, and **adjudicated**: perf/data/math_real_outputs_adjudication.json
corrects the labels that a reading by hand found wrong (each with why; a correction also covers the
row's -wholeref twin and transplants) and explains the disagreements that remain.

A false accept is a grader accepting a completion labelled wrong, a false reject the reverse. The
"n/a" columns count the rows a grader did not grade (rewardlab: non-ok status; math-verify: an
exception; TRL: None or an exception); they are included among the rejects.

Run:  python perf/math_real_outputs.py [--list] [--json PATH] [--limit N] [--sources S ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rewardlab import Sample
from rewardlab.rewards.contract import Score
from rewardlab.rewards.math.reward import MathAnswerReward

DATA = Path(__file__).resolve().parent / "data" / "math_real_outputs.jsonl.gz"
ADJUDICATION = DATA.with_name("math_real_outputs_adjudication.json")
GROUPS = ("source", "generator", "format", "reference_kind")
BATCH = 256
T = TypeVar("T")


@dataclass
class Verdicts:
    """One grader's accept/reject per row, which rows it did not grade, and its total time."""

    accepted: list[bool]
    ungraded: list[bool]
    seconds: float


def timed(function: Callable[[list[dict]], T], rows: list[dict]) -> tuple[T, float]:
    start = time.perf_counter()
    result = function(rows)
    return result, time.perf_counter() - start


def covered(row_id: str, base: str) -> bool:
    """Whether an adjudication of row ``base`` covers ``row_id`` (itself, its twin, its transplants)."""
    return row_id == base or row_id.startswith(f"{base}-")


def adjudicated(rows: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """The rows with corrected labels, and the explanations of what remains (by base id)."""
    adjudication = json.loads(ADJUDICATION.read_text())
    corrections = {c["id"]: c["label"] for c in adjudication["corrections"]}
    fixed = []
    for row in rows:
        label = next((value for base, value in corrections.items() if covered(row["id"], base)), row["label"])
        fixed.append({**row, "label": label})
    return fixed, {e["id"]: e["why"] for e in adjudication["explained"]}


def rewardlab_scores(rows: list[dict]) -> list[Score]:
    reward = MathAnswerReward()
    scores: list[Score] = []
    try:
        for begin in range(0, len(rows), BATCH):
            samples = [
                Sample(prompt=r["question"], completion=r["completion"], reference=r["reference"], id=r["id"])
                for r in rows[begin : begin + BATCH]
            ]
            scores += reward.score(samples)
    finally:
        reward.close()
    return scores


def grade_math_verify(rows: list[dict]) -> tuple[list[bool], list[bool]]:
    from math_verify import parse, verify

    accepted, ungraded = [], []
    for r in rows:
        try:
            accepted.append(bool(verify(parse(f"${r['reference']}$"), parse(r["completion"]))))
            ungraded.append(False)
        except Exception:  # noqa: BLE001 - an exception is math-verify's "not equal"
            accepted.append(False)
            ungraded.append(True)
    return accepted, ungraded


def grade_trl(rows: list[dict]) -> tuple[list[bool], list[bool]]:
    from trl.rewards import accuracy_reward

    accepted, ungraded = [], []
    for r in rows:
        try:
            [value] = accuracy_reward(
                completions=[[{"role": "assistant", "content": r["completion"]}]], solution=[r["reference"]]
            )
        except Exception:  # noqa: BLE001 - counted as not graded, like a None
            value = None
        accepted.append(value == 1.0)
        ungraded.append(value is None)
    return accepted, ungraded


def tally(rows: list[dict], verdicts: Verdicts, keep: list[int]) -> dict:
    labels = [rows[i]["label"] for i in keep]
    said = [verdicts.accepted[i] for i in keep]
    return {
        "n": len(keep),
        "labelled_true": sum(labels),
        "agree": sum(s == label for s, label in zip(said, labels, strict=True)),
        "false_accepts": sum(s and not label for s, label in zip(said, labels, strict=True)),
        "false_rejects": sum(label and not s for s, label in zip(said, labels, strict=True)),
        "not_graded": sum(verdicts.ungraded[i] for i in keep),
    }


def figures(rows: list[dict], results: dict[str, Verdicts]) -> dict:
    every = list(range(len(rows)))
    out: dict = {"overall": {name: tally(rows, v, every) for name, v in results.items()}}
    for field in GROUPS:
        out[field] = {}
        for value in sorted({r[field] for r in rows}):
            keep = [i for i in every if rows[i][field] == value]
            out[field][value] = {name: tally(rows, v, keep) for name, v in results.items()}
    return out


def print_table(title: str, table: dict[str, dict[str, dict]]) -> None:
    graders = list(next(iter(table.values())))
    width = max(len(title), *map(len, table))
    print(f"\n{title:<{width}} {'rows':>5} {'true':>5} |" + "|".join(f"{g:^27}" for g in graders))
    print(
        f"{'':<{width}} {'':>5} {'':>5} |"
        + "|".join(f"{'agree':>7} {'FA':>5} {'FR':>5} {'n/a':>5} " for _ in graders)
    )
    for value, by_grader in table.items():
        first = next(iter(by_grader.values()))
        cells = "|".join(
            f"{t['agree'] / t['n']:7.1%} {t['false_accepts']:5d} {t['false_rejects']:5d}"
            f" {t['not_graded']:5d} "
            for t in by_grader.values()
        )
        print(f"{value:<{width}} {first['n']:5d} {first['labelled_true']:5d} |{cells}")


def tail(text: str, length: int) -> str:
    return text if len(text) <= length else "..." + text[-length:]


def disagreements(rows: list[dict], results: dict[str, Verdicts], scores: list[Score]) -> list[dict]:
    listed = []
    for i, (r, score) in enumerate(zip(rows, scores, strict=True)):
        if results["rewardlab"].accepted[i] != r["label"]:
            listed.append(
                {
                    "id": r["id"],
                    "kind": "false_accept" if r["label"] is False else "false_reject",
                    "generator": r["generator"],
                    "format": r["format"],
                    "reference": r["reference"],
                    "completion_tail": r["completion"][-300:],
                    "status": score.status.value,
                    "extracted": score.details.get("extracted"),
                    "reason": score.reason,
                    "math_verify": results["math-verify"].accepted[i],
                    "trl": results["trl"].accepted[i],
                }
            )
    return listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every rewardlab disagreement")
    parser.add_argument("--json", type=Path, help="write all figures to this file")
    parser.add_argument("--limit", type=int, help="score only the first N rows (after --sources)")
    parser.add_argument("--sources", nargs="+", help="keep only these sources")
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    with gzip.open(DATA, "rt") as lines:
        rows = [json.loads(line) for line in lines]
    if args.sources:
        rows = [r for r in rows if r["source"] in args.sources]
    rows = rows[: args.limit]
    scores, seconds = timed(rewardlab_scores, rows)
    results = {
        "rewardlab": Verdicts([s.ok and s.value == 1.0 for s in scores], [not s.ok for s in scores], seconds)
    }
    for name, grade in (("math-verify", grade_math_verify), ("trl", grade_trl)):
        (accepted, ungraded), seconds = timed(grade, rows)
        results[name] = Verdicts(accepted, ungraded, seconds)
    report = figures(rows, results)
    fixed, explained = adjudicated(rows)
    report["adjudicated"] = figures(fixed, results)
    print(f"{len(rows)} rows, {sum(r['label'] for r in rows)} labelled correct")
    print("agree: share of rows where accept == label; FA/FR: false accepts/rejects; n/a: not graded")
    print_table("all, labels as published", {"all": report["overall"]})
    print_table("all, labels adjudicated", {"all": report["adjudicated"]["overall"]})
    for field in GROUPS:
        print_table(f"{field} (adjudicated)", report["adjudicated"][field])
    statuses = Counter(score.status.value for score in scores)
    print(f"\nrewardlab statuses: {dict(statuses)}")
    for name, verdicts in results.items():
        print(f"{name:>12}: {verdicts.seconds:7.1f} s, {sum(verdicts.ungraded)} not graded")

    listed = disagreements(fixed, results, scores)
    unexplained = [d for d in listed if not any(covered(d["id"], base) for base in explained)]
    print(f"\nrewardlab disagreements with the adjudicated labels: {len(listed)}")
    print(f"of which not explained: {len(unexplained)}")
    for base, why in explained.items():
        count = sum(covered(d["id"], base) for d in listed)
        print(f"  {base} and its copies ({count}): {why}")
    if args.list:
        print(f"\nrewardlab disagreements with the adjudicated labels ({len(listed)}):")
        for d in listed:
            print(
                f"\n[{d['kind']}] {d['id']} | {d['generator']} | {d['format']} | status {d['status']}"
                f" | math-verify {d['math_verify']} | trl {d['trl']}"
            )
            print(f"  reference: {tail(d['reference'], 200)!r}")
            print(f"  completion: {d['completion_tail']!r}")
            print(f"  extracted: {d['extracted']!r}  reason: {d['reason']}")
    if args.json:
        report["seconds"] = {name: v.seconds for name, v in results.items()}
        report["rewardlab_statuses"] = dict(statuses)
        report["rewardlab_disagreements"] = listed
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
