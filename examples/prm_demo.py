"""Train a small process reward model and find first errors with it (ProcessBench-style).

1. rewardlab generates step-labelled arithmetic solutions, half of them with one injected first
   error - a wrong result or a misquoted value (`rewardlab.benchmarks.arithmetic`; the labels
   are known by construction): a training set, a validation set (for choosing thresholds) and a
   held-out test set, each with its own seed.
2. `train_prm` fine-tunes SmolLM2-135M-Instruct (the embedded model) as a token-classification
   PRM on the training rows - what TRL's ``PRMTrainer`` did, on transformers' ``Trainer``.
3. The ``prm`` reward (``family: token_classification``) scores every step of the validation
   and test solutions; a step scored under a threshold is a predicted error. The threshold is
   chosen on the validation set only, and ProcessBench's F1 (harmonic mean of the accuracy on
   erroneous and on correct solutions) is reported on the test set.
4. Baselines, thresholds chosen the same way: never flag a step; a random score per step; the
   untuned model's mean token log-probability of each step (a step the model finds unlikely
   is flagged).

Run:  python examples/prm_demo.py [--train 1500] [--test 300] [--out prm-demo]
(about 20 minutes on 2 CPU cores; results in OUT/results.json)
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from rewardlab import Sample, build
from rewardlab.benchmarks.arithmetic import SteppedSolution, arithmetic_solutions
from rewardlab.benchmarks.first_error import choose_threshold, first_error_f1, predicted_first_error
from rewardlab.prm.logprobs import TokenLogprobScorer
from rewardlab.prm.models import EMBEDDED, load_model
from rewardlab.prm.training import train_prm


def prm_step_scores(folder: Path, items: list[SteppedSolution]) -> list[list[float]]:
    config = {"type": "prm", "model": str(folder), "family": "token_classification"}
    config["steps"] = {"split": "lines"}
    reward = build(config)
    scores = reward.score([Sample(prompt=item.problem, completion="\n".join(item.steps)) for item in items])
    failed = [score.reason for score in scores if not score.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} solutions could not be scored, e.g. {failed[0]}")
    return [list(score.steps) for score in scores]


def mean_logprob_step_scores(items: list[SteppedSolution]) -> list[list[float]]:
    """Each step's mean token log-probability under the untuned model, in the PRM's layout."""
    loaded = load_model(EMBEDDED)
    tokenizer, scorer = loaded.tokenizer, TokenLogprobScorer(loaded.model)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    results = []
    for item in items:
        prompt = tokenizer.encode(item.problem, add_special_tokens=False) + newline
        steps = [tokenizer.encode(step, add_special_tokens=False) + newline for step in item.steps]
        (logprobs,) = scorer.completion_logprobs(prompt, [[t for step in steps for t in step]])
        values, start = [], 0
        for step in steps:
            values.append(sum(logprobs[start : start + len(step)]) / len(step))
            start += len(step)
        results.append(values)
    return results


def random_step_scores(items: list[SteppedSolution], seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.random() for _ in item.steps] for item in items]


def evaluate(name: str, validation: list[list[float]], test: list[list[float]], splits) -> dict:
    """The threshold from the validation set, F1 on the test set."""
    validation_items, test_items = splits
    threshold = choose_threshold(validation, [item.first_error for item in validation_items])
    predicted = [predicted_first_error(scores, threshold) for scores in test]
    result = first_error_f1(predicted, [item.first_error for item in test_items])
    return {
        "method": name,
        "threshold": threshold,
        "error_accuracy": result.error_accuracy,
        "correct_accuracy": result.correct_accuracy,
        "f1": result.f1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--validation", type=int, default=150)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("prm-demo"))
    args = parser.parse_args()
    train = arithmetic_solutions(args.train, seed=1)
    validation = arithmetic_solutions(args.validation, seed=2)
    test = arithmetic_solutions(args.test, seed=3)
    splits = (validation, test)

    started = time.perf_counter()
    folder = train_prm(
        [item.stepwise_row() for item in train],
        args.out / "model",
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        use_cpu=True,
        logging_steps=10,
        lr_scheduler_type="linear",
        warmup_steps=5,
    )
    trained_in = time.perf_counter() - started

    results = [
        evaluate(
            "never flag a step",
            [[1.0] * len(i.steps) for i in validation],
            [[1.0] * len(i.steps) for i in test],
            splits,
        ),
        evaluate(
            "random step scores", random_step_scores(validation, 0), random_step_scores(test, 1), splits
        ),
        evaluate(
            "untuned mean token log-prob",
            mean_logprob_step_scores(validation),
            mean_logprob_step_scores(test),
            splits,
        ),
        evaluate(
            "trained PRM (rewardlab prm reward)",
            prm_step_scores(folder, validation),
            prm_step_scores(folder, test),
            splits,
        ),
    ]
    report = {
        "train": args.train,
        "validation": args.validation,
        "test": args.test,
        "test_with_error": sum(item.first_error >= 0 for item in test),
        "training_seconds": round(trained_in),
        "results": results,
    }
    (args.out / "results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"trained on {args.train} solutions in {trained_in:.0f} s; test: {args.test} held-out solutions")
    print(f"{'method':<36} {'acc (error)':>12} {'acc (correct)':>14} {'F1':>6}")
    for row in results:
        accuracies = f"{row['error_accuracy']:>12.3f} {row['correct_accuracy']:>14.3f}"
        print(f"{row['method']:<36} {accuracies} {row['f1']:>6.3f}")


if __name__ == "__main__":
    main()
