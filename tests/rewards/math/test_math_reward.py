import asyncio
import pickle
import threading
import time

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


def test_references_in_solution_and_gsm8k_form(reward):
    assert score(reward, "\\boxed{18}", "Janet sells 9 eggs... she makes $18.\n#### 18").value == 1.0
    assert score(reward, "\\boxed{18}", r"So she makes $\boxed{18}$ dollars.").value == 1.0


def test_no_answer_is_an_ok_zero_and_missing_reference_is_invalid(reward):
    no_answer = score(reward, "I am not sure how to go on with this one, it is hard, " * 4, "5")
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
