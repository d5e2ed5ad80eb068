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

**First contact** (``--first-contact``): each answer format of the real-output corpus
(perf/data/math_real_outputs.jsonl.gz: real completions ending in a box, a final line, "The
answer is", and the same completions rewritten to end in "A: X", "#### X", Minerva's form and
the rest; references bare or whole solutions) is scored in a fresh process, where nothing is
shared between pairs: rewardlab's verdict caches are bypassed, so every completion is read,
extracted, normalised and compared on its own (a reference is read once per reference, and
math-verify parses a gold once too). Both libraries are imported and warmed first on pairs
unrelated to the corpus, one per answer format (`WARM_UP`); their one-off start-up is reported
apart. rewardlab runs inline and, as users get it by default, in its rule workers. Each format
runs in ``--repeats`` fresh processes and each figure is the fastest of them (a busy machine only
slows a run down; a second run in the same process would find sympy's caches, which remember
whole comparisons, already warm). The garbage collector is off while a run is timed.

Run:  python perf/math_throughput.py [--first-contact]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import json
import logging
import random
import statistics
import subprocess
import sys
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

    math_reward._gold.cache_clear()
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
    # Without shared verdicts the fast path runs here, where its cache can be bypassed; with them,
    # in the rule workers, as users get it.
    reward = MathAnswerReward(execution="worker" if reuse_verdicts else "inline")
    reward.pool.submit(pow, 2, 2, budget_s=60).result()  # CAS workers up, as after a first step
    reward.score(samples[:2])  # and the rule workers
    cached = math_reward.fast_verdict
    if not reuse_verdicts:
        math_reward.fast_verdict = math_reward.fast_verdict.__wrapped__
    try:
        started = time.perf_counter()
        scores = reward.score(samples)
        elapsed = time.perf_counter() - started
    finally:
        math_reward.fast_verdict = cached
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


def corpus_groups() -> dict[str, list[dict]]:
    """Real-output rows by answer format (bare references) and by kind of whole reference."""
    with gzip.open(ROOT / "perf/data/math_real_outputs.jsonl.gz", "rt") as lines:
        rows = [json.loads(line) for line in lines]
    groups: dict[str, list[dict]] = {}
    for row in rows:
        bare = row["reference_kind"] == "bare"
        groups.setdefault(row["format"] if bare else f"reference: {row['reference_kind']}", []).append(row)
    # The same completions with their bare reference, for each kind of whole reference.
    kind_of = {
        row["id"].removesuffix("-wholeref"): row["reference_kind"]
        for row in rows
        if row["reference_kind"] != "bare"
    }
    for row in rows:
        if row["id"] in kind_of:
            groups.setdefault(f"reference: bare ({kind_of[row['id']]} rows)", []).append(row)
    return groups


#: Below this many rows a format's time is mostly what its code paths cost the first time they run
#: in a process (answer_is and answer_label are real formats with 7 and 2 rows).
FEW_ROWS = 30
#: Pairs unrelated to the corpus, one per answer format (the first one needs the CAS).
WARM_UP = (
    ("So $\\boxed{\\sum_{k=1}^{2} x}$.", "2x"),
    ("Adding them, we get $\\boxed{\\frac{1}{2}}$.", "0.5"),
    ("She has 3 + 4 = 7 pens left.\nA: 7", "7"),
    ("So she pays $12 in total.\n\n**Answer:** $12", "12"),
    ("The total is 12.\n#### 12", "12"),
    ("Final Answer: The final answer is $3$. I hope it is correct.", "3"),
    ("Comparing the options, the answer is (B).", "B"),
    ("She buys 3 more, so she has 7 pens. Answer: She has 7 pens left.", "7"),
    ("Therefore, the area is $\\pi r^2 = 9\\pi$.", "9\\pi"),
)


class NoVerdicts(dict):
    """A CAS verdict cache that keeps nothing."""

    def __setitem__(self, key: object, value: object) -> None:
        pass


def first_contact_worker(group: str) -> None:
    """In a fresh process: time both libraries on one format's rows, print JSON."""
    from math_verify import parse, verify

    rows = corpus_groups()[group]
    samples = [Sample(completion=row["completion"], reference=row["reference"]) for row in rows]
    started = time.perf_counter()
    inline = MathAnswerReward(execution="inline")
    # The warm-up pairs: the CAS's worker pool starts here (on the first one), not inside the
    # timed run, and each library meets every answer format once.
    inline.score([Sample(completion=completion, reference=gold) for completion, gold in WARM_UP])
    ours_startup = time.perf_counter() - started
    started = time.perf_counter()
    for completion, gold in WARM_UP:
        verify(parse(f"${gold}$"), parse(completion))
    theirs_startup = time.perf_counter() - started
    # No verdict shared between pairs: every completion's answer is parsed and compared anew, and
    # the CAS keeps no verdicts either.
    math_reward.fast_verdict = math_reward.fast_verdict.__wrapped__
    math_reward._echo = math_reward._echo.__wrapped__
    inline._cas_cache = NoVerdicts()
    # The garbage collector is off while a run is timed, as timeit has it: a full collection
    # over the corpus and sympy's objects costs milliseconds, and lands in whichever run it hits.
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    inline.score(samples)
    ours = time.perf_counter() - started
    gc.enable()
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    golds: dict[str, object] = {}  # a gold is parsed once per reference, as rewardlab reads one
    for row in rows:
        gold = row["reference"] if row["reference_kind"] != "bare" else f"${row['reference']}$"
        with contextlib.suppress(Exception):  # math-verify's own failure mode is "not equal"
            if gold not in golds:
                golds[gold] = parse(gold)
            verify(golds[gold], parse(row["completion"]))
    theirs = time.perf_counter() - started
    gc.enable()
    # As users get it: in rule workers, whose verdict cache reuses repeated (gold, answer) pairs.
    workers = MathAnswerReward()
    workers.score(samples[:2])  # the rule workers up
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    workers.score(samples)
    ours_workers = time.perf_counter() - started
    gc.enable()
    inline.close()
    workers.close()
    print(json.dumps({
        "n": len(rows), "ours": ours, "ours_workers": ours_workers, "theirs": theirs,
        "ours_startup": ours_startup, "theirs_startup": theirs_startup,
    }))  # fmt: skip


def first_contact(repeats: int) -> None:
    print(
        f"{'format (fresh process)':>34} | {'n':>5} | {'math-verify ms':>14} | {'rewardlab ms':>12} | "
        f"speed-up | {'default ms':>10} | speed-up"
    )
    for group in sorted(corpus_groups()):
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--first-contact-worker", group],
                    capture_output=True, text=True, check=True,
                ).stdout.strip().splitlines()[-1]
            )
            for _ in range(repeats)
        ]  # fmt: skip
        # Each side's fastest process: a busy machine only ever slows a run down.
        figures = {key: min(run[key] for run in runs) for key in runs[0]}
        n = figures["n"]
        theirs, ours, workers = (figures[key] / n * 1e3 for key in ("theirs", "ours", "ours_workers"))
        few = "  (few rows: first-use costs more than throughput)" if n < FEW_ROWS else ""
        print(
            f"{group:>34} | {n:5d} | {theirs:14.3f} | {ours:12.3f} | {theirs / ours:7.1f}x | "
            f"{workers:10.3f} | {theirs / workers:7.1f}x{few}"
        )
    print(
        f"one-off start-up (last format, fastest process): rewardlab {figures['ours_startup']:.2f} s "
        f"(reward, first sample), math-verify {figures['theirs_startup']:.2f} s (imports, first pair)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hard-fractions", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    parser.add_argument("--first-contact", action="store_true", help="per answer format, in fresh processes")
    parser.add_argument("--first-contact-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if args.first_contact_worker:
        first_contact_worker(args.first_contact_worker)
        return
    if args.first_contact:
        first_contact(args.repeats)
        return
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
