"""What a box or a line means in its context: boxes inside expressions or struck out, lines
after the answer that restate another, answers disowned before they are given, echoes of the
question. The attacks are in tests/rewards/data/redteam_cases.jsonl; here are the ordinary
completions the same rules must leave alone, beside the cases that pin each rule down."""

import time

import pytest

from rewardlab import Sample
from rewardlab.rewards.contract import Status
from rewardlab.rewards.math.extract import extract_answer
from rewardlab.rewards.math.reward import MathAnswerReward


@pytest.fixture(scope="module")
def reward():
    built = MathAnswerReward(execution="inline")
    yield built
    built.close()


def value(reward, completion, reference, prompt=""):
    [score] = reward.score([Sample(prompt=prompt, completion=completion, reference=reference)])
    assert score.status is Status.OK, score.reason
    return score.value


@pytest.mark.parametrize(
    "completion",
    [
        r"**\boxed{10}**",
        r"- \boxed{10}",
        r"$x = \boxed{10}$",
        r"$$\text{Answer: }\boxed{10}$$",
        r"\[ \boxed{10} \]",
        r"\(\boxed{10}\)",
        r"$\color{red}{\boxed{10}}$",
        r"$\mathbf{\boxed{10}}$",
        r"$\Rightarrow \boxed{10}$",
        r"$\left( \boxed{10} \right)$",
        r"$10 + 0 = \boxed{10}$.",
        r"So there are $\boxed{10}$ apples.",
        r"$\boxed{10}\text{ apples}$",
        r"<b>\boxed{10}</b>",
        r"The answer is \boxed{10}. I hope it is correct.",
        r"~~\boxed{7}~~ $\boxed{10}$.",
    ],
)
def test_ordinary_boxes_stand_on_their_own(reward, completion):
    assert value(reward, completion, "10") == 1.0


@pytest.mark.parametrize(
    ("completion", "reference"),
    [(r"$\boxed{30}^\circ$", r"30^\circ"), (r"\boxed{45}\%", "45\\%"), (r"$\boxed{5}\,\text{cm}$", "5")],
)
def test_a_unit_after_a_box_is_a_unit(reward, completion, reference):
    assert value(reward, completion, reference) == 1.0


@pytest.mark.parametrize(
    "completion",
    [
        r"$-\boxed{10}$",
        r"$2\boxed{10}$",
        r"$\boxed{10}^2$",
        r"$\boxed{10}!$",
        r"$\boxed{10} - 3$",
        r"$\left|\boxed{-10}\right|$",
        r"$x \le \boxed{10}$",
        r"$\boxed{10}_{2}$",
        r"The answer is \boxed{1}0.",
    ],
)
def test_a_box_an_operand_of_an_expression_states_nothing(completion):
    extraction = extract_answer(completion)
    assert extraction.answers == () and "expression" in extraction.refusal


@pytest.mark.parametrize(
    "tail",
    [
        "I hope it is correct.",
        "Done!",
        "We verify: 10 - 3 = 7, and 7 + 3 = 10.",
        "Step 3 complete",
        "This is the number of apples she has left.",
        "Therefore, it takes 10 minutes for the 3-mile walk.",
    ],
)
def test_ordinary_lines_after_an_answer_restate_nothing_else(reward, tail):
    assert value(reward, f"The answer is $\\boxed{{10}}$.\n\n{tail}", "10") == 1.0


@pytest.mark.parametrize(
    ("tail", "restated"),
    [
        ("Wait, 7.", "7"),
        ("Ans: 7", "7"),
        ("Result: $\\frac{7}{2}$", "\\frac{7}{2}"),
        ("7 is the answer.", "7"),
        ("$$x = 7$$", "7"),
        ("La respuesta es 7.", "7"),
        ("答案是7。", "7"),
    ],
)
def test_a_line_after_the_answer_that_restates_a_value_is_one_more_statement(reward, tail, restated):
    extraction = extract_answer(f"\\boxed{{10}}\n\n{tail}")
    assert extraction.answers == ("10", restated)
    assert value(reward, f"\\boxed{{7}}\n\n{tail}", "7") == (1.0 if restated == "7" else 0.0)


@pytest.mark.parametrize(
    "completion",
    [
        "Since x cannot be 0, the answer is 10.",
        "The number of wrong answers is 10.",
        "It is not hard to see that x = 5, so the answer is 10.",
        "I think the answer is 10.",
    ],
)
def test_words_in_another_clause_or_the_subject_do_not_disown_the_answer(reward, completion):
    assert value(reward, completion, "10") == 1.0


@pytest.mark.parametrize(
    ("prompt", "completion", "reference"),
    [
        # The question may contain its own answer.
        (
            r"Which is larger, $\sqrt2+\sqrt3$ or $\sqrt{10}$?",
            r"$\boxed{\sqrt{2}+\sqrt{3}}$",
            r"\sqrt{2}+\sqrt3",
        ),
        # A plain number the question gives may be the answer, in another form than the reference's.
        ("A coin lands heads with probability 0.5. What is the probability of tails?", "0.5", r"\frac12"),
        # The same value written differently from the question's expression.
        (r"Expand $(x+1)^2$.", r"$\boxed{x^2+2x+1}$", "x^2+2x+1"),
        ("Convert 12 feet to inches.", "The answer is 144 inches.", r"144 \text{ inches}"),
    ],
)
def test_answers_that_are_not_echoes(reward, prompt, completion, reference):
    assert value(reward, completion, reference, prompt) == 1.0


def test_an_echo_is_refused_only_with_the_question(reward):
    assert value(reward, r"$\boxed{(x+1)^2}$", "x^2+2x+1", "Expand $(x + 1)^{2}$.") == 0.0
    assert value(reward, r"$\boxed{(x+1)^2}$", "x^2+2x+1") == 1.0  # no question: equal in value


def test_one_cas_budget_per_sample_whatever_it_states():
    """Three answers only the CAS could settle share one budget: the sample ends within it."""
    slow = MathAnswerReward(cas_budget_s=1.5)
    completion = "\n\n".join(
        rf"\boxed{{\sum_{{k=1}}^{{10^{{9}}}} \frac{{1}}{{k^{power}}}}}" for power in (2, 3, 4)
    )
    slow.score([Sample(completion=r"\boxed{2}", reference="2")])  # start the workers
    started = time.monotonic()
    [score] = slow.score([Sample(completion=completion, reference=r"2\sqrt{3}")])
    elapsed = time.monotonic() - started
    slow.close()
    assert score.status is Status.TIMEOUT
    assert elapsed < 1.5 + 1.5, elapsed  # one budget (split three ways over two workers), plus slack


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("It is not <answer>10</answer>", 0.0),
        ("<answer>10</answer> or 7", 0.0),
        ("<answer>10</answer>\n\nWait, I made an error in step 2.", 0.0),
        ("<answer>10</answer>\n\nAns: 7", 0.0),
        ("Therefore x = 7.\n<answer>10</answer>", 0.0),
        ("<think>maybe 7</think>\n<answer>10</answer>", 1.0),
        ("The answer is <answer>10</answer>.", 1.0),
        ("<answer>\nStep 1: 4 + 6.\nSo x = 10.\n</answer>\nThat was fun.", 1.0),  # a solution in the block
    ],
)
def test_an_answer_block_is_read_in_its_place(reward, completion, expected):
    assert value(reward, completion, "10") == expected


@pytest.mark.parametrize(
    "completion",
    [
        "Thus the count is 7.\n\n\\boxed{10}",
        "Thus the count is 7.\n\\[\n\\boxed{10}\n\\]",
        "\\boxed{10}\n\nActually the count is 7.\n\nLet me explain the recount step by step for clarity.",
        "\\boxed{10}\n\nI'd go with 7 though.",
        "\\boxed{10}\n\n(7 if counting only the red ones.)",
    ],
)
def test_a_value_said_next_to_the_answer_is_one_more_statement(completion):
    assert extract_answer(completion).answers in (("7", "10"), ("10", "7"))


@pytest.mark.parametrize(
    "completion",
    [
        "Therefore, the final answer is:\n\n\\boxed{10}",
        "So Tom has 4 apples and Ana has 6.\n\n\\boxed{10}",
        "Thus x = 3 + 7 = 10.\n\n\\boxed{10}",
        "So the total is 4 + 6 = 10\n\n\\boxed{10}",
        "\\boxed{10}\n\nWe ignore the negative root, since a length is positive.",
        "\\boxed{10}\n\nDouble-checking each step, we made no errors.",
        "\\boxed{10}\n\nWait, that matches the estimate from before.",
        "Final answer: \\boxed{10}\n\nNote: we assume each box holds 5 apples.",
        "The number of false statements is $\\boxed{10}$.",
        "So $\\boxed{10}$ marbles are not red.",
        "Therefore, 10 marbles are not red.",
        "He can buy a maximum of $\\boxed{10}$ books.",
        "So the answer is 10 because she has 4 + 6 = 10 marbles.",
        "The answer is $\\boxed{10}$ either way.",
        "The answer is $\\boxed{10}$.\n\nSo Janet sells 9 eggs a day.",
        "The answer is $\\boxed{10}$.\n\nHis sister is 7.",
        "$\\boxed{10}$\n\nThis minimum is attained at $x = 3$.",
        "$\\boxed{10}$, or 1000%.",
        "The number of ways is $\\boxed{10}$, or equivalently $\\binom{5}{2}$.",
        "Therefore, the number of ways is $\\binom{5}{2}$.\n\n$$\\boxed{10}$$",
        "The answer is 10.\n\nNote: The question gives 17 total.",
    ],
)
def test_ordinary_words_around_an_answer_leave_it_alone(reward, completion):
    assert value(reward, completion, "10") == 1.0
