"""Sequence-classifier reward model scoring: rewardlab's `reward_model` against a naive
per-sample transformers loop, in the same process, and peak memory of each.

The model: the embedded SmolLM2-135M-Instruct as a one-output sequence classifier with a fresh
head (what ``rewardlab train-rm`` starts from; the scores' values do not matter here, only that
both paths give the same ones). The data: real Qwen2.5-Math solutions of mixed lengths (about
100 to 1,500 tokens), four per question, each scored as the completion of its question, rendered
with the model's chat template.

The baseline is what a user writes first: for each sample, render the conversation, tokenize,
run the model on one row, read the logit. rewardlab batches by length under a token budget
(`max_batch_tokens`, 16,384 by default; padding capped at 10% of a batch) and runs under
``torch.inference_mode``; the second rewardlab row is one sample per forward pass
(``--batch-tokens 1``).
The values of both paths are checked to agree (within 1e-3: padded and unpadded rows go through
different kernels).

Then both again in bfloat16 (``dtype: bfloat16``): on a CPU with bfloat16 matrix units (Intel
AMX, AVX512-BF16) the forward pass runs about three times faster than in float32 - on this
machine's CPU, unlike batching, the thing that does pay. The values move by the rounding of
bfloat16, so these rows report the largest difference from float32 and whether the ranking of
each question's solutions is kept, instead of checking equality. float32 stays the CPU default
(scores the same on every machine); bfloat16 is the default on a GPU.

Memory: each path in a fresh process reading the same saved folder, its peak resident set
(``ru_maxrss``) printed.

Run:  python perf/rm_throughput.py [--samples 48] [--repeats 2] [--skip-memory]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).parent / "data" / "qwen25-math-cot-100x8.jsonl.gz"


def samples(count: int) -> list[tuple[str, str]]:
    """``count`` (question, solution) pairs: four solutions of each question in turn, as a
    GRPO group or a best-of-4 holds them (their lengths mix within and across questions)."""
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    pairs = [(row["question"], response) for row in rows for response in row["responses"][:4]]
    return pairs[:count]


def classifier_folder(target: Path) -> Path:
    """The embedded model as a one-output classifier with a fresh head, saved to ``target``."""
    from rewardlab.reward_models.training import starting_model

    model, tokenizer = starting_model("embedded", seed=0)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def naive_scores(folder: Path, pairs: list[tuple[str, str]], dtype: str = "float32") -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    values = []
    with torch.no_grad():
        for question, solution in pairs:
            inputs = tokenizer(
                _rendered(tokenizer, question, solution), return_tensors="pt", add_special_tokens=False
            )
            values.append(float(model(**inputs).logits[0, 0]))
    return values


def _rendered(tokenizer, question: str, solution: str) -> str:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": solution}]
    return tokenizer.apply_chat_template(messages, tokenize=False)


def rewardlab_scores(
    folder: Path, pairs: list[tuple[str, str]], batch_tokens: int | None, dtype: str = "float32"
) -> list[float]:
    import rewardlab

    config = {"type": "reward_model", "model": str(folder), "dtype": dtype}
    if batch_tokens is not None:
        config["max_batch_tokens"] = batch_tokens
    reward = rewardlab.build(config)
    scores = reward.score([rewardlab.Sample(prompt=q, completion=s) for q, s in pairs])
    assert all(score.ok for score in scores), next(score.reason for score in scores if not score.ok)
    return [score.value for score in scores if score.value is not None]


def best_time(run, repeats: int) -> tuple[float, list[float]]:
    best, values = float("inf"), []
    for _ in range(repeats):
        started = time.perf_counter()
        values = run()
        best = min(best, time.perf_counter() - started)
    return best, values


def throughput(folder: Path, count: int, repeats: int) -> None:
    from transformers import AutoTokenizer

    pairs = samples(count)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lengths = [
        len(tokenizer(_rendered(tokenizer, q, s), add_special_tokens=False)["input_ids"]) for q, s in pairs
    ]
    rewardlab_scores(folder, pairs[:2], None)  # load the model and warm both paths
    naive_scores(folder, pairs[:2])
    naive_s, naive_values = best_time(lambda: naive_scores(folder, pairs), repeats)
    paths = {
        "reward_model, batches <= 16384 tok": (None, "float32"),
        "reward_model, one sample per pass": (1, "float32"),
        "reward_model, bfloat16, batches": (None, "bfloat16"),
        "reward_model, bfloat16, one per pass": (1, "bfloat16"),
    }
    runs = {
        label: best_time(lambda b=budget, d=dtype: rewardlab_scores(folder, pairs, b, d), repeats)
        for label, (budget, dtype) in paths.items()
    }
    runs["naive per-sample loop, bfloat16"] = best_time(
        lambda: naive_scores(folder, pairs, "bfloat16"), repeats
    )
    tokens = sum(lengths)
    print(
        f"{count} samples, {tokens} tokens ({min(lengths)}-{max(lengths)} per sample), "
        "SmolLM2-135M classifier, CPU"
    )
    print(f"{'path':<40} {'seconds':>8} {'samples/s':>10} {'tokens/s':>9} {'vs naive':>9}  values")
    print(f"{'naive per-sample loop':<40} {naive_s:>8.2f} {count / naive_s:>10.2f} {tokens / naive_s:>9.0f}")
    for label, (seconds, values) in runs.items():
        worst = max(abs(a - b) for a, b in zip(naive_values, values, strict=True))
        if "bfloat16" not in label:
            assert worst < 1e-3, f"the two paths disagree by {worst}"
        kept = _pairs_ordered_alike(naive_values, values, pairs)
        rate = f"{count / seconds:>10.2f} {tokens / seconds:>9.0f} {naive_s / seconds:>8.2f}x"
        print(
            f"{label:<40} {seconds:>8.2f} {rate}  max diff {worst:.3g}, "
            f"{kept:.1%} of same-question pairs ordered alike"
        )


def _pairs_ordered_alike(reference: list[float], values: list[float], pairs: list[tuple[str, str]]) -> float:
    """Of the pairs of solutions to the same question, the share that ``values`` order as
    ``reference`` does (what a best-of-n or a GRPO group reads)."""
    same = [
        (i, j)
        for i in range(len(pairs))
        for j in range(i + 1, len(pairs))
        if pairs[i][0] == pairs[j][0] and reference[i] != reference[j]
    ]
    alike = sum((reference[i] < reference[j]) == (values[i] < values[j]) for i, j in same)
    return alike / len(same) if same else 1.0


def memory_of(path: str, count: int, folder: Path) -> None:
    """Run one path in this (fresh) process and print its peak resident memory in MiB."""
    pairs = samples(count)
    if path == "naive":
        naive_scores(folder, pairs)
    else:
        rewardlab_scores(folder, pairs, None)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-of", choices=["naive", "rewardlab"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        memory_of(args.memory_of, args.samples, args.folder)
        return
    with tempfile.TemporaryDirectory() as scratch:
        folder = classifier_folder(Path(scratch) / "rm")
        throughput(folder, args.samples, args.repeats)
        if not args.skip_memory:
            for path in ("naive", "rewardlab"):
                command = [sys.executable, __file__, "--memory-of", path, "--samples", str(args.samples)]
                done = subprocess.run(
                    [*command, "--folder", str(folder)], capture_output=True, text=True, check=True
                )
                print(f"peak resident memory, {path}: {float(done.stdout.split()[-1]):.0f} MiB")


if __name__ == "__main__":
    main()
