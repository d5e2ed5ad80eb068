"""A learned reward model from preference pairs to a GRPO run, through one reward config:
train -> benchmark -> serve -> train a policy on it.

1. ``rewardlab train-rm --mode head`` fits a Bradley-Terry score head on the frozen backbone's
   last-token features of the ``--train`` pairs, reporting accuracy on the ``--dev`` pairs.
2. The output folder is the whole reward: ``OUT/reward.yaml`` is ``{type: reward_model, model:
   OUT/rm}``, nothing else. ``rewardlab bench rewardbench --config OUT/reward.yaml`` scores each
   dev answer on its own through it (RewardBench's rule: a pair is won when the chosen answer
   scores strictly higher).
3. A short TRL GRPO run (a tiny policy built from a config, on the CPU) takes the reward in
   process: ``as_reward_func(build("OUT/reward.yaml"))``.
4. The same run again, with the reward served by ``rewardlab serve --config OUT/reward.yaml`` on
   127.0.0.1 and reached through OpenRLHF's ``POST /get_reward`` wire. rewardlab's own client,
   `RemoteReward`, speaks ``/score``; `GetRewardFunc` below posts what OpenRLHF's client posts
   (``remote_rm_fn`` in ``openrlhf/utils/remote_rm_utils.py``, OpenRLHF commit 9b8641c:
   ``{"query": queries, "prompts": prompts, "labels": labels}``, reading ``"rewards"`` back),
   as a TRL reward function. Both runs start from the same seed and the same weights, so as long
   as the two routes return the same rewards they generate the same completions: the per-step
   rewards printed side by side should agree.

Backbones: ``tiny`` (the default; a two-layer Llama built from a config with a byte-level
tokenizer, so the loop runs in about a minute on a CPU - its features are random, so do not
expect its dev accuracy to beat chance) or ``smollm2``: the embedded SmolLM2-135M-Instruct, as
``rewardlab fetch-model`` stores it (``train-rm --model embedded`` reads the transformers
folder converted from that GGUF file into rewardlab's cache). The policy is always tiny: the
point is the wiring, not the policy.

The default pairs, ``examples/preferences_train.jsonl`` (48) and ``preferences_dev.jsonl`` (24),
are from Anthropic's HH-RLHF ``harmless-base`` test split (https://github.com/anthropics/hh-rlhf,
commit 354e5c3cb896, MIT licence; each row's ``source`` names its line): the pairs whose prompt
and longer answer come to at most 400 characters, leaving out those with profanity or slurs,
shuffled with seed 0. The conversation up to the last assistant turn is the prompt. The texts
are what the dataset holds: requests for harmful help, and answers that give it.

Run (``python examples/learned_rm_loop.py --help`` for the options):
    python examples/learned_rm_loop.py [--backbone smollm2] [--steps 4] [--out learned-rm-loop]

It prints each command's output, then a report: the dev accuracy that train-rm measured and the
one the benchmark measured through the config, and the GRPO reward at every step for both routes
(also in ``OUT/report.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent
#: The reward's name in TRL's logs (``rewards/reward_model/mean``) on both routes.
REWARD_NAME = "reward_model"


def byte_tokenizer() -> Any:
    """A byte-level tokenizer built in memory (nothing from the hub): every byte is one token,
    with a plain chat template so that ``reward_model`` renders conversations."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    return tokenizer


def tiny_llama(tokenizer: Any, *, seed: int) -> Any:
    """A randomly initialised two-layer Llama causal LM that reads 1024 bytes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def backbone(name: str, out: Path) -> str:
    """What ``train-rm --model`` gets: a saved tiny Llama's folder, or ``embedded``."""
    if name == "smollm2":
        return "embedded"
    folder = out / "backbone"
    tokenizer = byte_tokenizer()
    tiny_llama(tokenizer, seed=1).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def run_command(command: Sequence[str]) -> None:
    """Run a rewardlab command, its output passed through; a failure stops the script."""
    print(f"$ rewardlab {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, "-m", "rewardlab.cli", *command], check=True)


def train_reward_model(args: argparse.Namespace) -> dict[str, Any]:
    """``rewardlab train-rm --mode head`` into ``OUT/rm``; its ``metrics.json``."""
    rm = args.out / "rm"
    run_command(
        ["train-rm", str(args.train), "--dev", str(args.dev), "--output", str(rm), "--overwrite",
         "--model", backbone(args.backbone, args.out), "--mode", "head", "--epochs", str(args.epochs),
         "--feature-cache", str(args.out / "features")]
    )  # fmt: skip
    return dict(json.loads((rm / "metrics.json").read_text(encoding="utf-8")))


def benchmark(config: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``rewardlab bench rewardbench`` over the dev pairs through the config; its result."""
    output = args.out / "bench"
    run_command(
        ["bench", "rewardbench", "--config", str(config), "--data", str(args.dev), "--output",
         str(output), "--overwrite", "--no-progress"]
    )  # fmt: skip
    return dict(json.loads((output / "result.json").read_text(encoding="utf-8")))


class GetRewardFunc:
    """A TRL reward function that scores through a ``POST /get_reward`` server, sending what
    OpenRLHF's ``remote_rm_fn`` sends: ``query`` (each prompt followed by its completion),
    ``prompts`` and ``labels`` (None: a reward model needs no reference). Text prompts and
    completions only (TRL's standard format).

    OpenRLHF needs a number for every sample, so the server answers a sample it could not score
    with its failure value; rewardlab's server also says which ones (``statuses``, a key OpenRLHF
    ignores), and those become None here - what ``as_reward_func`` gives TRL for them - instead of
    a made-up reward."""

    def __init__(self, url: str, name: str = REWARD_NAME, timeout_s: float = 180.0):
        self.url = url.rstrip("/") + "/get_reward"
        self.__name__ = name
        self.timeout_s = timeout_s

    def __call__(self, prompts: list[str], completions: list[str], **kwargs: Any) -> list[float | None]:
        if not all(isinstance(text, str) for text in [*prompts, *completions]):
            raise TypeError(
                f"{self.__name__}: /get_reward takes text prompts and completions, not chat messages"
            )
        body = {
            "query": [prompt + completion for prompt, completion in zip(prompts, completions, strict=True)],
            "prompts": prompts,
            "labels": None,
        }
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
            answer = json.load(reply)
        return [
            float(value) if status == "ok" else None
            for value, status in zip(answer["rewards"], answer["statuses"], strict=True)
        ]


@contextlib.contextmanager
def reward_server(config: Path, start_timeout_s: float = 300.0) -> Iterator[str]:
    """``rewardlab serve --config CONFIG`` on a free port of 127.0.0.1 while the block runs;
    yields its address once it is ready (the model loaded, a probe sample scored)."""
    command = [sys.executable, "-m", "rewardlab.cli", "serve", "--config", str(config)]
    command += ["--host", "127.0.0.1", "--port", "0"]
    # stderr to a file: a pipe nobody reads could fill up and block the server.
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            url = _announced_url(process, errors, start_timeout_s)
            _wait_ready(url, start_timeout_s)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _announced_url(process: subprocess.Popen, errors: Any, timeout_s: float) -> str:
    """The address in ``rewardlab serve: serving 'NAME' at URL (...)``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 1.0)[0]:
            line = process.stdout.readline()
            if " at http" in line:
                return line.split(" at ", 1)[1].split()[0]
    errors.seek(0)
    raise RuntimeError(f"rewardlab serve did not start: {errors.read()[-2000:]}")


def _wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # Refused while it starts, 503 while it warms up: both are OSErrors.
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/ready", timeout=5) as reply:
            if reply.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} was not ready within {timeout_s:.0f} s")


def grpo_rewards(reward_func: Any, prompts: list[str], args: argparse.Namespace, route: str) -> list[float]:
    """A short GRPO run of a fresh tiny policy (same seed every call) on ``reward_func``; the
    mean reward TRL logged at each step."""
    import trl
    from datasets import Dataset
    from transformers import ProgressCallback

    tokenizer = byte_tokenizer()
    config = trl.GRPOConfig(
        output_dir=str(args.out / f"grpo-{route}"), use_cpu=True, bf16=False, gradient_checkpointing=False,
        per_device_train_batch_size=4, num_generations=4, max_completion_length=args.max_completion_length,
        max_steps=args.steps, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
        seed=0,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=tiny_llama(tokenizer, seed=0),
        processing_class=tokenizer,
        reward_funcs=[reward_func],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
    )
    # TRL's per-step log lines are long; the report prints the figure this loop is about.
    trainer.remove_callback(ProgressCallback)
    trainer.train()
    key = f"rewards/{REWARD_NAME}/mean"
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def dev_prompts(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as rows:
        return [json.loads(line)["prompt"] for line in rows if line.strip()]


def report(metrics: dict[str, Any], bench: dict[str, Any], routes: dict[str, list[float]]) -> None:
    from rewardlab.reward_models.pair_accuracy import describe

    before, after = metrics["initial"]["dev"], metrics["final"]["dev"]
    print()
    print(f"dev accuracy, train-rm (head on cached features): {describe(before)} -> {describe(after)}")
    for subset, figures in bench["subsets"].items():
        print(
            f"dev accuracy, rewardlab bench through reward.yaml: {figures['accuracy']:.3f} "
            f"({subset}, {figures['items']:.0f} pairs, {bench['failed']} answers not scored)"
        )
    steps = max(len(rewards) for rewards in routes.values())
    print(f"{'GRPO reward per step':<32}" + "".join(f"{'step ' + str(n + 1):>10}" for n in range(steps)))
    for route, rewards in routes.items():
        print(f"{route:<32}" + "".join(f"{value:>10.4f}" for value in rewards))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backbone", choices=("tiny", "smollm2"), default="tiny", help="default: tiny")
    parser.add_argument("--train", type=Path, default=EXAMPLES / "preferences_train.jsonl")
    parser.add_argument("--dev", type=Path, default=EXAMPLES / "preferences_dev.jsonl")
    parser.add_argument("--epochs", type=int, default=20, help="train-rm epochs (default: 20)")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps per route (default: 4)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="policy tokens (default: 16)")
    parser.add_argument("--out", type=Path, default=Path("learned-rm-loop"))
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    # Every model load draws a progress bar (here and in the commands, which inherit this); for
    # models this small they are noise around the figures.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    started = time.perf_counter()

    metrics = train_reward_model(args)
    config = args.out / "reward.yaml"
    config.write_text(f"type: reward_model\nmodel: {json.dumps(str(args.out / 'rm'))}\n", encoding="utf-8")
    print(f"reward config {config}:\n{config.read_text(encoding='utf-8')}")
    bench = benchmark(config, args)

    from rewardlab import build
    from rewardlab.integrations.trl import as_reward_func

    prompts = dev_prompts(args.dev)
    reward = build(config)
    try:
        in_process = grpo_rewards(as_reward_func(reward), prompts, args, "in-process")
    finally:
        reward.close()
    with reward_server(config) as url:
        print(f"rewardlab serve: {url}")
        served = grpo_rewards(GetRewardFunc(url), prompts, args, "served")

    routes = {"in process (as_reward_func)": in_process, "served (POST /get_reward)": served}
    report(metrics, bench, routes)
    wall_s = time.perf_counter() - started
    print(f"wall time: {wall_s:.0f} s")
    summary = {
        "command": sys.argv,
        "backbone": args.backbone,
        "dev_accuracy": {"train_rm": metrics["final"]["dev"], "bench": bench["subsets"]},
        "grpo_reward_per_step": {"in_process": in_process, "served_get_reward": served},
        "wall_s": round(wall_s, 1),
    }
    (args.out / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"report: {args.out / 'report.json'}")


if __name__ == "__main__":
    main()
