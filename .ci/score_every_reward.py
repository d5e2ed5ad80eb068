"""Build every registered reward and score one sample with it, in the environment this runs in.

CI runs it in the virtual environment README command 1 makes (the ``instructions`` and ``judges``
extras only), where a dependency that only the ``test`` extra brings in would otherwise go
unnoticed: the tests install every extra, so they pass while a user's first run fails (this is how
a missing ``accelerate`` failed every judge row of the main job). A reward that scores with a
pipeline failure (``backend_error`` or ``error``) or cannot be built fails the run, naming it.

The rewards that need a trained model of a kind rewardlab does not ship (a process reward model,
an outcome reward model, a reward server) are built but not called: building them checks their
imports. A served reward model scores for real, over HTTP, against a scripted vLLM pooling server
on 127.0.0.1 (`rewardlab.testing.ScriptedPoolingServer`).

Usage: python .ci/score_every_reward.py
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from rewardlab import Sample
from rewardlab.rewards.registry import available, build
from rewardlab.testing import ScriptedPoolingServer

MATH = Sample(prompt="What is 2 + 3?", completion="2 + 3 = 5, so the answer is $\\boxed{5}$.", reference="5")
CHAT = Sample(prompt="Name a primary colour.", completion="Red is a primary colour.", reference="Red")
#: An agent trajectory: a tool call, its result, the final answer.
TRAJECTORY = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
    },
    {"role": "tool", "name": "add", "content": "5"},
    {"role": "assistant", "content": "The answer is $\\boxed{5}$."},
]

#: (config, sample to score, or None to build only) for every registered reward type.
CASES: dict[str, tuple[dict[str, Any], Sample | None]] = {
    "math_answer": ({}, MATH),
    "code_execution": (
        {},
        Sample(completion="```python\nprint(5)\n```", fields={"tests": [{"input": "", "output": "5"}]}),
    ),
    "string_match": ({}, CHAT),
    "regex_match": ({"pattern": r"\bRed\b"}, CHAT),
    "json_schema": ({"schema": {"type": "object"}}, Sample(completion='{"a": 1}')),
    "tool_call": (
        {},
        Sample(
            completion='<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            reference='[{"get_weather": {"city": ["Paris"]}}]',
        ),
    ),
    # BLEU and chrF need the `similarity` extra, which command 1 does not install.
    "text_similarity": ({"metric": "token_f1"}, CHAT),
    "instruction_following": (
        {},
        Sample(
            completion="red is a colour",
            fields={"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
        ),
    ),
    "think_answer_format": ({}, Sample(completion="<think>2 + 3 = 5</think><answer>5</answer>")),
    "length": ({"mode": "below_max", "max_length": 100, "unit": "words"}, MATH),
    "soft_overlong": ({"max_length": 100, "cache_length": 20, "unit": "words"}, MATH),
    "repetition_penalty": ({}, MATH),
    "combine": ({"components": {"accuracy": {"type": "math_answer"}}}, MATH),
    "route": (
        {"by": "task", "routes": {"math": {"type": "math_answer"}}},
        dataclasses.replace(MATH, fields={"task": "math"}),
    ),
    "ensemble": ({"members": {"exact": {"type": "string_match"}, "math": {"type": "math_answer"}}}, MATH),
    "length_controlled": ({"reward": {"type": "math_answer"}, "fit": "batch"}, MATH),
    "final_answer": ({"reward": {"type": "math_answer"}}, dataclasses.replace(MATH, completion=TRAJECTORY)),
    "per_turn": ({"reward": {"type": "regex_match", "pattern": "add"}}, Sample(completion=TRAJECTORY)),
    "environment_state": (
        {},
        Sample(fields={"environment_state": {"total": 5}, "expected_state": {"total": 5}}),
    ),
    "fallback": ({"rewards": [{"type": "math_answer"}, {"type": "pointwise_judge", "scale": [1, 5]}]}, MATH),
    "pointwise_judge": ({"scale": [1, 5]}, CHAT),
    "pairwise_judge": ({}, CHAT),
    "listwise_judge": ({}, CHAT),
    "reference_scaffolded_judge": ({}, CHAT),
    "rubric": ({"rubric": [{"text": "Names a primary colour", "category": "essential"}]}, CHAT),
    "self_proposed_rubric": ({}, CHAT),
    "step_judge": ({}, MATH),
    "turn_judge": ({}, Sample(prompt=MATH.prompt, completion=TRAJECTORY)),
    "vote": ({"judge": {"type": "pointwise_judge", "scale": [1, 5], "temperature": 0.7}, "n": 3}, CHAT),
    "implicit_prm": ({"policy": "embedded", "reference": "embedded"}, MATH),
    "progress_advantage": ({"policy": "embedded", "reference": "embedded"}, MATH),
    "monte_carlo_steps": ({"verifier": {"type": "math_answer"}, "n": 1}, MATH),
    "prm": ({"model": "/no/process-reward-model/here", "family": "qwen_prm"}, None),
    "reward_model": ({"model": "/no/reward-model/here"}, None),
    "dpo_implicit": ({"policy": "embedded", "reference": None}, MATH),
    "remote": ({"url": "http://127.0.0.1:9/"}, None),
    # Its url is the scripted pooling server's, started in main.
    "served_reward_model": ({"client": {"max_attempts": 2, "backoff_base_s": 0.1}}, CHAT),
}


def main() -> int:
    missing = sorted(set(available()) - set(CASES))
    problems = [f"{name}: no case here; add one" for name in missing]
    pooling = ScriptedPoolingServer("vllm")
    CASES["served_reward_model"][0]["url"] = pooling.start()
    try:
        check(problems)
    finally:
        pooling.stop()
    for problem in problems:
        print(f"score_every_reward: {problem}", file=sys.stderr)
    return 1 if problems else 0


def check(problems: list[str]) -> None:
    """Build and score every case, adding what fails to ``problems``."""
    for name, (options, sample) in CASES.items():
        try:
            reward = build({"type": name, **options})
        except Exception as error:  # noqa: BLE001 - each failure is reported by name
            problems.append(f"{name}: cannot be built: {type(error).__name__}: {error}")
            continue
        try:
            if sample is not None:
                [score] = reward.score([sample])
                if score.status in ("backend_error", "error"):
                    problems.append(f"{name}: {score.status}: {score.reason}")
                print(f"{name}: {score.status} {score.value}")
        finally:
            reward.close()


if __name__ == "__main__":
    sys.exit(main())
