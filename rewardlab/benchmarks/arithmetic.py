"""Step-labelled arithmetic solutions, generated: the labels are known by construction.

A problem chains a few operations (``Start with 7. Add 5, then multiply by 3, then subtract
4.``); its solution does one operation per line (``7 + 5 = 12``) and ends with ``The answer is
32.`` A corrupted solution has one first error of one of two kinds: an ``arithmetic`` error (a
result off by a few) or a ``copy`` error (a line starts from a misquoted value - the previous
result, or the start - and computes correctly from it). Every later line is computed correctly
from the wrong value, so only the first error is locally wrong - the ProcessBench convention:
the label is the index of the earliest wrong step, -1 when none is, and every step from the
first error on counts as incorrect (it can no longer reach the answer). `corrupt` injects such
an error into a given correct solution, the same way (`solution_steps` does both).

Generation is seeded: the same seed gives the same items, in any process.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OPERATIONS = {
    "+": ("add {n}", lambda a, b: a + b),
    "-": ("subtract {n}", lambda a, b: a - b),
    "*": ("multiply by {n}", lambda a, b: a * b),
}


@dataclass(frozen=True, slots=True)
class SteppedSolution:
    """One problem and a solution, correct or with one injected first error.

    Attributes:
        problem: The question.
        steps: One line per operation, then the answer line.
        first_error: Index of the earliest wrong step; -1 when the solution is correct.
        answer: The correct final answer.
    """

    problem: str
    steps: tuple[str, ...]
    first_error: int
    answer: int

    @property
    def labels(self) -> list[bool]:
        """Per step: still on a path to the right answer (True before the first error)."""
        cut = len(self.steps) if self.first_error < 0 else self.first_error
        return [index < cut for index in range(len(self.steps))]

    def stepwise_row(self) -> dict[str, Any]:
        """TRL's stepwise-supervision row (``prompt``, ``completions``, ``labels``)."""
        return {"prompt": self.problem, "completions": list(self.steps), "labels": self.labels}


ERROR_KINDS = ("arithmetic", "copy")


def arithmetic_solutions(
    count: int,
    *,
    seed: int = 0,
    error_rate: float = 0.5,
    operations: tuple[int, int] = (3, 5),
    error_kinds: tuple[str, ...] = ERROR_KINDS,
) -> list[SteppedSolution]:
    """``count`` problems with ``operations`` (inclusive range) steps each; a fraction
    ``error_rate`` of the solutions have an injected first error, of a kind drawn from
    ``error_kinds``, at a uniformly chosen step."""
    if not 0 <= error_rate <= 1:
        raise ValueError(f"error_rate must be in [0, 1], got {error_rate!r}")
    unknown = set(error_kinds) - set(ERROR_KINDS)
    if unknown or not error_kinds:
        raise ValueError(f"error_kinds must be some of {', '.join(ERROR_KINDS)}, got {error_kinds!r}")
    rng = random.Random(seed)
    return [_solution(rng, error_rate, operations, error_kinds) for _ in range(count)]


def solution_steps(
    start: int,
    chain: Sequence[tuple[str, int]],
    rng: random.Random,
    wrong_at: int = -1,
    kind: str | None = None,
) -> tuple[str, ...]:
    """The lines solving ``chain`` (operation symbol, operand) from ``start``, then the answer
    line; with one injected first error of ``kind`` at line ``wrong_at`` (-1: none). An
    ``arithmetic`` error puts a result off by 1-9, a ``copy`` error starts the line from a value
    off by 1-9 (both drawn from ``rng``); every later line computes correctly from the wrong
    value."""
    if wrong_at >= 0 and kind not in ERROR_KINDS:
        raise ValueError(f"kind must be one of {', '.join(ERROR_KINDS)}, got {kind!r}")
    value, steps = start, []
    for index, (symbol, operand) in enumerate(chain):
        if index == wrong_at and kind == "copy":
            value += rng.choice([-1, 1]) * rng.randint(1, 9)
        result = OPERATIONS[symbol][1](value, operand)
        if index == wrong_at and kind == "arithmetic":
            result += rng.choice([-1, 1]) * rng.randint(1, 9)
        steps.append(f"{value} {symbol} {operand} = {result}")
        value = result
    steps.append(f"The answer is {value}.")
    return tuple(steps)


def corrupt(solution: SteppedSolution, kind: str, rng: random.Random) -> SteppedSolution:
    """``solution`` (a correct one) solved again with one injected first error of ``kind`` at a
    step drawn uniformly from ``rng``, as `arithmetic_solutions` injects it."""
    if solution.first_error != -1:
        raise ValueError(
            f"only a correct solution can be corrupted, not one wrong from step {solution.first_error}"
        )
    lines = [_parsed(line) for line in solution.steps[:-1]]
    wrong_at = rng.randrange(len(lines))
    chain = [(symbol, operand) for _, symbol, operand in lines]
    steps = solution_steps(lines[0][0], chain, rng, wrong_at, kind)
    return SteppedSolution(solution.problem, steps, wrong_at, solution.answer)


def _solution(
    rng: random.Random, error_rate: float, operations: tuple[int, int], error_kinds: tuple[str, ...]
) -> SteppedSolution:
    start = rng.randint(2, 20)
    chain = [_operation(rng) for _ in range(rng.randint(*operations))]
    wrong_at = rng.randrange(len(chain)) if rng.random() < error_rate else -1
    kind = rng.choice(error_kinds) if wrong_at >= 0 else None
    answer = start
    for symbol, operand in chain:
        answer = OPERATIONS[symbol][1](answer, operand)
    phrases = [OPERATIONS[symbol][0].format(n=operand) for symbol, operand in chain]
    problem = f"Start with {start}. " + ", then ".join(phrases).capitalize() + ". What is the result?"
    return SteppedSolution(problem, solution_steps(start, chain, rng, wrong_at, kind), wrong_at, answer)


def _operation(rng: random.Random) -> tuple[str, int]:
    symbol = rng.choice("+-*")
    return symbol, rng.randint(2, 5) if symbol == "*" else rng.randint(2, 30)


def _parsed(line: str) -> tuple[int, str, int]:
    """A solution line's operation and the value it starts from (``"12 * 3 = 36"`` -> (12, "*", 3))."""
    value, symbol, operand = line.partition(" = ")[0].split(" ")
    return int(value), symbol, int(operand)
