"""A trained reward model against its baselines, on the same dev pairs: the untrained model it
started from, the embedded pointwise judge, and "the longer answer wins" - each overall and on
the two length-controlled subsets (pairs of similar length, pairs whose chosen answer is the
shorter; `rewardlab.reward_models.pair_accuracy`).

The pairs are the dev pairs ``rewardlab train-rm`` kept (those within its ``--max-length``, read
from the model's ``metrics.json``), so every row of the table is measured on the same pairs. The
untrained model's figures are train-rm's own (its ``initial`` dev record: the starting model
with a fresh head); the trained model is scored again here through the ``reward_model`` reward,
as a user would, and must agree with train-rm's final record. The judge is the
``pointwise_judge`` on the embedded SmolLM2-135M (no network), each answer scored alone on 1-5;
a tie between the two answers counts as wrong, as for every row.

Run, after ``rewardlab train-rm TRAIN --dev DEV --output RM ...``:

    python examples/compare_rm_baselines.py DEV --rm RM [--judge-config judge.yaml] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rewardlab import build
from rewardlab.reward_models.pair_accuracy import describe, pair_accuracy
from rewardlab.reward_models.preferences import PreferencePair, read_preferences
from rewardlab.reward_models.training_pairs import tokenize_pairs
from rewardlab.rewards.registry import load_config

JUDGE = {"type": "pointwise_judge", "scale": [1, 5]}


def kept_pairs(dev: Path, rm: Path, metrics: dict[str, Any]) -> list[PreferencePair]:
    """The dev pairs train-rm scored: those within its max length, by the model's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(rm)
    pairs = read_preferences(dev, margin_column=None)
    kept = tokenize_pairs(pairs, tokenizer, metrics["max_length"]).pairs
    if len(kept) != metrics["pairs"]["dev"]:
        raise SystemExit(
            f"{len(kept)} dev pairs fit here, train-rm kept {metrics['pairs']['dev']}: another dev file?"
        )
    return kept


def accuracy_of(config: dict[str, Any], pairs: list[PreferencePair]) -> dict[str, Any]:
    """The reward's pair accuracy; an answer it failed to score makes its pair wrong."""
    reward = build(config)
    try:
        chosen = reward.score([pair.sample("chosen") for pair in pairs])
        rejected = reward.score([pair.sample("rejected") for pair in pairs])
    finally:
        reward.close()
    failed = sum(not score.ok for score in chosen + rejected)
    worst = float("-inf")
    record = pair_accuracy(
        [score.value if score.ok else worst for score in chosen],
        [score.value if score.ok else float("inf") for score in rejected],
        [pair.answer_length("chosen") for pair in pairs],
        [pair.answer_length("rejected") for pair in pairs],
    ).to_dict()
    return {**record, "unscored_answers": failed}


def longer_wins(pairs: list[PreferencePair]) -> dict[str, Any]:
    chosen = [pair.answer_length("chosen") for pair in pairs]
    rejected = [pair.answer_length("rejected") for pair in pairs]
    return pair_accuracy([float(n) for n in chosen], [float(n) for n in rejected], chosen, rejected).to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dev", type=Path, help="the dev preference file given to train-rm")
    parser.add_argument("--rm", type=Path, required=True, help="train-rm's output folder")
    parser.add_argument(
        "--judge-config", type=Path, help="the judge's reward config (default: pointwise_judge)"
    )
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()

    metrics = json.loads((args.rm / "metrics.json").read_text())
    pairs = kept_pairs(args.dev, args.rm, metrics)
    judge = load_config(args.judge_config) if args.judge_config else JUDGE
    rows = {
        "untrained model (train-rm's initial dev record)": metrics["initial"]["dev"],
        "trained model (train-rm's final dev record)": metrics["final"]["dev"],
        "trained model, through reward_model": accuracy_of(
            {"type": "reward_model", "model": str(args.rm)}, pairs
        ),
        "pointwise judge, embedded SmolLM2-135M": accuracy_of(judge, pairs),
        "longer answer wins": longer_wins(pairs),
    }
    left_out = metrics["pairs"]["dev_too_long"]
    print(f"{len(pairs)} dev pairs within {metrics['max_length']} tokens ({left_out} longer left out)")
    for name, record in rows.items():
        unscored = record.get("unscored_answers")
        print(f"{name:<50} {describe(record)}" + (f", {unscored} answers not scored" if unscored else ""))
    if args.out:
        args.out.write_text(json.dumps({"pairs": len(pairs), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
