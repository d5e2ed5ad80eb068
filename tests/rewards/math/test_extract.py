import pytest

from rewardlab.rewards.math.extract import extract_answer, reference_answer
from rewardlab.rewards.math.spans import boxes


def test_nested_braces_in_a_box():
    assert extract_answer(r"so \boxed{\frac{\sqrt{3}}{2}} done").answer == r"\frac{\sqrt{3}}{2}"


def test_unbraced_box():
    assert extract_answer(r"answer: $\boxed 7$").answer == "7"


def test_every_paragraph_with_boxes_is_a_statement():
    text = "First \\boxed{1}.\n\nThen \\boxed{2} or \\boxed{3}."
    # The distinct boxes of one paragraph are one statement: hedging between boxes is a list.
    assert extract_answer(text).answers == ("1", "2, 3")
    assert extract_answer("x \\boxed{5}\n\nso \\boxed{5}").answers == ("5",)


def test_placeholder_boxes_are_ignored():
    assert [box.content for box in boxes(r"\boxed{\phantom{2}} \boxed{4}")] == ["4"]


@pytest.mark.parametrize(
    ("text", "answer", "method"),
    [
        ("Thus the final answer is $\\frac{1}{2}$. I hope", r"\frac{1}{2}", "answer_phrase"),
        ("The answer is: 12 apples.", "12 apples", "answer_phrase"),
        ("Answer: (C)", "(C)", "answer_phrase"),
        ("We compute things.\nWe get \\(x = 3\\)", "x = 3", "final_math"),
        ("Long work.\nTherefore, $x \\ge 5$ is the solution.", r"x \ge 5", "final_line"),
        (
            "Final Answer: The final answer is 12,000,023. I hope it is correct.",
            "12,000,023",
            "answer_phrase",
        ),
        ("Answer $\n 9 \n$", "9", "answer_phrase"),
        ("So, Jane started growing it 3 hours ago.", "3", "final_line"),
        ("Long reasoning...\n42", "42", "final_line"),
    ],
)
def test_sources_in_order(text, answer, method):
    extraction = extract_answer(text)
    assert (extraction.answer, extraction.method) == (answer, method)


def test_last_number_only_when_asked():
    text = (
        "I computed 3 then 17 and kept going without ever stating a final answer in a short line at all....."
    )
    text += " " * 100
    assert extract_answer(text * 2).answer is None
    assert extract_answer(text * 2, last_number_fallback=True).answer == "17"


def test_reference_forms():
    assert reference_answer(r"so \boxed{12}") == "12"
    assert reference_answer("She makes 9 * 2 = 18\n#### 18") == "18"
    assert reference_answer(" 3/4 ") == "3/4"


@pytest.mark.parametrize(
    "flood",
    [
        "\\boxed{" * 150_000,
        "$a" * 500_000,
        "$$a" * 300_000,
        "\\boxed{" + "{" * 500_000,
        "the answer is " * 70_000,
    ],
)
def test_a_megabyte_of_hostile_text_is_handled(flood):
    # Unclosed boxes and math spans once made the scan quadratic; a flood must come back with no
    # answer (an ok 0) or an over-long one (invalid input), never a pass.
    from rewardlab import Sample, Status
    from rewardlab.rewards.math.reward import MathAnswerReward

    [score] = MathAnswerReward(use_cas=False).score([Sample(completion=flood, reference="1")])
    assert score.status in (Status.OK, Status.INVALID_INPUT, Status.PARSE_ERROR)
    assert score.value in (0.0, None)


@pytest.mark.parametrize(
    "text",
    [
        # Seen under GRPO: the policy ended on the question's own sum, cut off before its value,
        # and the sum taken whole was equivalent to the reference.
        "1. N: 9 + 9 + 8 = 39\n2. N: 9 + 9 + 8 = 27\n3. N: 9 + 9 + 8 = ",
        "So 9 + 9 + 8 =",
        "9 + 9 + 8 = 26 =",
    ],
)
def test_a_statement_cut_off_before_its_value_has_no_answer(text):
    assert extract_answer(text).answer is None


def test_the_hack_scores_zero_and_the_worked_answer_one():
    from rewardlab import Sample, build

    reward = build({"type": "math_answer"})
    hacked, worked = reward.score(
        [
            Sample(completion="1. N: 9 + 9 + 8 = 39\n2. N: 9 + 9 + 8 = ", reference="26"),
            Sample(completion="9 + 9 = 18\n18 + 8 = 26", reference="26"),
        ]
    )
    reward.close()
    assert hacked.value == 0.0
    assert hacked.reason.startswith("the completion stops mid-way (a dangling operator")
    assert worked.value == 1.0
