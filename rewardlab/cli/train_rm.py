"""``rewardlab train-rm``: a Bradley-Terry reward model trained on a preference file and saved as a
folder that the ``reward_model`` reward loads as it is."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rewardlab.arguments import positive_int
from rewardlab.errors import UsageError

#: Command-line options that map one to one to `TrainingOptions` fields (``--lora-r`` -> ``lora_r``).
_FIELDS = (
    "mode", "epochs", "learning_rate", "batch_size", "max_length", "margin_column",
    "center_rewards_coefficient", "weight_decay", "lora_r", "lora_alpha", "lora_dropout", "save_steps",
    "save_total_limit", "overwrite", "feature_cache", "inference_batch_size", "device", "seed",
)  # fmt: skip


def add_train_rm_command(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train-rm",
        help="train a Bradley-Terry reward model on preference pairs (prompt/chosen/rejected)",
        description="Train a reward model on TRAIN (JSONL, Parquet or a saved dataset with prompt, "
        "chosen, rejected and optionally margin; text or chat messages) and save it to --output, "
        "which then loads as {type: reward_model, model: OUTPUT}. --mode head fits only the score "
        "head on cached features of the frozen model (practical on a CPU); full and lora train "
        "through TRL's RewardTrainer. Each epoch prints the train loss and the dev accuracy, with "
        "the length-controlled accuracies; all of it goes to OUTPUT/metrics.json.",
    )
    train.add_argument("train", type=Path, metavar="TRAIN", help="preference pairs to train on")
    train.add_argument("--output", required=True, type=Path, metavar="DIR", help="folder for the model")
    train.add_argument("--dev", type=Path, metavar="DEV", help="preference pairs scored after each epoch")
    train.add_argument(
        "--model",
        default="embedded",
        metavar="MODEL",
        help="starting model: a causal LM or a one-output classifier (folder or .gguf file), or "
        "'embedded' (SmolLM2-135M-Instruct; the default)",
    )
    train.add_argument("--mode", choices=("head", "full", "lora"), default="head", help="default: head")
    train.add_argument("--epochs", type=positive_int, default=3, metavar="N", help="default: 3")
    train.add_argument(
        "--learning-rate", type=float, metavar="LR", help="default: 1e-2 (head), 1e-4 (full, lora)"
    )
    train.add_argument(
        "--batch-size", type=positive_int, metavar="N", help="pairs per step; default: 32 (head), 8"
    )
    train.add_argument(
        "--max-length",
        type=positive_int,
        default=1024,
        metavar="N",
        help="most tokens of an answer with its prompt; longer pairs are left out (default: 1024)",
    )
    margin = train.add_mutually_exclusive_group()
    margin.add_argument(
        "--margin-column",
        default="margin",
        metavar="NAME",
        help="column with each pair's margin, used when present (default: margin, as TRL)",
    )
    margin.add_argument(
        "--no-margin", dest="margin_column", action="store_const", const=None, help="read no margins"
    )
    train.add_argument(
        "--center-rewards-coefficient",
        type=float,
        metavar="C",
        help="pull rewards towards mean zero (TRL suggests 0.01)",
    )
    train.add_argument("--weight-decay", type=float, default=0.0, metavar="W", help="default: 0")
    train.add_argument("--lora-r", type=positive_int, default=16, metavar="N", help="default: 16")
    train.add_argument("--lora-alpha", type=positive_int, default=32, metavar="N", help="default: 32")
    train.add_argument("--lora-dropout", type=float, default=0.05, metavar="P", help="default: 0.05")
    train.add_argument(
        "--save-steps", type=positive_int, metavar="N", help="a checkpoint every N steps (default: per epoch)"
    )
    train.add_argument("--save-total-limit", type=positive_int, metavar="N", help="most checkpoints kept")
    existing = train.add_mutually_exclusive_group()
    existing.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="CHECKPOINT",
        help="continue from the last checkpoint in --output, or from CHECKPOINT (full, lora)",
    )
    existing.add_argument("--overwrite", action="store_true", help="train into a non-empty --output")
    train.add_argument(
        "--feature-cache",
        type=Path,
        metavar="DIR",
        help="head mode's feature cache (default: in rewardlab's cache)",
    )
    train.add_argument(
        "--inference-batch-size",
        type=positive_int,
        default=16,
        metavar="N",
        help="sequences per forward pass for features and dev rewards (default: 16)",
    )
    train.add_argument(
        "--device", metavar="DEVICE", help="cpu, cuda, ... (default: the GPU when there is one)"
    )
    train.add_argument("--seed", type=int, default=0, help="default: 0")
    train.set_defaults(run=_train_rm)


class FeatureProgress:
    """Head mode's feature pass on stderr, about every ``every_s`` seconds and at its end: done,
    rate and time left (on a CPU the pass takes hours for thousands of pairs). Rates are
    measured from the first batch's end, so loading and tokenizing do not count."""

    def __init__(self, every_s: float = 10.0):
        self.every_s = every_s
        self.first: tuple[float, int, int] | None = None  # (when, sequences, tokens) at the first batch
        self.shown = 0.0

    def __call__(self, done: int, total: int, tokens: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = (now, done, tokens)
        when, first_done, first_tokens = self.first
        if done < total and now - self.shown < self.every_s:
            return
        self.shown = now
        line = f"features: {done}/{total} sequences"
        if now > when and done > first_done:
            rate = (done - first_done) / (now - when)
            line += f", {(tokens - first_tokens) / (now - when):.0f} tokens/s"
            if done < total:
                left = (total - done) / rate
                line += f", about {left:.0f} s left" if left < 90 else f", about {left / 60:.0f} min left"
        print(line, file=sys.stderr, flush=True)
        if done == total:
            self.first = None  # the next call starts the next split's pass


def _train_rm(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rewardlab.reward_models.pair_accuracy import describe
    from rewardlab.reward_models.training import TrainingOptions, train_reward_model

    options: dict[str, Any] = {name: getattr(args, name) for name in _FIELDS}
    options.update(base_model=args.model, resume=args.resume)
    try:
        TrainingOptions(**options)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        flag = f"--{where.replace('_', '-')}: " if where else ""
        raise UsageError(f"{flag}{problem['msg'].removeprefix('Value error, ')}") from None
    try:
        metrics = train_reward_model(
            args.train,
            args.output,
            dev=args.dev,
            on_epoch=lambda epoch: print(epoch.line(), flush=True),
            on_features=FeatureProgress(),
            **options,
        )
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    for split in ("train", "dev"):
        before, after = metrics["initial"].get(split), metrics["final"].get(split)
        if after is not None:
            start = f"{describe(before)} -> " if before is not None else ""
            print(f"{split} accuracy: {start}{describe(after)}")
    print(f"rewardlab train-rm: model in {args.output} (metrics in {args.output / 'metrics.json'})")
    return 0
