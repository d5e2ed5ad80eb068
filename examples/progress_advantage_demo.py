"""Progress advantage for best-of-N: RL-tune SmolLM2-135M, then let the log-ratio between the
tuned policy and the original pick among candidates.

1. A short GRPO run (TRL, on the CPU) tunes SmolLM2-135M-Instruct (the embedded model),
   rewarded by rewardlab's ``math_answer`` through the TRL adapter, on one of two tasks:
   - ``addition``: single-digit addition answered in one line; a third of the 81 digit pairs
     (27) are held out of training;
   - ``chain``: three single-digit numbers added in two worked lines (``3 + 4 = 7``,
     ``7 + 2 = 9``), then ``The answer is 9.`` - several steps, where progress can be measured
     step by step; rewarded by ``math_answer`` plus a small format term; 360 triples to train
     on, 60 others held out.
2. For each held-out prompt, the tuned policy samples N candidates; ``math_answer`` grades them.
3. The original model samples N candidates for the same prompts: a second pool, where the
   tuned policy is a verifier for another model's answers (PRIME's use of the implicit PRM).
4. In each pool, a candidate is picked by:
   - progress advantage (``progress_advantage``: log pi_RL - log pi_ref, token log-probs
     summed per step, steps folded by ``sum`` / ``mean`` / ``min``);
   - mean token log-probability, under the tuned policy and under the original model (the
     likelihood baselines);
   - random choice (its exact expectation: the mean correctness of the N candidates).
   The oracle (any candidate correct, pass@N) bounds them all.

Run:  python examples/progress_advantage_demo.py [--task addition|chain] [--steps 60] [--n 8]
                                                [--out pa-demo] [--policy DIR]
(addition: about 15 minutes on 2 CPU cores, chain: about 40; results in OUT/results.json)
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab import Sample, build
from rewardlab.prm.applications import best_of_n
from rewardlab.prm.logprobs import TokenLogprobScorer
from rewardlab.prm.models import EMBEDDED, LoadedModel, load_model, model_folder
from rewardlab.rewards.contract import Score
from rewardlab.rewards.trl_adapter import as_reward_func

ADDITION = "What is {a} + {b}? Answer with only the number."
CHAIN = (
    "What is {a} + {b} + {c}? First add {a} and {b}, then add {c}. Write each addition on its own "
    "line, then end with 'The answer is N.'"
)
#: The chain task's shaping: a little reward for two worked additions and an answer line, so that
#: GRPO has a signal while the answers are still mostly wrong (the original model gets about 1%).
CHAIN_FORMAT = r"\d+ \+ \d+ = \d+\s*\n\s*\d+ \+ \d+ = \d+[\s\S]*The answer is -?\d+"


@dataclass(frozen=True)
class Task:
    """Prompts with their answers, split into training and held-out, and how long answers get."""

    train: list[tuple[str, str]]
    test: list[tuple[str, str]]
    max_tokens: int
    steps: str
    reward: dict[str, Any]


def addition_task(seed: int) -> Task:
    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
    random.Random(seed).shuffle(pairs)
    rows = [(ADDITION.format(a=a, b=b), str(a + b)) for a, b in pairs]
    return Task(rows[27:], rows[:27], max_tokens=24, steps="lines", reward={"type": "math_answer"})


def chain_task(seed: int) -> Task:
    triples = [(a, b, c) for a in range(1, 10) for b in range(1, 10) for c in range(1, 10)]
    random.Random(seed).shuffle(triples)
    rows = [(CHAIN.format(a=a, b=b, c=c), str(a + b + c)) for a, b, c in triples[:420]]
    reward = {
        "type": "combine",
        "components": {
            "accuracy": {"type": "math_answer", "weight": 1.0},
            "format": {"type": "regex_match", "pattern": CHAIN_FORMAT, "weight": 0.25},
        },
    }
    return Task(rows[60:], rows[:60], max_tokens=48, steps="lines", reward=reward)


TASKS = {"addition": addition_task, "chain": chain_task}


def train_policy(task: Task, steps: int, out: Path) -> Path:
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_folder(EMBEDDED)
    rows = [
        {"prompt": [{"role": "user", "content": prompt}], "answer": answer} for prompt, answer in task.train
    ]
    config = trl.GRPOConfig(
        output_dir=str(out / "grpo"),
        use_cpu=True,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=task.max_tokens,
        gradient_checkpointing=False,
        max_steps=steps,
        learning_rate=3e-5,
        beta=0.0,
        temperature=0.7,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    reward = build(task.reward)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(folder),
        processing_class=AutoTokenizer.from_pretrained(folder),
        reward_funcs=[as_reward_func(reward)],
        args=config,
        train_dataset=Dataset.from_list(rows).shuffle(seed=0),
    )
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"  step {entry['step']:>3}: mean reward {entry['reward']:.3f}")
    trainer.save_model(str(out / "policy"))
    trainer.processing_class.save_pretrained(str(out / "policy"))
    reward.close()
    return out / "policy"


def sample_candidates(
    loaded: LoadedModel, prompts: list[str], n: int, seed: int, max_tokens: int
) -> list[list[str]]:
    import torch

    tokenizer = loaded.tokenizer
    candidates = []
    for index, prompt in enumerate(prompts):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        torch.manual_seed(seed + index)
        with torch.inference_mode():
            out = loaded.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=0.7,
                max_new_tokens=max_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.eos_token_id,
            )
        candidates.append(tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True))
    return candidates


def mean_logprobs(
    scorer: TokenLogprobScorer, tokenizer: Any, prompt: str, completions: list[str]
) -> list[Score]:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )
    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in completions]
    values = scorer.completion_logprobs(prompt_ids, ids)
    return [Score(value=sum(v) / len(v)) if v else Score(value=float("-inf")) for v in values]


def pick_accuracy(
    pool: list[list[str]], prompts: list[str], references: list[str], selectors: dict, grader: Any
) -> dict[str, float]:
    """Best-of-N accuracy of each selector over one pool of candidates, with random choice
    (its exact expectation) and the oracle."""
    picked: dict[str, list[bool]] = {name: [] for name in selectors}
    random_choice, oracle = [], []
    for prompt, reference, candidates in zip(prompts, references, pool, strict=True):
        chat = [{"role": "user", "content": prompt}]
        samples = [Sample(prompt=chat, completion=c, reference=reference) for c in candidates]
        correct = [s.ok and s.value == 1.0 for s in grader.score(samples)]
        random_choice.append(sum(correct) / len(correct))
        oracle.append(any(correct))
        for name, select in selectors.items():
            choice = best_of_n(select(prompt, samples))
            picked[name].append(choice is not None and correct[choice])
    accuracy = {name: sum(hits) / len(hits) for name, hits in picked.items()}
    accuracy["random choice (expected)"] = sum(random_choice) / len(random_choice)
    accuracy["oracle (pass@N)"] = sum(oracle) / len(oracle)
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=sorted(TASKS), default="addition")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("pa-demo"))
    parser.add_argument("--policy", type=Path, help="a tuned policy from an earlier run (skips GRPO)")
    args = parser.parse_args()
    task = TASKS[args.task](0)

    started = time.perf_counter()
    policy_folder = args.policy or train_policy(task, args.steps, args.out)
    trained_in = time.perf_counter() - started

    policy, base = load_model(policy_folder), load_model(EMBEDDED)
    prompts = [prompt for prompt, _ in task.test]
    references = [answer for _, answer in task.test]
    grader = build({"type": "math_answer"})
    likelihood = TokenLogprobScorer(policy.model)
    selectors: dict[str, Any] = {}
    for fold in ("sum", "mean", "min"):
        reward = build(
            {
                "type": "progress_advantage",
                "policy": str(policy_folder),
                "reference": EMBEDDED,
                "aggregate": fold,
                "how": task.steps,
            }
        )
        selectors[f"progress advantage ({fold})"] = lambda prompt, samples, reward=reward: reward.score(
            samples
        )
    original_likelihood = TokenLogprobScorer(base.model)
    selectors["tuned policy mean token log-prob"] = lambda prompt, samples: mean_logprobs(
        likelihood, policy.tokenizer, prompt, [s.completion for s in samples]
    )
    selectors["original model mean token log-prob"] = lambda prompt, samples: mean_logprobs(
        original_likelihood, base.tokenizer, prompt, [s.completion for s in samples]
    )
    pools = {
        "tuned policy": sample_candidates(policy, prompts, args.n, seed=1, max_tokens=task.max_tokens),
        "original model": sample_candidates(base, prompts, args.n, seed=1, max_tokens=task.max_tokens),
    }
    results = {
        name: pick_accuracy(pool, prompts, references, selectors, grader) for name, pool in pools.items()
    }
    grader.close()
    report = {
        "task": args.task,
        "grpo_steps": None if args.policy else args.steps,
        "training_seconds": None if args.policy else round(trained_in),
        "held_out_prompts": len(prompts),
        "n": args.n,
        "best_of_n_accuracy": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    if not args.policy:
        print(f"GRPO: {args.steps} steps in {trained_in:.0f} s")
    print(f"best-of-{args.n} accuracy on {len(prompts)} held-out prompts, by where the candidates come from:")
    print(f"  {'selection':<34} " + " ".join(f"{name:>15}" for name in pools))
    for method in next(iter(results.values())):
        print(f"  {method:<34} " + " ".join(f"{results[name][method]:>15.3f}" for name in pools))


if __name__ == "__main__":
    main()
