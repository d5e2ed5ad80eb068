"""Implicit step rewards for best-of-N: throughput against a naive loop, and peak memory on a
16k-token trajectory.

Throughput: best-of-8 - each question's 8 real Qwen2.5-Math solutions scored as completions
of its prompt by progress advantage, with two SmolLM2-135M instances (the embedded model;
policy and reference - the same weights, which changes nothing about the cost). The baseline,
in the same process, is the naive loop: for each sample, each model runs a full forward pass
over prompt + completion and the log-softmax of every position is taken. rewardlab runs each
prompt once per model and continues every completion from its key-value cache; prompts scored
together share their opening too (the few-shot examples run once for all the questions; "each
alone" scores one question's 8 completions per call, the strict best-of-N case). On a CPU it
scores one completion at a time (its default there: batching gains nothing on a CPU, and
padding costs as much as real tokens), in token order, so that solutions which open alike run
their shared opening once. Two prompt kinds: few-shot (a long shared prefix, the usual
best-of-N setting) and the bare question (where there is little to share).

Beside each speed-up, two bounds, counted by hooks on the model: the tokens run through its body
(naive loop / rewardlab), and the multiply-adds (the body's projections per token, attention per
query-key pair, the output head per position it runs on). On a CPU, where batching gains
nothing, the work bound is the most that skipping work can give.

Memory: one 16,384-token completion through a model with SmolLM2's vocabulary (49,152), in a
fresh process each: the naive full forward pass, and rewardlab's chunked one. Peak resident
memory is printed for both.

Run:  python perf/implicit_throughput.py [--questions 2] [--repeats 2] [--skip-memory]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).parent / "data" / "qwen25-math-cot-100x8.jsonl.gz"


def load_rows() -> list[dict]:
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def best_of_n_sets(questions: int, few_shot: bool) -> list[tuple[str, list[str]]]:
    """``questions`` prompts, each with its 8 real solutions: few-shot (three solved problems
    from later rows before the question) or the bare question."""
    rows = load_rows()
    shots = "".join(
        f"Problem: {row['question']}\nSolution: {row['responses'][0]}\n\n"
        for row in rows[questions : questions + 3]
    )
    return [
        ((shots if few_shot else "") + f"Problem: {row['question']}\nSolution: ", row["responses"])
        for row in rows[:questions]
    ]


def naive(models, sets: list[tuple[str, list[str]]]) -> None:
    import torch

    tokenizer = models[0].tokenizer
    with torch.inference_mode():
        for prompt, completions in sets:
            prompt_ids = tokenizer(prompt)["input_ids"]
            for completion in completions:
                ids = prompt_ids + tokenizer(completion, add_special_tokens=False)["input_ids"]
                batch = torch.tensor([ids])
                for loaded in models:
                    logprobs = torch.log_softmax(loaded.model(batch).logits[0].float(), dim=-1)
                    targets = torch.tensor(ids[len(prompt_ids) :])
                    logprobs[len(prompt_ids) - 1 : -1].gather(-1, targets.unsqueeze(-1))


def rewardlab_scoring(reward, sets: list[tuple[str, list[str]]], together: bool = True) -> None:
    """All prompts' completions in one call (prompts that open alike share their opening), or
    one call per prompt (each prompt's N completions alone)."""
    from rewardlab import Sample

    calls = [sets] if together else [[one] for one in sets]
    for call in calls:
        samples = [Sample(prompt=prompt, completion=c) for prompt, completions in call for c in completions]
        scores = reward.score(samples)
        assert all(score.ok for score in scores), scores[0].reason


def best_time(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def throughput(questions: int, repeats: int) -> None:
    from transformers import AutoModelForCausalLM

    from rewardlab.prm.implicit import ProgressAdvantageReward
    from rewardlab.prm.models import EMBEDDED, LoadedModel, load_model

    policy = load_model(EMBEDDED)
    folder = Path(policy.model.name_or_path)
    reference = LoadedModel(
        AutoModelForCausalLM.from_pretrained(folder).eval(), policy.tokenizer, "reference"
    )
    reward = ProgressAdvantageReward(policy=policy, reference=reference)
    tokenizer = policy.tokenizer
    print(f"best-of-8 for {questions} questions, two SmolLM2-135M models, CPU")
    print(
        f"{'prompts':<32} {'naive tok/s':>12} {'rewardlab tok/s':>16} {'speed-up':>9} "
        f"{'token bound':>12} {'work bound':>11}"
    )
    for label, few_shot in (("few-shot", True), ("question only", False)):
        sets = best_of_n_sets(questions, few_shot)
        prompt_lengths = [len(tokenizer(prompt)["input_ids"]) for prompt, _ in sets]
        tokens = sum(len(tokenizer(c, add_special_tokens=False)["input_ids"]) for _, cs in sets for c in cs)
        rewardlab_scoring(reward, [(sets[0][0], sets[0][1][:2])])  # warm up
        naive_work = work_done(policy.model, lambda sets=sets: naive((policy,), sets))
        slow = best_time(lambda sets=sets: naive((policy, reference), sets), repeats)
        ways = [("", True)] + ([(", each alone", False)] if few_shot else [])
        for way, together in ways:  # alone: the few-shot examples are not shared across prompts
            work = work_done(policy.model, lambda sets=sets, t=together: rewardlab_scoring(reward, sets, t))
            fast = best_time(lambda sets=sets, t=together: rewardlab_scoring(reward, sets, t), repeats)
            name = f"{label} (~{sum(prompt_lengths) // len(sets)} tok){way}"
            print(
                f"{name:<32} {tokens / slow:>12.0f} {tokens / fast:>16.0f} {slow / fast:>8.2f}x "
                f"{naive_work.tokens / work.tokens:>11.2f}x {naive_work.macs / work.macs:>10.2f}x"
                f"   ({tokens} completion tokens)"
            )
    print(
        "token bound: tokens through each model's body, naive loop / rewardlab; work bound: the "
        "same for multiply-adds\n(the body's projections per token, attention per query-key pair, "
        "the output head per position it runs on),\nall counted by hooks on the model"
    )


@dataclass
class Work:
    """What forward passes did: tokens through the body, and multiply-adds in all."""

    tokens: int = 0
    macs: int = 0


def work_done(model, run) -> Work:
    """The `Work` that ``run`` makes ``model`` (a Llama-style causal LM) do: per body call, its
    tokens times the projections' weights, plus every (query, key) pair attended - each new
    token sees the cache and the new tokens before it - times the attention's multiply-adds per
    pair; per head call, its positions times the head's weights."""
    from torch import nn

    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = sum(
        module.weight.numel() for module in model.model.layers.modules() if isinstance(module, nn.Linear)
    )
    per_pair = config.num_hidden_layers * 2 * config.num_attention_heads * head_dim  # scores, then values
    work = Work()

    def body(module, args, kwargs):
        batch, new = kwargs["input_ids"].shape
        cache = kwargs.get("past_key_values")
        seen = cache.get_seq_length() if cache is not None else 0
        work.tokens += batch * new
        work.macs += batch * (new * per_token + (new * seen + new * (new + 1) // 2) * per_pair)

    def head(module, args):
        work.macs += args[0].shape[:-1].numel() * module.weight.numel()

    hooks = [
        model.model.register_forward_pre_hook(body, with_kwargs=True),
        model.get_output_embeddings().register_forward_pre_hook(head),
    ]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return work


MEMORY_PROBE = """
import resource, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from rewardlab.prm.logprobs import TokenLogprobScorer
torch.manual_seed(0)
config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=20000)
model = LlamaForCausalLM(config).eval()
ids = torch.randint(0, 49152, (16384 + 16,)).tolist()
with torch.inference_mode():
    model(torch.tensor([ids[:64]]))  # every lazy allocation of a forward pass made
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.inference_mode():
    if sys.argv[1] == "naive":
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
        logprobs[15:-1].gather(-1, torch.tensor(ids[16:]).unsqueeze(-1))
    else:
        TokenLogprobScorer(model).completion_logprobs(ids[:16], [ids[16:]])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base / 1024, peak / 1024)
"""


def memory() -> None:
    print("one 16,384-token completion, vocabulary 49,152 (peak resident memory, fresh process each):")
    for mode in ("naive", "chunked"):
        out = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, mode], capture_output=True, text=True, check=True
        ).stdout
        base, peak = map(float, out.strip().splitlines()[-1].split())
        print(f"  {mode:<8} peak {peak:>7.0f} MB, {peak - base:>6.0f} MB above the loaded model")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    if not args.skip_memory:
        memory()  # first: a child process inherits this one's peak memory as its own
    throughput(args.questions, args.repeats)


if __name__ == "__main__":
    main()
