import asyncio
import json
import pickle
import threading
import time
from pathlib import Path

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rewards.math.reward import MathAnswerReward


@pytest.fixture(scope="module")
def reward():
    reward = MathAnswerReward(cas_budget_s=3.0)
    yield reward
    reward.close()


def score(reward, completion, reference, **kwargs):
    return reward.score([Sample(completion=completion, reference=reference, **kwargs)])[0]


def test_fast_path_correct_and_incorrect(reward):
    right = score(reward, r"Adding, we get $\boxed{\dfrac{3}{4}}$.", "0.75")
    wrong = score(reward, r"So $\boxed{\frac{4}{3}}$.", "0.75")
    assert (right.value, right.details["path"], right.reason) == (1.0, "fast", None)
    assert wrong.value == 0.0 and "not equivalent" in wrong.reason
    assert wrong.details["extracted"] == r"\frac{4}{3}" and wrong.details["method"] == "boxed"


def test_cas_path_settles_what_the_fast_path_cannot(reward):
    result = score(reward, r"The answer is $\boxed{\sum_{k=1}^{4} x}$", "4x")
    assert result.value == 1.0 and result.details["path"] == "cas"
    wrong = score(reward, r"\boxed{\lfloor x \rfloor}", "x")
    assert wrong.value == 0.0 and wrong.details["path"] == "cas"


def test_a_number_is_answered_by_a_number_not_by_a_computation(reward):
    for completion in (r"\boxed{\sum_{k=1}^{4} k}", r"\boxed{\lfloor 3.7 \rfloor}", r"\boxed{2^3 + 2}"):
        result = score(reward, completion, "10")
        assert result.value == 0.0 and result.details["path"] == "fast", result.reason


def test_a_relation_between_unknowns_is_not_a_number(reward):
    # From a real ProcessBench completion (gold 24): no value is stated, and the fast path says so.
    result = score(reward, r"Therefore:\n\[ p(0) + p(4) = 128 - 106r \]", "24")
    assert (result.value, result.details["path"]) == (0.0, "fast") and "unknowns" in result.reason
    # A relation that does state the number is still read (by the CAS).
    assert score(reward, r"Therefore:\n\[ p(0) + p(4) = 24 \]", "24").value == 1.0
    # An equation answer against an equation gold is compared, not refused.
    assert score(reward, r"\boxed{x = y + 1}", "x = y + 1").value == 1.0


def test_a_fraction_over_zero_states_no_value():
    # Found by the time-bound fuzz test: with the CAS off, "0/0" was a parse_error, not a 0.
    reward = MathAnswerReward(use_cas=False, execution="inline")
    for completion in ("0/0", r"\boxed{1/0}", r"The answer is $\frac{3}{0}$."):
        result = score(reward, completion, "5")
        assert (result.status, result.value, result.details["path"]) == (Status.OK, 0.0, "fast"), completion
        assert "divides by zero" in result.reason


def test_references_in_solution_and_gsm8k_form(reward):
    assert score(reward, "\\boxed{18}", "Janet sells 9 eggs... she makes $18.\n#### 18").value == 1.0
    assert score(reward, "\\boxed{18}", r"So she makes $\boxed{18}$ dollars.").value == 1.0


def test_no_answer_is_an_ok_zero_and_missing_reference_is_invalid(reward):
    no_answer = score(reward, "I am not sure how to go on with this one. It is hard. " * 4, "5")
    assert no_answer.ok and no_answer.value == 0.0 and no_answer.reason == "no final answer found"
    missing = score(reward, r"\boxed{5}", None, id="q-9")
    assert missing.status is Status.INVALID_INPUT
    assert "q-9" in missing.reason and "reference" in missing.reason


def test_answer_stuffing_fails(reward):
    assert score(reward, r"It is \boxed{2} or \boxed{3}.", "3").value == 0.0
    assert score(reward, r"\boxed{A \text{ or } B \text{ or } C}", "B").value == 0.0
    assert score(reward, r"\boxed{1, 2, 3, 4, 5}", "3").value == 0.0


def test_chat_completion(reward):
    completion = [{"role": "assistant", "content": "Hmm."}, {"role": "assistant", "content": r"\boxed{7}"}]
    assert reward.score([Sample(completion=completion, reference="7")])[0].value == 1.0


def test_pathological_inputs_end_within_budget_with_a_status():
    reward = MathAnswerReward(cas_budget_s=1.5)
    samples = [
        Sample(completion=r"\boxed{(x+1)^{2000} - (x-1)^{2000}}", reference="(x+2)^{2000}"),
        Sample(completion="\\boxed{" + "1" * 100_000 + "}", reference="1"),
        Sample(completion="\\boxed{" + r"\frac{1}{" * 300 + "2" + "}" * 300 + "}", reference="1"),
        Sample(completion=r"\boxed{2}", reference="2"),
    ]
    started = time.monotonic()
    scores = reward.score(samples)
    elapsed = time.monotonic() - started
    reward.close()
    assert elapsed < 1.5 * 2 + 2.0, elapsed  # one budget per CAS comparison, two workers, plus start-up
    # Powers the fast path refuses and sympy grinds on: the CAS budget ends it.
    assert scores[0].status is Status.TIMEOUT and "budget" in scores[0].reason
    assert scores[1].value == 0.0 and "2000-character limit" in scores[1].reason
    # 300 nested fractions are longer than any answer: refused before any parsing.
    assert scores[2].value == 0.0 and "limit" in scores[2].reason
    assert scores[3].value == 1.0


def test_a_comparison_that_overruns_is_a_timeout_not_a_zero():
    reward = MathAnswerReward(cas_budget_s=0.5)
    # Large symbolic powers that the fast path refuses and sympy grinds on.
    [result] = reward.score(
        [Sample(completion=r"\boxed{(x+1)^{2000} - (x-1)^{2000}}", reference="(x+2)^{2000}")]
    )
    reward.close()
    assert result.status is Status.TIMEOUT and result.value is None and "budget" in result.reason


def test_works_from_threads_and_from_a_running_event_loop(reward):
    results = []

    def worker():
        results.append(score(reward, r"\boxed{\sum_{k=1}^{2} k^2 x}", "5x").value)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def in_loop():
        awaited = await reward.ascore([Sample(completion=r"\boxed{\sum_{k=0}^{2} k^3 x}", reference="9x")])
        # The sync form, called from inside a running loop (a notebook, an async trainer).
        synchronous = reward.score([Sample(completion=r"\boxed{\sum_{k=0}^{3} k x}", reference="6x")])
        return awaited[0].value, synchronous[0].value

    assert results == [1.0, 1.0, 1.0]
    assert asyncio.run(in_loop()) == (1.0, 1.0)


def test_identical_pairs_in_a_batch_are_compared_once(reward):
    samples = [Sample(completion=r"\boxed{\sum_{k=1}^{5} k x}", reference="15x") for _ in range(8)]
    before = len(reward._cas_cache)
    scores = reward.score(samples)
    assert [s.value for s in scores] == [1.0] * 8
    assert len(reward._cas_cache) == before + 1


def test_pickles_without_its_worker_pool(reward):
    reward.score([Sample(completion=r"\boxed{\sum_{k=1}^{2} k x}", reference="3x")])
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.score([Sample(completion=r"\boxed{\sum_{k=1}^{3} k x}", reference="6x")])[0].value == 1.0
    copy.close()


def test_built_from_config():
    reward = build({"type": "math_answer", "answer_region": "whole", "cas_budget_s": 2})
    assert isinstance(reward, MathAnswerReward) and reward.answer_region.whole
    # The whole completion is read: the box inside the reasoning block is the answer.
    assert reward.score([Sample(completion=r"<think>\boxed{2}</think>", reference="2")])[0].value == 1.0
    reward.close()


@pytest.mark.parametrize(
    ("reference", "completion"),
    [
        ("2", r"\boxed{2 \text{ or three}}"),
        ("5", r"\boxed{5 \text{ is wrong}}"),
        ("3", r"\boxed{3 \text{ or more}}"),
        ("3", "The answer is 3 or more."),
        ("3", r"\boxed{3 \text{ squared}}"),
        ("2", r"\boxed{100 = 2}"),
        ("3", r"\boxed{7 - 5 = 3}"),
        ("2", r"\boxed{3 \to 2}"),
        ("2", r"\boxed{3 \Rightarrow 2}"),
        ("2", r"\boxed{3 := 2}"),
        ("2", r"\boxed{3 \\ 2}"),
        ("2", r"\boxed{\cancel{3} 2}"),
        ("2", r"\boxed{\begin{cases}3\\2\end{cases}}"),
        ("2", "The answer is $2$ or $3$."),
        ("2", r"Answer: $2$ \quad (alternatively $3$)"),
        ("2", "Therefore the answer is 3 if n is odd and 2 otherwise."),
        ("0.5", r"\boxed{0.5\%}"),  # 0.5% is 0.005
        ("2", "\\boxed{2}\n\n\\boxed{\\phantom{a}3\\phantom{b}}"),
        ("3,10", r"\boxed{3.1}"),  # a list of two is not a decimal
        ("3", "The solutions are $x=2$ or $x=3$."),
        # Arithmetic left undone: the question's own expression echoed back (a GRPO policy
        # learned "The answer is 17 - 7." for "What is 17 - 7?").
        ("10", "The answer is 17 - 7."),
        ("10", r"\boxed{(9+1)}"),
        ("42", r"The answer is $6 \times 7$."),
        ("10", "x = 2 \\cdot 5"),
        ("2", "The answer is -3 + 5"),
        ("10", "The answer is 17 \u2212 7"),
        ("10", r"The answer is $\left(9+1\right)$."),
        ("10", r"The answer is $17\,-\,7$."),
        ("10", r"\boxed{20 \div 2}"),
        ("5050", r"\boxed{\frac{100 \cdot 101}{2}}"),
        ("8", r"\boxed{2^3}"),
        ("18", r"\boxed{2(16-3-4)}"),
        ("10", r"\boxed{|17 - 7|}"),
        ("18", r"\boxed{9 \cdot 2^1}"),
        ("2", r"\boxed{\sqrt{4}}"),
    ],
)
def test_hedged_contradictory_or_altered_answers_never_pass(reward, reference, completion):
    result = score(reward, completion, reference)
    assert result.ok and result.value == 0.0, (result.reason, result.details)


@pytest.mark.parametrize(
    ("reference", "completion"),
    [
        ("2, 3", r"\boxed{x = 2 \text{ or } x = 3}"),  # "or" between the solutions of the question
        (r"\pm 2", r"\boxed{x=2 \text{ or } x=-2}"),
        ("2, 3", "The solutions are $x=2$ or $x=3$."),
        ("8", "The answer is **8**."),
        ("3, 10", r"\boxed{3,10}"),
        ("3", r"\boxed{3 \text{ (approximately)}}"),
        ("300", r"\boxed{3 \text{ hundred}}"),
        ("2", r"\boxed{7 - 5 = 2}"),
        ("300000", r"\boxed{3 \times 10^5}"),  # scientific notation, not arithmetic left undone
        ("0.001", r"\boxed{10^{-3}}"),
        ("0.5", r"\boxed{\frac{1}{2}}"),
        ("-7", "The answer is -7."),
        ("2+3i", "The answer is 2 + 3i."),
        ("-2,1", r"\boxed{1, -2}"),  # a list of solutions, not 1 minus 2
        ("2000", r"\boxed{2,000}"),
        ("60", r"\boxed{60\%}"),
        ("0.5", r"\boxed{50\%}"),
        (r"(-\infty, 2) \cup (3, \infty)", r"\boxed{x<2 \text{ or } x>3}"),
        ("|x|", r"\boxed{\vert x \vert}"),
        (
            r"\begin{pmatrix} 2 & 0 \\ 0 & 2 \end{pmatrix}",
            r"\boxed{2\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}}",
        ),
    ],
)
def test_legitimate_forms_pass(reward, reference, completion):
    result = score(reward, completion, reference)
    assert result.value == 1.0, (result.reason, result.details)


# What an attack found paid (each scored 1.0 against the gold before): the class, not the instance.
@pytest.mark.parametrize(
    ("reference", "completion"),
    [
        # A box anywhere must not win over what the text goes on to say.
        ("5", r"So we get \boxed{5}. Wait, I made an error in step 2. The correct answer is 7."),
        ("2", r"\boxed{2} ... Actually no. The final answer is 3"),
        ("5", "The answer is \\boxed{5}.\n\nHmm, that is wrong: the answer is 6."),
        ("5", r"The answer is \boxed{5}. Wait, I made an error in step 2."),
        # Boxes a reader does not see.
        ("5", "<!-- \\boxed{5} --> The answer is 7."),
        ("5", "```\n\\boxed{5}\n```\nThe answer is 7."),
        ("5", "% \\boxed{5}\nThe answer is 7."),
        ("5", "\\box\u200bed{5}. The answer is 7."),
        # Negations and comparisons lost by narrowing to one number.
        ("5", "Therefore, it cannot be 5."),
        ("5", "Therefore, 5 is not the answer."),
        ("5", "There are more than 5 ways."),
        ("5", "So the answer is at least 5."),
        ("5", "Thus it might be 5."),
        ("5", "The answer isn't 5."),
        ("5", r"It is not \boxed{5}."),
        # Every choice, or two of them.
        ("D", r"\boxed{A} \boxed{B} \boxed{C} \boxed{D}"),
        ("B", "The answer is B and C."),
        ("B", r"\boxed{B \text{ or } C}"),
        ("B", "The answer is maybe (B)."),
        # Trailing words that change the value are not units.
        ("5", r"\boxed{5 \text{ maybe}}"),
        ("5", r"\boxed{5 \text{ probably}}"),
        ("5", r"\boxed{5 \text{ at minimum}}"),
        ("5", r"\boxed{5 \text{ and up}}"),
        ("5", r"\boxed{5} or more"),
        ("5.4 cents", "The answer is 5.4 dollars"),
        # What the fast path cannot read is not handed to a CAS that pulls a number out of it.
        ("5", r"\boxed{\geq 5}"),
        ("5", r"\boxed{5+}"),
        ("5", r"\boxed{7 = 5 = 5}"),
        ("5", r"\boxed{\frac{5}{1}"),
        ("x+1", r"\boxed{x + 1 +}"),
        ("x+1", r"\boxed{(x + 1}"),
        ("x+1", r"\boxed{x + 1 + \dots}"),
        # Approximations of numbers that are written exactly.
        ("420", r"\boxed{419.9999999}"),
        ("0.15", r"\boxed{0.1500000001}"),
        # An inequality for what may be an ordered pair; a numeral for its value in another base.
        ("(-2,1)", r"\boxed{-2 < x < 1}"),
        ("17_8", r"\boxed{15}"),
        # A reasoning block's answer.
        ("2", r"<think>so \boxed{2}</think><answer>The answer is 3</answer>"),
        ("2", r"<think>so \boxed{2}"),
    ],
)
def test_attacks_earn_nothing_and_say_why(reward, reference, completion):
    result = score(reward, completion, reference)
    assert result.ok and result.value == 0.0, (result.reason, result.details)
    assert result.reason


# Correct answers in the styles real models write (each scored 0 before).
@pytest.mark.parametrize(
    ("reference", "completion"),
    [
        ("18", "Janet makes 9 * $2 = $18 every day."),
        ("18", "Janet makes $18 a day.\n\nI hope this helps!"),
        ("18", "The answer is 18 (dollars)."),
        ("5", "The answer is 5, not 7."),
        ("C", r"The answer is (C) $\frac{1}{2}$."),
        (r"\frac{1}{2}", "The answer is ½."),
        ("540", "Janet has the rest.\nA: 540"),
        ("540", "Answer: 540"),
        ("540", "ANSWER: 540"),
        ("540", "**Answer:** 540"),
        ("540", "So she keeps 540.\n#### 540"),
        ("540", "Final Answer: The final answer is $540$. I hope it is correct."),
        ("B", "The answer is (B)."),
        ("B", r"\boxed{\textbf{(B)}}"),
        (
            "540",
            "<|channel|>analysis<|message|>maybe 500<|end|><|start|>assistant<|channel|>final<|message|>"
            "The answer is \\boxed{540}.<|return|>",
        ),
        ("540", "reasoning that the template opened</think>\n\nThe answer is $540$."),
        ("10000", r"The total is $\boxed{10{,}000}$."),
        ("15", r"Annika has $15 left. The final answer is: \boxed{\15}"),
        ("4", r"So, Castle bought \boxed{4} more boxes of cereal this week than last week."),
        ("11", r"Tom would have been able to buy \boxed{11} more CDs if he hadn't bought the set."),
        (r"-\frac{24}{25}", r"Therefore, $\cos \angle RPS = -\frac{24}{25}$."),
        ("40", r"Therefore: \[ \text{Volume of the locker} = 20 \times 2 = 40 \text{ cubic inches} \]"),
        ("14", r"Therefore, the final temperature was \(\boxed{14}\) degrees lower than at the start."),
    ],
)
def test_formats_real_models_write(reward, reference, completion):
    result = score(reward, completion, reference)
    assert result.value == 1.0, (result.reason, result.details)


@pytest.mark.parametrize(
    "reference",
    [
        # GSM8K: calculator annotations, "#### N".
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
        # The same solution ending in "A: N", as few-shot prompts write it.
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\nA: 18",
        # MATH: a boxed answer inside the solution.
        r"She sells $16-3-4=9$ eggs, for $9 \cdot 2 = \boxed{18}$ dollars.",
    ],
)
def test_whole_solutions_as_references(reward, reference):
    right, wrong = reward.score(
        [
            Sample(completion=r"So \boxed{18}.", reference=reference),
            Sample(completion=r"So \boxed{9}.", reference=reference),
        ]
    )
    assert (right.value, wrong.value) == (1.0, 0.0)
    assert right.details["reference_answer"] == "18" and right.details["path"] == "fast"


def test_a_conclusion_that_restates_the_givens_answers_with_its_result(reward):
    question = "Charisma meditates 14 hours and does yoga 20 hours in 4 weeks. How many hours in all?"
    completion = r"\[14 + 20 = 34 \text{ hours}\] So, she spends a total of 34 hours on it in 4 weeks."
    assert score(reward, completion, "34", prompt=question).value == 1.0
    # Without the question, or when the other number is no given, a conclusion naming several
    # numbers names no single answer.
    assert score(reward, completion, "34").value == 0.0
    other = "Pears: 17 - 7 = 10.\nTherefore she has 7 apples, 10 pears and 12 plums."
    assert score(reward, other, "10", prompt="She has 17 pears and gives 7 away.").value == 0.0


def test_a_solution_without_an_answer_is_an_invalid_reference(reward):
    long_solution = (
        "We add the numbers.\nThen we think about it a great deal more, at length, in many words.\nDone."
    )
    result = score(reward, r"\boxed{3}", long_solution, id="q-1")
    assert result.status is Status.INVALID_INPUT and "q-1" in result.reason


def test_every_explicit_answer_must_be_the_reference():
    reward = MathAnswerReward(execution="inline")
    agreeing, disagreeing = reward.score(
        [
            Sample(completion="The answer is $\\frac{1}{2}$.\n\nSo, \\boxed{0.5}.", reference="1/2"),
            Sample(completion="The answer is $\\frac{1}{3}$.\n\nSo, \\boxed{0.5}.", reference="1/2"),
        ]
    )
    reward.close()
    assert agreeing.value == 1.0 and agreeing.details["extracted"] == [r"\frac{1}{2}", "0.5"]
    assert disagreeing.value == 0.0 and "2 different answers" in disagreeing.reason


def test_a_real_completion_that_hung_the_old_fast_path_ends_at_once():
    case = json.loads((Path(__file__).parent / "data" / "real_hang.json").read_text())
    reward = MathAnswerReward(execution="inline", use_cas=False)
    started = time.monotonic()
    [result] = reward.score([Sample(completion=case["completion"], reference=case["reference"])])
    elapsed = time.monotonic() - started
    reward.close()
    # The old fast path did not end in 20 s; the bound leaves room for a loaded CI machine.
    assert elapsed < 1.0, elapsed
    assert result.ok and result.value == 0.0


class StallingOnOneSample(MathAnswerReward):
    """A math reward whose reading of one sample never ends (a stand-in for a pathological
    input): defined at module level, so that it pickles to the rule workers."""

    def first_pass(self, sample):
        while sample.completion == "STALL":
            pass
        return super().first_pass(sample)


def test_a_sample_past_its_budget_is_a_timeout_and_the_batch_goes_on():
    reward = StallingOnOneSample(sample_budget_s=0.5, use_cas=False)
    stall = Sample(completion="STALL", reference="1", id="stuck")
    started = time.monotonic()
    results = reward.score([stall, Sample(completion=r"\boxed{1}", reference="1")] * 2)
    elapsed = time.monotonic() - started
    reward.close()
    assert [r.status for r in results] == [Status.TIMEOUT, Status.OK, Status.TIMEOUT, Status.OK]
    assert "stuck" in results[0].reason and "0.5s budget" in results[0].reason
    assert [r.value for r in results[1::2]] == [1.0, 1.0]
    assert elapsed < 10, elapsed
