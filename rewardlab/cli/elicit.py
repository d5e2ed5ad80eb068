"""``rewardlab elicit``: saved rollouts replayed step by step through online rubric elicitation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardlab.arguments import positive_int
from rewardlab.cli.pipeline import (
    build_reward,
)
from rewardlab.errors import UsageError
from rewardlab.rubrics.elicit_options import ElicitationOptions


def add_elicit_command(commands: argparse._SubParsersAction) -> None:
    elicit = commands.add_parser(
        "elicit",
        help="replay saved rollouts step by step, growing rubrics by online elicitation",
        description="Score ROLLOUTS (JSONL rows with step, prompt and completion; prompt_id and "
        "reference_response used when present) step by step with the rubric reward in --config, "
        "eliciting criteria after each step into the rubric store. One JSON record per step in "
        "--output; every change is in the store's log.",
    )
    elicit.add_argument("input", type=Path, metavar="ROLLOUTS", help="JSONL file of saved rollouts")
    elicit.add_argument(
        "--config", required=True, metavar="CONFIG.yaml", help="a rubric reward config ({type: rubric, ...})"
    )
    elicit.add_argument(
        "--store", type=Path, metavar="RUBRICS.sqlite", help="the rubric store (default: the config's store)"
    )
    elicit.add_argument("--output", type=Path, metavar="STEPS.jsonl", help="write each step's report here")
    defaults = ElicitationOptions()
    for name, kind, metavar, meaning in (
        ("pairs_per_prompt", positive_int, "N", "policy-vs-reference comparisons per prompt per step"),
        ("max_new_per_pair", positive_int, "N", "criteria one comparison may propose"),
        ("max_active", positive_int, "N", "most active criteria per prompt"),
        ("similarity", _fraction, "X", "word overlap at which a proposal merges into a criterion"),
        ("retire_after", positive_int, "N", "steps without variance before a criterion retires"),
        ("flat_tolerance", _fraction, "X", "verdict spread that still counts as no variance"),
    ):
        elicit.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            default=getattr(defaults, name),
            metavar=metavar,
            help=f"{meaning} (default: %(default)s)",
        )
    elicit.add_argument(
        "--retire-any",
        action="store_true",
        help="let any criterion retire, not only elicited ones (by default hand-written and generated "
        "ones stay)",
    )
    elicit.set_defaults(run=_elicit)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value}")
    return value


def _elicit(args: argparse.Namespace) -> int:
    from rewardlab.rubrics.elicit import RubricElicitor
    from rewardlab.rubrics.grading import RubricReward
    from rewardlab.rubrics.online import read_step_rows, replay, step_record
    from rewardlab.rubrics.store import RubricStore

    rows = read_step_rows(args.input)
    if args.output is not None and not args.output.parent.is_dir():
        raise UsageError(f"--output {args.output}: no such folder {args.output.parent}")
    try:
        options = ElicitationOptions(
            pairs_per_prompt=args.pairs_per_prompt,
            max_new_per_pair=args.max_new_per_pair,
            max_active=args.max_active,
            similarity=args.similarity,
            retire_after=args.retire_after,
            flat_tolerance=args.flat_tolerance,
            retire_only_elicited=not args.retire_any,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    reward = build_reward(args.config)
    try:
        if not isinstance(reward, RubricReward):
            raise UsageError(
                f"--config {args.config}: elicitation needs a 'rubric' reward, got {reward.name!r}"
            )
        if args.store is not None:
            if reward.store is not None:
                reward.store.close()
            reward.store = RubricStore(args.store)
        if reward.store is None:
            raise UsageError("no rubric store: pass --store or give the config a store")
        steps = replay(reward, RubricElicitor(reward, reward.store, options), rows)
    finally:
        reward.close()
    records = [step_record(step) for step in steps]
    if args.output is not None:
        args.output.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    print(
        f"{'step':>6} {'scored':>9} {'mean reward':>12} {'added':>6} {'merged':>7} {'retired':>8} "
        f"{'failures':>9}"
    )
    for record in records:
        actions = [change["action"] for changes in record["changes"].values() for change in changes]
        mean = "-" if record["mean_reward"] is None else f"{record['mean_reward']:.4f}"
        print(
            f"{record['step']:>6} {record['scored']:>4}/{record['samples']:<4} {mean:>12} "
            f"{actions.count('add'):>6} {actions.count('merge'):>7} {actions.count('retire'):>8} "
            f"{len(record['failures']):>9}"
        )
    return 0
