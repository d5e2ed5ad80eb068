"""CodeExecutionReward end to end in the real bwrap sandbox."""

import pytest

from rewardlab import Sample, Status, build
from rewardlab.errors import SandboxUnavailable
from rewardlab.rewards.code.reward import CodeExecutionReward
from rewardlab.rewards.code.sandbox import Sandbox


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def reward():
    reward = CodeExecutionReward(test_timeout_s=1.5, total_timeout_s=10.0)
    yield reward
    reward.close()


ADD_TESTS = {
    "tests": [
        {"input": [1, 2], "output": 3},
        {"input": [-1, 1], "output": 0},
        {"input": [2, 2], "output": 4},
    ],
    "fn_name": "add",
}


def test_fraction_of_call_tests_with_per_test_details(reward):
    wrong_on_negatives = "def add(a, b):\n    return abs(a) + abs(b)"
    [right, partial] = reward.score(
        [Sample(completion=fenced("def add(a, b):\n    return a + b"), fields=ADD_TESTS),
         Sample(completion=fenced(wrong_on_negatives), fields=ADD_TESTS)]
    )  # fmt: skip
    assert right.value == 1.0 and right.reason is None and right.breakdown["all_passed"] == 1.0
    assert partial.value == pytest.approx(2 / 3) and partial.breakdown["all_passed"] == 0.0
    outcomes = [test["outcome"] for test in partial.details["tests"]]
    assert outcomes == ["passed", "failed", "passed"]
    assert "expected 0, got 2" in partial.details["tests"][1]["reason"]
    assert partial.details["tests_passed"] == 2 and partial.details["tests_total"] == 3


def test_all_or_nothing():
    reward = CodeExecutionReward(aggregate="all_or_nothing")
    [score] = reward.score(
        [Sample(completion=fenced("def add(a, b):\n    return abs(a) + abs(b)"), fields=ADD_TESTS)]
    )
    reward.close()
    assert score.value == 0.0


def test_stdin_stdout_tests(reward):
    program = "n = int(input())\nprint(n * 2)\nprint(n / 3)"
    fields = {"input_output": {"inputs": ["3\n", "10\n"], "outputs": ["6\n1.0\n", "20\n3.3333333333\n"]}}
    [score] = reward.score([Sample(completion=fenced(program), fields=fields)])
    assert score.value == 1.0, score.reason
    assert score.details["tests"][1]["stdout_tail"] == "20\n3.3333333333333335\n"


def test_humaneval_style_asserts_each_count(reward):
    test = (
        "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
        "    assert candidate(0) == 1\n"
    )
    [score] = reward.score([Sample(completion=fenced("def square(x):\n    return x * x"),
                                   fields={"test": test, "entry_point": "square"})])  # fmt: skip
    assert score.value == pytest.approx(2 / 3)
    assert [t["outcome"] for t in score.details["tests"]] == ["passed", "passed", "failed"]


def test_expected_exceptions_keep_their_type(reward):
    test = (
        "def check(candidate):\n"
        "    try:\n        candidate(-1)\n        raise AssertionError('no error')\n"
        "    except ValueError:\n        pass\n"
    )
    program = "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5"
    [score] = reward.score([Sample(completion=fenced(program), fields={"test": test, "entry_point": "root"})])
    assert score.value == 1.0, score.reason


def test_a_timeout_fails_one_test_and_the_rest_still_run(reward):
    program = "def add(a, b):\n    while a < 0:\n        pass\n    return a + b"
    [score] = reward.score([Sample(completion=fenced(program), fields=ADD_TESTS)])
    assert score.ok and score.value == pytest.approx(2 / 3)
    assert [t["outcome"] for t in score.details["tests"]] == ["passed", "timeout", "passed"]


def test_syntax_and_import_errors_fail_every_test_with_the_reason(reward):
    [syntax, raising] = reward.score(
        [Sample(completion=fenced("def add(a, b)\n    return a + b"), fields=ADD_TESTS),
         Sample(completion=fenced("import numpy_that_does_not_exist\ndef add(a, b):\n    return a + b"),
                fields=ADD_TESTS)]
    )  # fmt: skip
    assert syntax.value == 0.0 and "compile_error" in syntax.reason and "SyntaxError" in syntax.reason
    assert raising.value == 0.0 and "ModuleNotFoundError" in raising.reason
    assert all(t["outcome"] == "error" for t in raising.details["tests"])


def test_no_program_and_missing_tests(reward):
    [no_code, no_tests] = reward.score([Sample(completion="I would use recursion.", fields=ADD_TESTS),
                                        Sample(completion=fenced("x = 1"), id="p7")])  # fmt: skip
    assert no_code.ok and no_code.value == 0.0 and no_code.reason == "no program found in the completion"
    assert no_tests.status is Status.INVALID_INPUT and "p7" in no_tests.reason


def test_completion_continuing_the_prompt():
    reward = CodeExecutionReward(completion_continues_prompt=True)
    sample = Sample(prompt="def add(a, b):\n", completion="    return a + b\n", fields=ADD_TESTS)
    [score] = reward.score([sample])
    reward.close()
    assert score.value == 1.0


def test_unsafe_local_mode_runs_without_bwrap():
    reward = CodeExecutionReward(isolation="unsafe_local")
    [score] = reward.score([Sample(completion=fenced("def add(a, b):\n    return a + b"), fields=ADD_TESTS)])
    reward.close()
    assert score.value == 1.0


def test_missing_bwrap_fails_loudly_with_the_fix(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/sbin:/sbin")
    monkeypatch.setattr("shutil.which", lambda name: None if name == "bwrap" else f"/usr/bin/{name}")
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        Sandbox().check()


def test_built_from_config_with_limits():
    reward = build({"type": "code_execution", "test_timeout_s": 2, "limits": {"memory_bytes": 256 << 20}})
    assert reward.sandbox.limits.memory_bytes == 256 << 20
    hungry = fenced("x = bytearray(400 << 20)\ndef add(a, b):\n    return a + b")
    [score] = reward.score([Sample(completion=hungry, fields=ADD_TESTS)])
    reward.close()
    assert score.value == 0.0 and "MemoryError" in score.reason


@pytest.mark.parametrize(
    ("program", "fields"),
    [
        # A bigger stack through a thread: the main thread returns before the work is done.
        ("import threading, sys\ndef main():\n    print(int(sys.stdin.read()) * 2)\n"
         "threading.Thread(target=main).start()", {"tests": [{"input": "21", "output": "42"}]}),
        ("from __future__ import annotations\nfrom dataclasses import dataclass\n"
         "@dataclass\nclass P:\n    x: int\ndef f(x):\n    return P(x).x + 1",
         {"fn_name": "f", "tests": [{"input": [1], "output": 2}]}),
        ("class Solution:\n    def twoSum(self, nums, target):\n"
         "        seen = {}\n        for i, n in enumerate(nums):\n"
         "            if target - n in seen:\n                return [seen[target - n], i]\n"
         "            seen[n] = i",
         {"fn_name": "twoSum", "tests": [{"input": [[2, 7, 11, 15], 9], "output": [0, 1]}]}),
        ("import math\ndef f(n):\n    return math.factorial(n)",
         {"test": "import math\ndef check(candidate):\n    assert candidate(2000) == math.factorial(2000)\n",
          "entry_point": "f"}),
        ("def f():\n    return {frozenset({1, 2}), frozenset({3})}",
         {"test": "def check(candidate):\n    assert candidate() == {frozenset({1, 2}), frozenset({3})}\n",
          "entry_point": "f"}),
        ("def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
         {"test_list": ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"]}),
        ("import sys\nsys.__stdout__.write('7\\n')", {"tests": [{"input": "", "output": "7"}]}),
    ],
)  # fmt: skip
def test_correct_programs_in_less_common_forms_pass(reward, program, fields):
    [score] = reward.score([Sample(completion=fenced(program), fields=fields)])
    assert score.value == 1.0, (score.reason, score.details.get("tests"))


def test_tests_passed_before_the_budget_ran_out_still_count():
    reward = CodeExecutionReward(test_timeout_s=1.0, total_timeout_s=1.5)
    program = "def f(x):\n    while x > 0:\n        pass\n    return x"
    fields = {"fn_name": "f", "tests": [{"input": [0], "output": 0}] + [{"input": [1], "output": 1}] * 4}
    [score] = reward.score([Sample(completion=fenced(program), fields=fields)])
    reward.close()
    assert score.value == pytest.approx(1 / 5)
    assert [t["outcome"] for t in score.details["tests"]][:2] == ["passed", "timeout"]


def test_code_in_the_reasoning_never_runs():
    reward = CodeExecutionReward()
    program = "```python\ndef f():\n    return 1\n```"
    tests = {"tests": [{"input": [], "output": 1}], "fn_name": "f"}
    hidden, shown = reward.score(
        [
            Sample(completion=f"<think>{program}</think>No code.", fields=tests),
            Sample(completion=f"<think>drafting</think>{program}", fields=tests),
        ]
    )
    reward.close()
    assert (hidden.value, hidden.reason) == (0.0, "no program found in the completion")
    assert shown.value == 1.0, shown.reason
