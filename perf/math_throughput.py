"""Throughput of MathAnswerReward against math-verify on a realistic RL batch, in one process.

The batch: 800 real Qwen2.5-Math-7B chain-of-thought completions (100 MATH problems x 8
samples, perf/data, from QwenLM/Qwen2.5-Math) plus 10% hard answers (symbolic expressions,
intervals, sets, equations, matrices) from the shipped labelled equivalence set.

Baseline: math-verify as its README uses it (``verify(parse(gold), parse(completion))``, its
own signal timeouts, in the main thread). rewardlab: a `MathAnswerReward` whose CAS worker pool
has started (as it has after the first step of a training run) but whose caches are empty.
Each side runs ``--repeats`` times with cleared caches; the median is reported, for batches with
0%, 5% and 10% hard answers. The hard answers are adversarial test cases, a few of which (sums
of recurrences) cost both tools hundreds of milliseconds of sympy time; at 10% they dominate.

Run:  python perf/math_throughput.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import random
import statistics
import time
from collections import Counter
from pathlib import Path

from rewardlab import Sample
from rewardlab.rewards.math import reward as math_reward
from rewardlab.rewards.math.reward import MathAnswerReward

ROOT = Path(__file__).resolve().parent.parent
HARD = {"symbolic", "latex_expression", "interval", "set_tuple", "equation", "matrix"}


def realistic_batch(hard_fraction: float, seed: int = 0) -> list[Sample]:
    with gzip.open(ROOT / "perf/data/qwen25-math-cot-100x8.jsonl.gz", "rt") as lines:
        rows = [json.loads(line) for line in lines]
    samples = [
        Sample(completion=response, reference=row["gt"], id=f"{row['idx']}-{k}")
        for row in rows
        for k, response in enumerate(row["responses"])
    ]
    cases = [json.loads(line) for line in (ROOT / "tests/rewards/math/data/equivalence.jsonl").open()]
    hard = [case for case in cases if case["category"] in HARD]
    generator = random.Random(seed)
    picked = generator.sample(hard, min(len(hard), round(len(samples) * hard_fraction)))
    samples += [
        Sample(completion=case["prediction"], reference=case["gold"], id=case["id"]) for case in picked
    ]
    generator.shuffle(samples)
    return samples


def clear_caches() -> None:
    from math_verify import parser

    math_reward._parsed.cache_clear()
    math_reward.fast_verdict.cache_clear()
    parser.parse_latex_cached.cache_clear()
    parser.parse_expr_cached.cache_clear()


def run_math_verify(samples: list[Sample]) -> tuple[float, list[bool]]:
    from math_verify import parse, verify

    started = time.perf_counter()
    verdicts = []
    for sample in samples:
        try:
            verdicts.append(bool(verify(parse(f"${sample.reference}$"), parse(sample.completion_text))))
        except Exception:  # noqa: BLE001 - math-verify's own failure mode is "not equal"
            verdicts.append(False)
    return time.perf_counter() - started, verdicts


def run_rewardlab(samples: list[Sample], reuse_verdicts: bool = True) -> tuple[float, list]:
    """``reuse_verdicts=False`` runs the fast path without its caches, so every answer is parsed
    and compared on its own even when the batch repeats a (gold, answer) pair (as the G rollouts
    of one prompt often do); math-verify has no such reuse beyond a 20-entry parse cache."""
    reward = MathAnswerReward()
    reward.pool.submit(pow, 2, 2, budget_s=60).result()  # workers up, as after a first training step
    cached = (math_reward.fast_verdict, math_reward._parsed)
    if not reuse_verdicts:
        math_reward.fast_verdict = math_reward.fast_verdict.__wrapped__
        math_reward._parsed = math_reward._parsed.__wrapped__
    try:
        started = time.perf_counter()
        scores = reward.score(samples)
        elapsed = time.perf_counter() - started
    finally:
        math_reward.fast_verdict, math_reward._parsed = cached
        reward.close()
    return elapsed, scores


def measure(samples: list[Sample], repeats: int) -> tuple[float, float, float, Counter, int]:
    """Median seconds for math-verify, rewardlab and rewardlab without shared verdicts;
    rewardlab's paths; verdict agreement."""
    theirs, ours, alone = [], [], []
    for _ in range(repeats):
        clear_caches()
        elapsed, verdicts = run_math_verify(samples)
        theirs.append(elapsed)
        clear_caches()
        elapsed, scores = run_rewardlab(samples)
        ours.append(elapsed)
        alone.append(run_rewardlab(samples, reuse_verdicts=False)[0])
    paths = Counter(score.details.get("path", score.status.value) for score in scores)
    agree = sum((score.value == 1.0) == verdict for score, verdict in zip(scores, verdicts, strict=True))
    return statistics.median(theirs), statistics.median(ours), statistics.median(alone), paths, agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hard-fractions", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    print(
        f"{'batch':>22} | {'math-verify /s':>14} | {'rewardlab /s':>12} | speed-up | "
        f"{'no shared verdicts /s':>21} | speed-up | paths | agree"
    )
    for fraction in args.hard_fractions:
        samples = realistic_batch(fraction)
        theirs, ours, alone, paths, agree = measure(samples, args.repeats)
        label = f"{len(samples)} ({fraction:.0%} hard)"
        n = len(samples)
        rates = (
            f"{n / theirs:14.0f} | {n / ours:12.0f} | {theirs / ours:7.1f}x | "
            f"{n / alone:21.0f} | {theirs / alone:7.1f}x"
        )
        print(f"{label:>22} | {rates} | {dict(paths)} | {agree}/{n}")
    print(f"median of {args.repeats} runs each, caches cleared before every run")


if __name__ == "__main__":
    main()
