"""Progress advantage for best-of-N: RL-tune SmolLM2-135M, then let the log-ratio between the
tuned policy and the original pick among candidates.

1. A short GRPO run (TRL, on the CPU, KL coefficient ``--beta``) tunes SmolLM2-135M-Instruct
   (the embedded model), rewarded by a rewardlab reward through the TRL adapter, on one of
   four tasks:
   - ``commas`` (the default): "Write one sentence about {topic}. Do not use any commas.",
     rewarded by ``instruction_following`` (IFEval's ``punctuation:no_comma``); 30 of the 120
     topics are held out of training. The original model complies about a third of the time,
     so RL has something to learn, and what it learns is a rule that carries to new topics;
   - ``addition``: single-digit addition answered freely ("Answer with only the number."),
     rewarded by ``math_answer``; a third of the 81 digit pairs (27) are held out;
   - ``prefilled``: the same, but in training the policy's answer starts as "The answer is",
     so RL can change only the number that follows, not the wording; candidates are then
     sampled free-form (does what RL taught about the numbers carry to free-form answers?), or
     with ``--prefixed-candidates`` after the same "The answer is" (only the numbers differ);
   - ``chain``: three single-digit numbers added one step at a time in the format of two
     worked examples (``3 + 4 = 7``, ``7 + 2 = 9``, ``The answer is 9.``), rewarded by
     ``math_answer`` plus a small format term; 360 triples to train on, 60 others held out.
2. For each held-out prompt (``--draws`` times, each a fresh set), the tuned policy samples N
   candidates; the task's grader (its reward, or ``math_answer`` alone) marks them right or not.
3. The original model samples N candidates for the same prompts: a second pool, where the
   tuned policy is a verifier for another model's answers (PRIME's use of the implicit PRM).
4. In each pool, a candidate is picked by:
   - progress advantage (``progress_advantage``: log pi_RL - log pi_ref, token log-probs
     summed per line, the lines folded by ``sum`` / ``mean`` / ``min``);
   - mean token log-probability, under the tuned policy and under the original model (the
     likelihood baselines);
   every log-probability at ``--score-temperature`` (default 0.7: GRPO's sampling temperature,
   at which TRL computes both models' log-probs and its KL term);
   - random choice (its exact expectation: the mean correctness of the N candidates).
   The oracle (any candidate correct, pass@N) bounds them all.
5. Per pool: each value's AUROC for a right candidate, over all candidates; and progress
   advantage (sum) against each other selection, set by set - how often only one of the two
   picked a right candidate, with McNemar's exact p-value.
Every candidate's text, correctness and values go to OUT/candidates-*.jsonl, the figures to
OUT/results.json.

Run:  python examples/progress_advantage_demo.py [--task commas|addition|prefilled|chain]
          [--steps 60] [--beta 0.1] [--n 8] [--draws 3] [--seed 0] [--out pa-demo]
          [--policy DIR] [--prefixed-candidates] [--score-temperature 0.7]
(commas: about 30 minutes on 2 CPU cores; addition: about 20; prefilled: about 15; chain:
about 40)
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab import Sample, build
from rewardlab.integrations.trl import as_reward_func
from rewardlab.prm.applications import auroc, best_of_n, mcnemar_exact
from rewardlab.prm.logprobs import TokenLogprobScorer
from rewardlab.prm.models import EMBEDDED, LoadedModel, load_model, model_folder
from rewardlab.rewards.contract import Score
from rewardlab.rewards.steps import aggregate_steps

FOLDS = ("sum", "mean", "min")
#: The selection the others are compared with, set by set.
LEADER = "progress advantage (sum)"
#: The sampling temperature, in GRPO and for the candidates.
TEMPERATURE = 0.7

ADDITION = "What is {a} + {b}? Answer with only the number."
CHAIN = (
    "Add the numbers one step at a time, exactly like these examples.\n\n"
    "Q: 2 + 5 + 4\n2 + 5 = 7\n7 + 4 = 11\nThe answer is 11.\n\n"
    "Q: 6 + 3 + 8\n6 + 3 = 9\n9 + 8 = 17\nThe answer is 17.\n\n"
    "Q: {a} + {b} + {c}"
)
#: The chain task's shaping: a little reward for the worked format of the examples (two additions,
#: then the answer line), so that the policy keeps showing its steps.
CHAIN_FORMAT = r"^\s*\d+ \+ \d+ = \d+\s*\n\d+ \+ \d+ = \d+\s*\nThe answer is \d+\.?\s*$"


@dataclass(frozen=True)
class Task:
    """Prompts with their answers, split into training and held-out, and how long answers get."""

    train: list[tuple[str, str]]
    test: list[tuple[str, str]]
    max_tokens: int
    steps: str
    reward: dict[str, Any]
    #: The start of the policy's answer, given in training (so that RL changes the answer's
    #: substance, not its wording).
    answer_prefix: str = ""
    #: Training only: the most tokens of a completion (default ``max_tokens``).
    training_tokens: int | None = None
    #: What makes a candidate right (value 1).
    grader: dict[str, Any] = field(default_factory=lambda: {"type": "math_answer"})
    #: Fields every sample carries (dataset columns in training), e.g. instruction ids.
    fields: dict[str, Any] = field(default_factory=dict)


def addition_task(seed: int) -> Task:
    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
    random.Random(seed).shuffle(pairs)
    rows = [(ADDITION.format(a=a, b=b), str(a + b)) for a, b in pairs]
    return Task(rows[27:], rows[:27], max_tokens=24, steps="lines", reward={"type": "math_answer"})


def chain_task(seed: int) -> Task:
    examples = {(2, 5, 4), (6, 3, 8)}
    triples = [
        (a, b, c)
        for a in range(1, 10)
        for b in range(1, 10)
        for c in range(1, 10)
        if (a, b, c) not in examples
    ]
    random.Random(seed).shuffle(triples)
    rows = [(CHAIN.format(a=a, b=b, c=c), str(a + b + c)) for a, b, c in triples[:420]]
    reward = {
        "type": "combine",
        "components": {
            "accuracy": {"type": "math_answer", "weight": 1.0},
            "format": {"type": "regex_match", "pattern": CHAIN_FORMAT, "weight": 0.25},
        },
    }
    return Task(rows[60:], rows[:60], max_tokens=40, steps="lines", reward=reward)


def prefilled_addition_task(seed: int) -> Task:
    task = addition_task(seed)
    return Task(
        task.train, task.test, task.max_tokens, task.steps, task.reward, "The answer is", training_tokens=8
    )


#: Things to write a sentence about: 90 to train on, 30 held out.
TOPIC_LIST = """
    the sea, bread, winter, a cat, trains, the moon, coffee, gardens, rain, music, a river,
    books, mountains, the city, apples, friendship, a dog, the desert, snow, bicycles, a
    library, the forest, tea, summer, an old house, birds, the wind, a market, clocks, the
    stars, a bridge, lakes, autumn, a farmer, the sun, cheese, a storm, painting, a
    lighthouse, bees, the night, soup, a school, horses, islands, candles, a kitchen, the
    morning, owls, a village, spring, a harbor, honey, a train station, the clouds, flowers, a
    teacher, boats, the mountains at dawn, a museum, chocolate, fishing, a park, the ocean
    floor, wolves, a castle, sand, a violin, the harvest, a garden path, frogs, a bakery, the
    rainforest, kites, a mirror, volcanoes, a quiet street, pianos, the tide, a map, foxes, a
    picnic, glaciers, a letter, the countryside, whales, a lantern, the seasons, a hat,
    butterflies, a bus ride, the sky, oranges, a small shop, rivers in spring, a fireplace,
    the beach, a notebook, cows, the first snow, a hammer, deer, a city at night, the garden
    in summer, rabbits, a clock tower, a thunderstorm, the harbor at dusk, penguins, a cup of
    tea, the hills, a puppy, waterfalls, a ship, the library at night, pears, a sunrise, a
    sunset, squirrels, a meadow
"""
TOPICS = tuple(" ".join(topic.split()) for topic in TOPIC_LIST.split(","))
NO_COMMAS = "Write one sentence about {topic}. Do not use any commas."


def commas_task(seed: int) -> Task:
    """An instruction to follow (IFEval's ``punctuation:no_comma``): one sentence about a topic,
    without commas; the original model complies a third of the time, and RL learns the rule
    itself (held-out topics ask it of new sentences)."""
    topics = list(TOPICS)
    random.Random(seed).shuffle(topics)
    rows = [(NO_COMMAS.format(topic=topic), "") for topic in topics]
    return Task(
        rows[30:],
        rows[:30],
        max_tokens=32,
        steps="lines",
        reward={"type": "instruction_following"},
        grader={"type": "instruction_following"},
        fields={"instruction_id_list": ["punctuation:no_comma"]},
    )


TASKS = {
    "addition": addition_task,
    "chain": chain_task,
    "commas": commas_task,
    "prefilled": prefilled_addition_task,
}


def train_policy(task: Task, steps: int, out: Path, beta: float, seed: int) -> Path:
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_folder(EMBEDDED)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if task.answer_prefix:  # TRL continues a text prompt as it is
        rows = [
            {"prompt": chat_text(tokenizer, prompt) + task.answer_prefix, "answer": answer, **task.fields}
            for prompt, answer in task.train
        ]
    else:
        rows = [
            {"prompt": [{"role": "user", "content": prompt}], "answer": answer, **task.fields}
            for prompt, answer in task.train
        ]
    config = trl.GRPOConfig(
        output_dir=str(out / "grpo"),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=task.training_tokens or task.max_tokens,
        gradient_checkpointing=False,
        max_steps=steps,
        learning_rate=3e-5,
        beta=beta,
        temperature=TEMPERATURE,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        seed=seed,
    )
    reward = build(task.reward)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        processing_class=tokenizer,
        reward_funcs=[as_reward_func(reward)],
        args=config,
        train_dataset=Dataset.from_list(rows).shuffle(seed=seed),
    )
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"  step {entry['step']:>3}: mean reward {entry['reward']:.3f}")
    trainer.save_model(str(out / "policy"))
    trainer.processing_class.save_pretrained(str(out / "policy"))
    reward.close()
    return out / "policy"


def chat_text(tokenizer: Any, question: str) -> str:
    """The chat-templated prompt for one user question, up to where the assistant answers."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )


def sample_candidates(
    loaded: LoadedModel, contexts: list[str], n: int, seed: int, max_tokens: int
) -> list[list[str]]:
    """``n`` continuations of each context (the text the model continues), sampled."""
    import torch

    tokenizer = loaded.tokenizer
    candidates = []
    for index, context in enumerate(contexts):
        ids = tokenizer(context, add_special_tokens=False, return_tensors="pt")["input_ids"]
        torch.manual_seed(seed + index)
        with torch.inference_mode():
            out = loaded.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=TEMPERATURE,
                max_new_tokens=max_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.eos_token_id,
            )
        candidates.append(tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True))
    return candidates


def mean_logprobs(
    scorer: TokenLogprobScorer, tokenizer: Any, context: str, completions: list[str]
) -> list[float]:
    prompt_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in completions]
    values = scorer.completion_logprobs(prompt_ids, ids)
    return [sum(v) / len(v) if v else float("-inf") for v in values]


@dataclass
class Selectors:
    """Every way of picking a candidate, as one value per candidate (the highest is picked)."""

    progress: Any
    policy: LoadedModel
    original: LoadedModel
    temperature: float

    def __post_init__(self) -> None:
        self.policy_likelihood = TokenLogprobScorer(self.policy.model, temperature=self.temperature)
        self.original_likelihood = TokenLogprobScorer(self.original.model, temperature=self.temperature)

    def values(self, context: str, samples: list[Sample]) -> dict[str, list[float]]:
        advantages = self.progress.score(samples)  # one pass of both models; folded three ways
        values = {
            f"progress advantage ({fold})": [
                aggregate_steps(score.steps, fold) if score.ok and score.steps else float("-inf")
                for score in advantages
            ]
            for fold in FOLDS
        }
        completions = [sample.completion for sample in samples]
        values["tuned policy mean token log-prob"] = mean_logprobs(
            self.policy_likelihood, self.policy.tokenizer, context, completions
        )
        values["original model mean token log-prob"] = mean_logprobs(
            self.original_likelihood, self.original.tokenizer, context, completions
        )
        return values


def pick_accuracy(
    pool: list[list[str]],
    contexts: list[str],
    references: list[str],
    selectors: Selectors,
    grader: Any,
    *,
    fields: dict[str, Any],
) -> tuple[dict[str, float], dict[str, list[bool]], list[dict[str, Any]]]:
    """Best-of-N accuracy of each selection over one pool of candidates (continuations of
    ``contexts``), with random choice (its exact expectation) and the oracle; whether each
    selection's pick was right, per set; and a record per candidate (its text, whether it is
    right, and every selection's value for it)."""
    picked: dict[str, list[bool]] = defaultdict(list)
    random_choice, oracle, records = [], [], []
    for context, reference, candidates in zip(contexts, references, pool, strict=True):
        samples = [
            Sample(prompt=context, completion=c, reference=reference, fields=fields) for c in candidates
        ]
        correct = [s.ok and s.value == 1.0 for s in grader.score(samples)]
        random_choice.append(sum(correct) / len(correct))
        oracle.append(any(correct))
        values = selectors.values(context, samples)
        for name, column in values.items():
            choice = best_of_n([Score(value=value) for value in column])
            picked[name].append(choice is not None and correct[choice])
        for index, candidate in enumerate(candidates):
            records.append(
                {
                    "context": context,
                    "completion": candidate,
                    "correct": correct[index],
                    **{name: column[index] for name, column in values.items()},
                }
            )
    accuracy = {name: sum(hits) / len(hits) for name, hits in picked.items()}
    accuracy["random choice (expected)"] = sum(random_choice) / len(random_choice)
    accuracy["oracle (pass@N)"] = sum(oracle) / len(oracle)
    return accuracy, dict(picked), records


def head_to_head(picked: dict[str, list[bool]], leader: str) -> dict[str, dict[str, float]]:
    """``leader`` against each other selection, set by set: how often only one of the two picked
    a right candidate, and McNemar's exact p-value (could the two be equally good?)."""
    compared = {}
    for name, hits in picked.items():
        if name == leader:
            continue
        pairs = list(zip(picked[leader], hits, strict=True))
        wins = sum(mine and not theirs for mine, theirs in pairs)
        losses = sum(theirs and not mine for mine, theirs in pairs)
        compared[name] = {
            "only_leader_right": wins,
            "only_other_right": losses,
            "p_value": mcnemar_exact(wins, losses),
        }
    return compared


def candidate_auroc(records: list[dict[str, Any]], names: list[str]) -> dict[str, float | None]:
    """Each selection's value as a score for the candidate being right, over every candidate
    (None when every candidate is right, or none is)."""
    right = [record["correct"] for record in records]
    if all(right) or not any(right):
        return dict.fromkeys(names)
    return {name: auroc([record[name] for record in records], right) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=sorted(TASKS), default="commas")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--draws", type=int, default=3, help="sets of N candidates per held-out prompt")
    parser.add_argument("--beta", type=float, default=0.1, help="GRPO's KL coefficient")
    parser.add_argument(
        "--score-temperature",
        type=float,
        default=TEMPERATURE,
        help="the temperature of the log-probabilities every selection reads (default: the "
        "one GRPO trained at, whose distributions its KL term regularises)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the held-out split, GRPO's seed and the candidates' draws"
    )
    parser.add_argument("--out", type=Path, default=Path("pa-demo"))
    parser.add_argument(
        "--prefixed-candidates",
        action="store_true",
        help="candidates start with the task's answer prefix too (prefilled: 'The answer is')",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        help="a tuned policy from an earlier run with the same --task and --seed (skips GRPO; "
        "another seed would hold out topics it trained on)",
    )
    args = parser.parse_args()
    task = TASKS[args.task](args.seed)

    started = time.perf_counter()
    policy_folder = args.policy or train_policy(task, args.steps, args.out, args.beta, args.seed)
    trained_in = time.perf_counter() - started

    policy, original = load_model(policy_folder), load_model(EMBEDDED)
    prefix = task.answer_prefix if args.prefixed_candidates else ""
    contexts = [
        chat_text(policy.tokenizer, prompt) + prefix for prompt, _ in task.test for _ in range(args.draws)
    ]
    references = [answer for _, answer in task.test for _ in range(args.draws)]
    grader = build(task.grader)
    progress = build(
        {
            "type": "progress_advantage",
            "policy": str(policy_folder),
            "reference": EMBEDDED,
            "steps": {"split": task.steps},
            "temperature": args.score_temperature,
        }
    )
    selectors = Selectors(progress, policy, original, args.score_temperature)
    args.out.mkdir(parents=True, exist_ok=True)
    results, aurocs, compared = {}, {}, {}
    for name, model in (("tuned policy", policy), ("original model", original)):
        pool = sample_candidates(model, contexts, args.n, seed=args.seed + 1, max_tokens=task.max_tokens)
        results[name], picked, records = pick_accuracy(
            pool, contexts, references, selectors, grader, fields=task.fields
        )
        aurocs[name] = candidate_auroc(records, list(picked))
        compared[name] = head_to_head(picked, LEADER)
        with (args.out / f"candidates-{name.replace(' ', '-')}.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(record) + "\n" for record in records)
    grader.close()
    report = {
        "task": args.task,
        "seed": args.seed,
        "grpo_steps": None if args.policy else args.steps,
        "beta": None if args.policy else args.beta,
        "score_temperature": args.score_temperature,
        "prefixed_candidates": args.prefixed_candidates,
        "training_seconds": None if args.policy else round(trained_in),
        "held_out_prompts": len(task.test),
        "draws": args.draws,
        "n": args.n,
        "best_of_n_accuracy": results,
        "candidate_auroc": aurocs,
        "progress_advantage_head_to_head": compared,
    }
    (args.out / "results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    if not args.policy:
        print(f"GRPO: {args.steps} steps in {trained_in:.0f} s")
    print(
        f"best-of-{args.n} accuracy on {len(task.test)} held-out prompts x {args.draws} draws, "
        "by where the candidates come from:"
    )
    print(f"  {'selection':<36} " + " ".join(f"{name:>15}" for name in results))
    for method in next(iter(results.values())):
        print(f"  {method:<36} " + " ".join(f"{results[name][method]:>15.3f}" for name in results))
    print(f"AUROC of each value for a right candidate; {LEADER} against each, set by set:")
    for pool_name in results:
        print(f"  {pool_name}'s candidates:")
        for method, area in aurocs[pool_name].items():
            line = f"    {method:<36} AUROC " + ("-" if area is None else f"{area:.3f}")
            if method in compared[pool_name]:
                c = compared[pool_name][method]
                line += (
                    f"   only PA right {c['only_leader_right']:>3}, only it right "
                    f"{c['only_other_right']:>3} (McNemar p = {c['p_value']:.3g})"
                )
            print(line)


if __name__ == "__main__":
    main()
