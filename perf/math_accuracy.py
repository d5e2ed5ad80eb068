"""Accuracy of MathAnswerReward and of math-verify on the shipped labelled equivalence set.

The set (tests/rewards/math/data/equivalence.jsonl, sources in SOURCES.md) holds 870 (gold,
prediction) pairs labelled by hand from the mathematics, never by running a verifier. Some labels
encode grading policies (decimals are exact, hedged answers are wrong); SOURCES.md lists them,
and the 12 pairs where the label overrides an expectation in math-verify's own tests.

Run:  python perf/math_accuracy.py
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

from rewardlab import Sample
from rewardlab.rewards.math.reward import MathAnswerReward

DATA = Path(__file__).resolve().parent.parent / "tests/rewards/math/data/equivalence.jsonl"


def math_verify_verdict(gold: str, prediction: str) -> bool:
    from math_verify import parse, verify

    try:
        return bool(verify(parse(f"${gold}$"), parse(prediction)))
    except Exception:  # noqa: BLE001 - an exception is math-verify's "not equal"
        return False


def main() -> None:
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    cases = [json.loads(line) for line in DATA.open()]
    reward = MathAnswerReward()
    scores = reward.score([Sample(completion=c["prediction"], reference=c["gold"]) for c in cases])
    reward.close()
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for case, score in zip(cases, scores, strict=True):
        row = tally[case["category"]]
        row[0] += 1
        row[1] += (score.value == 1.0) == case["equivalent"]
        row[2] += math_verify_verdict(case["gold"], case["prediction"]) == case["equivalent"]
    print(f"{'category':>18} | {'cases':>5} | {'rewardlab':>9} | {'math-verify':>11}")
    for category, (count, ours, theirs) in sorted(tally.items()):
        print(f"{category:>18} | {count:5d} | {ours / count:9.1%} | {theirs / count:11.1%}")
    count, ours, theirs = (sum(row[i] for row in tally.values()) for i in range(3))
    print(f"{'all':>18} | {count:5d} | {ours / count:9.1%} | {theirs / count:11.1%}")
    statuses = defaultdict(int)
    for score in scores:
        statuses[score.status.value] += 1
    print(f"rewardlab statuses: {dict(statuses)}")


if __name__ == "__main__":
    main()
