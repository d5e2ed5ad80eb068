"""GRPO end to end with a composite rewardlab reward: a rule verifier, a format gate, a rubric
judge and a process judge, every component logged.

The policy (SmolLM2-135M-Instruct, the embedded model, by default) solves generated arithmetic
chains (``Start with 14. Add 10, then multiply by 5. What is the result?``), asked to write one
calculation per line and end with ``The answer is N.``. One TRL reward function, ``composite``,
scores each completion with a `Combine` of:

- ``answer``: ``math_answer`` against the known result, counted only when the format gate
  (``regex_match``: a calculation line, and the answer line last) passes; the gate's own value is
  logged as ``answer/gate/format``;
- ``rubric``: a ``rubric`` judge, two signed criteria asked one by one;
- ``steps``: a ``step_judge``, a generative process reward: each line (at most 3 steps, the
  shortest neighbours merged) is judged correct or incorrect given the lines before it; the
  share judged correct (``mean``, a denser shaping term than ``min``, the weakest step).

Both judges call a model server over the OpenAI API: by default the script starts
``rewardlab serve-model`` (the embedded SmolLM2 on 127.0.0.1, a free port) and stops it at the
end. That judge is a fixed copy of the untuned model in another process - an external verifier
that does not move with the policy. The process term is a judge rather than ``implicit_prm`` or
``progress_advantage`` because those need a policy/reference pair: with the policy being trained
here, a fixed pair would only be another external verifier, and the tuned policy's own log-ratio
is PRIME's online setting, which needs the reward to follow the trainer's weights. A 135M judge
is weak: its verdicts show the machinery working, not grades to train on. Measured here, it
calls every step "incorrect", correct ones included (all 15 steps of 6 generated solutions, 6
of those steps correct), so on the embedded judge the ``steps`` term is a constant 0 - no signal within a
group; it becomes one with a real judge (``--judge-url``). The untuned 135M policy also rarely
keeps the format, so ``answer`` is mostly gated to 0 in a few steps.

TRL logs ``rewards/composite/mean`` and the TRL adapter logs every breakdown entry through TRL's
``log_metric`` hook: ``composite/answer``, ``composite/answer/accuracy``,
``composite/answer/gate/format``, ``composite/rubric`` and ``composite/rubric/<criterion>``,
``composite/steps`` and ``composite/failed_frac``. The script prints them per logging step,
with the completion length, the step time, and the reward's own time and judge calls (cached
ones counted apart), and writes them to ``OUT/metrics.json``.

Run (CPU: 4 steps took 8.5 minutes on 2 cores shared with other jobs; of the 483 s of steps,
82 s were the reward, the rest generation and the update):
    python examples/grpo_composite.py [--steps 4] [--out grpo-composite]

On a GPU with a vLLM judge (``vllm serve JUDGE --port 8000`` on another device, or this one
with ``--gpu-memory-utilization`` leaving room for training):
    python examples/grpo_composite.py --device cuda --use-vllm --policy ./my-policy \\
        --judge-url http://HOST:8000/v1 --judge-model JUDGE [--judge-guided-choice] \\
        --batch-size 64 --num-generations 8 --max-completion-length 256 --steps 200

``--judge-url`` skips serve-model. ``--judge-guided-choice`` constrains the judges' answers to
the valid labels (vLLM's ``structured_outputs: {"choice": [...]}``, vLLM >= 0.10.2), so they
answer with the verdict alone; without it they reason and end with a JSON verdict (longer
answers; ``--judge-max-tokens`` bounds them). What changes in
`trl.GRPOConfig` on a GPU: ``use_cpu=False``; ``bf16=True`` (GRPOConfig's default, turned off
on the CPU here); with ``--use-vllm``, ``use_vllm=True`` and ``vllm_mode="colocate"`` (vLLM
generates inside the trainer process on the training GPU, sharing it by
``vllm_gpu_memory_utilization``; ``vllm_mode="server"`` with ``vllm_server_base_url`` uses a
separate ``trl vllm-serve`` instead). ``--device cuda`` also puts a started serve-model on the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rewardlab import build
from rewardlab.benchmarks.arithmetic import arithmetic_solutions
from rewardlab.integrations.trl import as_reward_func
from rewardlab.prm.models import EMBEDDED, model_folder
from rewardlab.rewards.contract import Reward, Sample, Score

PROMPT = (
    "{problem} Write one calculation per line, like `7 + 5 = 12`, then end with a line `The answer is N.`"
)
#: A calculation line somewhere, and the answer line last.
FORMAT = r"^\s*-?\d+ [-+*] \d+ = -?\d+\s*$[\s\S]*^\s*The answer is -?\d+\.?\s*\Z"
RUBRIC = [
    {"id": "shows_work", "text": "Writes out each calculation on its own line", "weight": 1.0},
    {"id": "off_topic", "text": "Includes text unrelated to solving the problem", "weight": -1.0},
]
REWARD_NAME = "composite"


def problems(count: int, seed: int) -> list[dict[str, Any]]:
    """Conversational GRPO rows: one or two operations each, with the answer as the reference."""
    return [
        {"prompt": [{"role": "user", "content": PROMPT.format(problem=s.problem)}], "answer": str(s.answer)}
        for s in arithmetic_solutions(count, seed=seed, error_rate=0.0, operations=(1, 2))
    ]


def composite_config(judge_backend: dict[str, Any], judge_max_tokens: int | None) -> dict[str, Any]:
    """The reward as a config; ``judge_backend`` is where both judges send their calls."""
    judge = {
        "backend": judge_backend,
        # Bounded: few calls in flight for a CPU server, a deadline per call, answers cached.
        "client": {"max_concurrency": 4, "deadline_s": 120, "cache": "default"},
        "max_tokens": judge_max_tokens,
    }
    return {
        "type": "combine",
        "name": REWARD_NAME,
        "components": {
            "answer": {
                "type": "combine",
                "weight": 1.0,
                "components": {"accuracy": {"type": "math_answer"}},
                "gate": {"type": "regex_match", "name": "format", "pattern": FORMAT, "flags": ["MULTILINE"]},
            },
            "rubric": {"type": "rubric", "weight": 0.2, "rubric": RUBRIC, **judge},
            "steps": {
                "type": "step_judge",
                "weight": 0.2,
                "steps": {"split": "lines", "max_steps": 3},
                "aggregate": "mean",
                **judge,
            },
        },
    }


class Timed(Reward):
    """``reward``, with each batch's scoring time and judge calls kept in ``batches`` (TRL's logs
    have neither)."""

    def __init__(self, reward: Reward):
        self.reward = reward
        self.name = reward.name
        self.io_bound = reward.io_bound
        self.batches: list[dict[str, float]] = []

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        started = time.perf_counter()
        scores = await self.reward.ascore(samples)
        usage = [score.usage for score in scores if score.usage is not None]
        self.batches.append(
            {
                "reward_time_s": time.perf_counter() - started,
                "judge_calls": sum(u.calls for u in usage),
                "judge_cached_calls": sum(u.cached_calls for u in usage),
            }
        )
        return scores

    def close(self) -> None:
        self.reward.close()


@contextlib.contextmanager
def model_server(device: str, start_timeout_s: float = 300.0) -> Iterator[str]:
    """``rewardlab serve-model`` (the embedded model) on a free port of 127.0.0.1, for as long as
    the block runs; yields its ``/v1`` address."""
    command = [sys.executable, "-m", "rewardlab.cli", "serve-model", "--port", "0", "--name", "smollm2"]
    command += ["--device", device]
    # stderr to a file: a pipe nobody reads could fill up and block the server.
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            yield _announced_url(process, errors, start_timeout_s)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _announced_url(process: subprocess.Popen, errors: Any, timeout_s: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if ready:
            line = process.stdout.readline()
            if " at http" in line:
                return line.rsplit(" at ", 1)[1].strip()
    errors.seek(0)
    raise RuntimeError(f"serve-model did not start within {timeout_s:.0f} s: {errors.read()[-2000:]}")


def grpo_config(args: argparse.Namespace) -> Any:
    import trl

    on_gpu = args.device == "cuda"
    vllm = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3}
    return trl.GRPOConfig(
        output_dir=str(args.out / "grpo"),
        use_cpu=not on_gpu,
        bf16=on_gpu,
        gradient_checkpointing=False,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps,
        learning_rate=1e-5,
        beta=0.0,
        temperature=0.7,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
        **(vllm if args.use_vllm else {}),
    )


def logged_metrics(log_history: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per logging step: the reward, each component, the completion length and the step time."""
    rows = []
    for entry in log_history:
        if "reward" not in entry:
            continue
        row = {"step": entry["step"], "reward": entry["reward"], "reward_std": entry["reward_std"]}
        row.update({key: value for key, value in entry.items() if key.startswith(f"{REWARD_NAME}/")})
        row["completions/mean_length"] = entry["completions/mean_length"]
        row["step_time"] = entry["step_time"]
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, float]]) -> None:
    """One line per metric, one column per logging step (component names are long)."""
    names = list(dict.fromkeys(key for row in rows for key in row if key != "step"))
    print(f"{'metric':<36}" + "".join(f"{'step ' + str(row['step']):>10}" for row in rows))
    for name in names:
        cells = (f"{row[name]:>10.3f}" if name in row else f"{'-':>10}" for row in rows)
        print(f"{name:<36}" + "".join(cells))


def train(args: argparse.Namespace, judge_backend: dict[str, Any]) -> list[dict[str, float]]:
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reward = Timed(build(composite_config(judge_backend, args.judge_max_tokens)))
    policy = args.policy or model_folder(EMBEDDED)
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(policy),
        processing_class=AutoTokenizer.from_pretrained(policy),
        reward_funcs=[as_reward_func(reward)],
        args=grpo_config(args),
        train_dataset=Dataset.from_list(problems(64, seed=0)),
    )
    try:
        trainer.train()
    finally:
        reward.close()
    # One generation batch per step and a log every step: the reward ran once per logged step.
    rows = logged_metrics(trainer.state.log_history)
    return [{**row, **batch} for row, batch in zip(rows, reward.batches, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4, help="completions per step (default 4)")
    parser.add_argument("--num-generations", type=int, default=4, help="must divide the batch size")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--policy", type=Path, help="policy model folder (default: the embedded SmolLM2)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM, colocated (GPU only)")
    parser.add_argument("--judge-url", help="an OpenAI-compatible /v1 address; skips starting serve-model")
    parser.add_argument("--judge-model", help="the model name the judge server knows (with --judge-url)")
    parser.add_argument(
        "--judge-guided-choice",
        action="store_true",
        help="the --judge-url server takes choices (vLLM >= 0.10.2); always on for serve-model",
    )
    parser.add_argument("--judge-max-tokens", type=int, help="most tokens per judge answer (judges' default)")
    parser.add_argument("--out", type=Path, default=Path("grpo-composite"))
    args = parser.parse_args()
    if args.batch_size % args.num_generations:
        parser.error("--batch-size must be a multiple of --num-generations")
    if args.use_vllm and args.device != "cuda":
        parser.error("--use-vllm needs --device cuda")
    if bool(args.judge_url) != bool(args.judge_model):
        parser.error("--judge-url and --judge-model go together")

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.judge_url:
            backend = {
                "type": "http",
                "base_url": args.judge_url,
                "model": args.judge_model,
                "guided_choice": args.judge_guided_choice,
            }
        else:
            url = stack.enter_context(model_server(args.device))
            print(f"judge: rewardlab serve-model at {url} ({time.perf_counter() - started:.0f} s to start)")
            backend = {"type": "http", "base_url": url, "model": "smollm2", "guided_choice": True}
        rows = train(args, backend)
    wall_s = time.perf_counter() - started

    print_table(rows)
    print(f"wall time: {wall_s:.0f} s for {args.steps} steps (judge server start included)")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {
        "command": sys.argv,
        "wall_s": round(wall_s, 1),
        "judge": {key: value for key, value in backend.items() if key != "type"},
        "steps": rows,
    }
    (args.out / "metrics.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"metrics: {args.out / 'metrics.json'}")


if __name__ == "__main__":
    main()
