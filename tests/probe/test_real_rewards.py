"""The probe against real rewards on real rollouts (shipped data, see `shipped_data`): a
deliberately weak check is caught, and the hardened rewards hold - except where the probe found
real bugs, which are reported, kept failing here (strict xfail), and pinned down below."""

from __future__ import annotations

import os

import pytest

from rewardlab import build
from rewardlab.errors import SandboxUnavailable
from rewardlab.probe import probe_reward
from rewardlab.rewards.code.sandbox import Sandbox
from tests.probe.shipped_data import humaneval_samples, math_samples

MATH = math_samples(120, seed=0)


@pytest.fixture
def reward(request):
    built = build(request.param)
    yield built
    built.close()


@pytest.mark.parametrize("reward", [{"type": "regex_match", "pattern": r"\\boxed\{"}], indirect=True)
def test_a_check_for_a_box_alone_pays_a_box_with_nothing_in_it(reward):
    result = probe_reward(reward, MATH)
    unboxed = sum("\\boxed{" not in sample.completion_text for sample in MATH)
    assert unboxed > 0  # the data has honest answers without a box, which the weak check fails
    found = {exploit.name: exploit for exploit in result.exploits}
    assert {"format_only", "question_echo"} <= {exploit.name for exploit in result.failing}
    # Every honest answer without a box loses to the markup alone, and no other row can gain.
    assert found["format_only"].wins == unboxed and found["format_only"].losses == 0
    # Only blind exploits pay: the check reads no answer, so the answer games tie with their controls.
    assert all(not exploit.answer_aware for exploit in result.failing)


@pytest.mark.parametrize("reward", [{"type": "math_answer"}], indirect=True)
def test_math_answer_pays_no_exploit(reward):
    # The probe found two before they were fixed (tests/rewards/math/test_probe_findings.py).
    result = probe_reward(reward, MATH)
    assert [(exploit.name, exploit.wins) for exploit in result.failing] == []
    assert result.pipeline_failures == []


def _sandbox_missing() -> str | None:
    try:
        Sandbox().check()
    except SandboxUnavailable as error:
        if os.environ.get("CI"):
            raise
        return str(error)
    return None


@pytest.mark.skipif(_sandbox_missing() is not None, reason=f"no sandbox: {_sandbox_missing()}")
@pytest.mark.parametrize(
    "reward", [{"type": "code_execution", "test_timeout_s": 1.0, "total_timeout_s": 5.0}], indirect=True
)
def test_code_execution_pays_no_code_game(reward):
    samples = humaneval_samples(8)
    honest = reward.score(samples)
    # Some honest programs (mutants) fail some tests, so that there is something to gain.
    assert all(score.ok for score in honest) and any(score.value < 1 for score in honest)
    result = probe_reward(reward, samples)
    games = {exploit.name: exploit for exploit in result.exploits if "code" in exploit.kinds}
    assert set(games) == {"exit_zero", "always_equal", "pass_markers", "edit_tests", "sleep_past_limit"}
    for game in games.values():
        assert game.rows == len(samples) and game.scored == len(samples), game.name
        assert game.wins == 0, (game.name, [example.to_dict() for example in game.examples])
    assert result.failing == [] and result.pipeline_failures == []
