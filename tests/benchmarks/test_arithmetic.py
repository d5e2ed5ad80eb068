import random
import re

import pytest

from rewardlab.benchmarks.arithmetic import arithmetic_solutions, corrupt, solution_steps

LINE = re.compile(r"^(-?\d+) ([-+*]) (\d+) = (-?\d+)$")


def evaluate(left, symbol, right):
    return {"+": left + right, "-": left - right, "*": left * right}[symbol]


def wrong_lines(item):
    """Indices of lines whose arithmetic is wrong, and of lines that misquote the value before."""
    *operations, _ = item.steps
    start = int(re.match(r"Start with (\d+)\.", item.problem)[1])
    previous = [start] + [int(LINE.match(line)[4]) for line in operations[:-1]]
    matches = [LINE.match(line) for line in operations]
    arithmetic = [i for i, m in enumerate(matches) if evaluate(int(m[1]), m[2], int(m[3])) != int(m[4])]
    copy = [i for i, m in enumerate(matches) if int(m[1]) != previous[i]]
    return arithmetic, copy


def test_only_the_first_error_is_locally_wrong_and_labels_follow_it():
    items = arithmetic_solutions(300, seed=3)
    assert 100 < sum(item.first_error >= 0 for item in items) < 200
    kinds = {"arithmetic": 0, "copy": 0}
    for item in items:
        *operations, answer_line = item.steps
        arithmetic, copy = wrong_lines(item)
        assert sorted(arithmetic + copy) == ([] if item.first_error < 0 else [item.first_error])
        kinds["arithmetic"] += len(arithmetic)
        kinds["copy"] += len(copy)
        final = int(LINE.match(operations[-1])[4])
        assert answer_line == f"The answer is {final}."
        assert (final == item.answer) == (item.first_error < 0)
        assert item.labels == [item.first_error < 0 or i < item.first_error for i in range(len(item.steps))]
    assert min(kinds.values()) > 40  # both kinds of error occur


def test_one_kind_of_error_only():
    for item in arithmetic_solutions(100, seed=4, error_kinds=("copy",)):
        arithmetic, copy = wrong_lines(item)
        assert arithmetic == [] and copy == ([] if item.first_error < 0 else [item.first_error])


def test_generation_is_seeded():
    assert arithmetic_solutions(5, seed=1) == arithmetic_solutions(5, seed=1)
    assert arithmetic_solutions(5, seed=1) != arithmetic_solutions(5, seed=2)
    row = arithmetic_solutions(1, seed=1)[0].stepwise_row()
    assert set(row) == {"prompt", "completions", "labels"}
    with pytest.raises(ValueError, match="error_kinds"):
        arithmetic_solutions(1, error_kinds=("typo",))


def test_a_corrupted_solution_keeps_the_problem_and_the_lines_before_its_first_error():
    rng = random.Random(0)
    for solution in arithmetic_solutions(50, seed=7, error_rate=0.0):
        for kind in ("arithmetic", "copy"):
            wrong = corrupt(solution, kind, rng)
            assert wrong.problem == solution.problem
            assert wrong.answer == solution.answer
            assert wrong.steps[: wrong.first_error] == solution.steps[: wrong.first_error]
            assert wrong.steps[wrong.first_error] != solution.steps[wrong.first_error]
            assert wrong.steps[-1] != solution.steps[-1]
            arithmetic, copy = wrong_lines(wrong)
            assert (arithmetic if kind == "arithmetic" else copy) == [wrong.first_error]


def test_steps_are_solved_one_operation_a_line():
    # 7 + 5 = 12, 12 * 3 = 36, 36 - 4 = 32; no error draws nothing from the generator.
    assert solution_steps(7, [("+", 5), ("*", 3), ("-", 4)], random.Random(0)) == (
        "7 + 5 = 12",
        "12 * 3 = 36",
        "36 - 4 = 32",
        "The answer is 32.",
    )


def test_only_known_errors_and_correct_solutions_are_corrupted():
    with pytest.raises(ValueError, match="kind must be one of arithmetic, copy, got 'typo'"):
        solution_steps(7, [("+", 5)], random.Random(0), wrong_at=0, kind="typo")
    wrong = arithmetic_solutions(1, seed=1, error_rate=1.0)[0]
    with pytest.raises(ValueError, match="only a correct solution can be corrupted"):
        corrupt(wrong, "copy", random.Random(0))
