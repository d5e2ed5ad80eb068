"""Reproduce a published JudgeBench result with rewardlab, and check it against JudgeBench's own
scoring.

Reads a JudgeBench dataset file and one of the output files the JudgeBench repository publishes
(the pairs with the judge's two games), computes the accuracy per category and overall with
rewardlab's `JudgeBench` (``published_scores`` then ``evaluate``), and again with
`reference_accuracy`: a transcription of ``compute_final_metrics`` from ScalerLab/JudgeBench
``utils/metrics.py`` (commit e2c52c2), called per ``source`` prefix as ``run_judge.py`` calls
it. The two must agree exactly.

    python examples/reproduce_judgebench.py [DATA.jsonl] [OUTPUTS.jsonl]

The defaults are the copies in ../shared/data/judgebench beside the repository: the
Claude-3.5-Sonnet pairs judged by Arena-Hard with Claude-3-Haiku.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardlab.benchmarks.judgebench import JudgeBench

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "judgebench"

#: The ``source`` prefixes ``run_judge.py`` reports, with rewardlab's names for them.
PREFIXES = {
    "mmlu-pro": "knowledge",
    "livebench-reasoning": "reasoning",
    "livebench-math": "math",
    "livecodebench": "coding",
    "": "overall",
}


def reference_flip_judgment(decision):
    # utils/metrics.py: flip_judgment
    if decision == "A>B":
        decision = "B>A"
    elif decision == "B>A":
        decision = "A>B"
    return decision


def reference_accuracy(pairs, include_fn):
    """utils/metrics.py: compute_final_metrics(pairs, reverse_order=True, include_fn), the
    accuracy part, as a percentage."""
    pairs = [pair for pair in pairs if include_fn(pair)]
    n_pairs = len(pairs)
    n_correct = 0
    for pair in pairs:
        label = pair["label"]
        judgment1, judgment2 = pair["judgments"]
        decision1 = judgment1["decision"] if judgment1 is not None else None
        decision2 = reference_flip_judgment(judgment2["decision"] if judgment2 is not None else None)
        counter = 0
        for decision in [decision1, decision2]:
            if decision == label:
                counter += 1
            elif decision == reference_flip_judgment(label):
                counter -= 1
        if counter > 0:
            n_correct += 1
    return 100 * n_correct / n_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA / "claude-3-5-sonnet-20240620.jsonl")
    parser.add_argument(
        "outputs", nargs="?", type=Path, default=DATA / "outputs-claude-split-arena_hard-claude-3-haiku.jsonl"
    )
    args = parser.parse_args()

    bench = JudgeBench()
    items = bench.load(args.data)
    result = bench.evaluate(items, bench.published_scores(args.outputs, items))
    ours = {name: figures["accuracy"] * 100 for name, figures in result.subsets.items()}
    ours["overall"] = result.metrics["accuracy"] * 100

    pairs = [
        json.loads(line) for line in args.outputs.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    print(f"{args.outputs.name}: {len(pairs)} pairs\n")
    print(f"{'category':<10} {'pairs':>5} {'rewardlab':>10} {'JudgeBench':>11}")
    for prefix, name in PREFIXES.items():
        selected = [pair for pair in pairs if pair["source"].startswith(prefix)]
        theirs = reference_accuracy(pairs, lambda pair, prefix=prefix: pair["source"].startswith(prefix))
        print(f"{name:<10} {len(selected):>5} {ours[name]:>10.2f} {theirs:>11.2f}")
        assert abs(ours[name] - theirs) < 1e-9, f"{name}: rewardlab {ours[name]} != JudgeBench {theirs}"
    print(f"\nties (split verdicts, no decision either way): {result.metrics['ties']:.1%}")
    print("rewardlab and JudgeBench's compute_final_metrics agree.")


if __name__ == "__main__":
    main()
