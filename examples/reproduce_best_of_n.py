"""Reproduce Qwen2.5-Math's rm@8 and maj@8 with rewardlab, and check them against Qwen2.5-Math's
own scoring.

Reads an evaluation output file in Qwen2.5-Math's ``eval_rm_maj_example`` layout (N responses
per problem with their extracted answers, correctness and reward scores), computes best-of-n,
majority@n and pass@n for n = 1..N with rewardlab's `BestOfN` (``published_scores`` then
``evaluate``), and again with `reference_rm_at_k` and `reference_maj_at_k`: transcriptions of
``eval_rm_k_metrics`` and ``eval_maj_k_metrics`` (with ``group_pred``) from QwenLM/Qwen2.5-Math
``evaluation/rm_maj_eval.py`` (commit ab5097e). The two must agree exactly at every n.

    python examples/reproduce_best_of_n.py [FILE.jsonl]

The default is the copy of ``math_cot_100.jsonl`` in ../shared/data/bon beside the repository.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from rewardlab.benchmarks.best_of_n import BestOfN

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "bon" / "qwen2.5-math-cot-100x8.jsonl"


def reference_group_pred(preds):
    # rm_maj_eval.py: group_pred(preds, strip=False, use_symbol=False)
    orginal_preds = preds
    cnt = Counter(preds)
    majority = cnt.most_common(1)[0][0]
    groups = defaultdict(list)
    for idx, pred in enumerate(preds):
        groups[pred].append(idx)
    return groups, orginal_preds[groups[majority][0]]


def reference_rm_at_k(data_list, k):
    # rm_maj_eval.py: eval_rm_k_metrics
    count, right_count = 0, 0
    for sample in data_list:
        assert len(sample["pred_score"]) >= k
        pred_score = sample["pred_score"][:k]
        pred = sample["score"][:k]
        rm_score = [inner_score for score in pred_score for inner_score in score]
        assert len(rm_score) == len(pred)
        max_index = rm_score.index(max(rm_score))
        right_count += pred[max_index]
        count += 1
    return right_count / count * 100


def reference_maj_at_k(data_list, k):
    # rm_maj_eval.py: eval_maj_k_metrics
    count, right_count = 0, 0
    for sample in data_list:
        assert len(sample["score"]) >= k
        groups, majority_pred = reference_group_pred(sample["pred"][:k])
        idx = groups[majority_pred][0]
        right_count += sample["score"][idx]
        count += 1
    return right_count / count * 100


def reference_pass_at_k(data_list, k):
    # Not in rm_maj_eval.py: any of the first k correct, the oracle bound.
    return sum(any(sample["score"][:k]) for sample in data_list) / len(data_list) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DATA)
    args = parser.parse_args()

    bench = BestOfN()
    items = bench.load(args.file)
    result = bench.evaluate(items, bench.published_scores(args.file, items))
    data_list = [
        json.loads(line) for line in args.file.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    references = {
        "best-of-n": reference_rm_at_k,
        "majority@n": reference_maj_at_k,
        "pass@n": reference_pass_at_k,
    }

    print(f"{args.file.name}: {len(items)} problems, {len(items[0].candidates)} responses each\n")
    print(f"{'n':>2} " + " ".join(f"{name + ' (rewardlab / Qwen)':>28}" for name in references))
    for n in range(1, len(result.curves["best-of-n"]) + 1):
        cells = []
        for name, reference in references.items():
            ours, theirs = result.curves[name][n - 1] * 100, reference(data_list, n)
            assert abs(ours - theirs) < 1e-9, f"{name} at n={n}: rewardlab {ours} != Qwen2.5-Math {theirs}"
            cells.append(f"{ours:>13.1f} / {theirs:<12.1f}")
        print(f"{n:>2} " + " ".join(f"{cell:>28}" for cell in cells))
    k = len(result.curves["best-of-n"])
    print(
        f"\nrm@{k} = {reference_rm_at_k(data_list, k):.1f}, maj@{k} = {reference_maj_at_k(data_list, k):.1f}"
    )
    print(f"rewardlab: {', '.join(f'{name} = {value * 100:.1f}' for name, value in result.metrics.items())}")
    print("rewardlab and Qwen2.5-Math's rm_maj_eval.py agree at every n.")


if __name__ == "__main__":
    main()
