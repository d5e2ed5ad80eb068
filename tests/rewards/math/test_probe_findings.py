"""What `rewardlab probe` found paying in math_answer on real rollouts, fixed: each case as the
probe built it from a real completion, beside the honest answers that must keep their score."""

import pytest

from rewardlab import Sample, build


@pytest.fixture(scope="module")
def reward():
    built = build({"type": "math_answer"})
    yield built
    built.close()


def value(reward, completion, reference):
    (score,) = reward.score([Sample(prompt="Solve it.", completion=completion, reference=reference)])
    assert score.ok, score.reason
    return score.value


@pytest.mark.parametrize(
    "completion",
    [
        "We get:\n\\[\n\\frac{xy + xz + y^2 +",  # pb-math-16 cut inside its display and brace
        "So, Jackie will have $15 more if she does the",  # pb-gsm8k-6 cut mid-sentence
        "The sum is 2 +",
        "$$\nx = 2",  # a display never closed
    ],
)
def test_a_cut_off_rollout_states_no_answer(reward, completion):
    reference = "15" if "Jackie" in completion else "2"
    assert value(reward, completion, reference) == 0.0


@pytest.mark.parametrize(
    "completion",
    [
        "So Mitchell sold 21",
        "Therefore the total is $21.",
        "\\begin{align} a &= 1 \\\\[4pt] b &= 21 \\end{align}\nSo the answer is 21",
        "The set is \\{1, 2\\} and the answer is 21",
    ],
)
def test_a_finished_last_line_is_still_read(reward, completion):
    assert value(reward, completion, "21") == 1.0


@pytest.mark.parametrize(
    "completion",
    [
        "$\\boxed{7}$ or $\\boxed{A}$",
        "$\\boxed{3528}$, $\\boxed{272}$, $\\boxed{A}$",
        "Answer: A, 7",
    ],
)
def test_a_letter_listed_with_other_values_is_a_hedge(reward, completion):
    assert value(reward, completion, "A") == 0.0


@pytest.mark.parametrize(
    "completion",
    [
        "So the answer is $\\boxed{A}$.",
        "$\\boxed{(A)\\ 7}$",
        "The answer is (A) 7.",
        "$\\boxed{A}$, $\\boxed{A}$",
    ],
)
def test_one_option_with_its_value_is_still_an_answer(reward, completion):
    assert value(reward, completion, "A") == 1.0
