"""Monte-Carlo step labels. The label arithmetic against a scripted continuer whose finished
solutions are known; the real `LocalContinuer` on a tiny Llama (shapes, reproducibility, cut
continuations); `BackendContinuer` against a scripted server (what it sends) and the real local
server (end to end); and the export to TRL's stepwise format, loaded as a `datasets.Dataset`."""

import asyncio

import pytest

from rewardlab import Sample, Status, build
from rewardlab.prm.continuers import BackendContinuer, Continuation, LocalContinuer
from rewardlab.prm.models import LoadedModel
from rewardlab.prm.monte_carlo import MonteCarloStepReward, stepwise_rows
from rewardlab.testing import Reply

SOLUTION = "2 + 2 = 4.\n\nThen 4 * 3 = 13.\n\nSo the answer is \\boxed{13}."


class Scripted:
    """Finishes a prefix with the answer 12 unless the prefix already holds the mistake "= 13"
    - then sometimes (every third continuation) the solver notices and fixes it, and the others
    run out of tokens before an answer."""

    def __init__(self):
        self.calls = []

    async def continuations(self, prompt, prefix, n):
        self.calls.append((prompt, prefix, n))
        if "= 13" not in prefix:
            return [Continuation(" ... \\boxed{12}")] * n
        return [
            Continuation(" wait, 4 * 3 = 12, \\boxed{12}") if i % 3 == 0 else Continuation(" so", cut=True)
            for i in range(n)
        ]


def test_soft_and_hard_labels_and_the_first_error():
    continuer = Scripted()
    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=continuer, n=6)
    (score,) = reward.score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12")])
    # Step 1 always finishes at 12; after step 2, 2 of 6 continuations recover; the last step's
    # label is the solution's own answer (13: wrong), graded without continuing it.
    assert score.steps == pytest.approx([1.0, 2 / 6, 0.0])
    assert score.details["hard_labels"] == [True, True, False]
    assert score.details["first_error"] == 2 and score.value == 0.0
    assert score.details["cut_continuations"] == [0, 4, 0]
    # Each prefix is the policy's own text up to the step's end, with the whitespace after it.
    assert [prefix for _, prefix, _ in continuer.calls] == [
        SOLUTION[: SOLUTION.index("Then")],
        SOLUTION[: SOLUTION.index("So")],
    ]
    assert all(n == 6 for _, _, n in continuer.calls)
    reward.close()


def test_stepwise_rows_load_as_a_trl_dataset():
    from datasets import Dataset

    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=Scripted(), n=3)
    samples = [
        Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12"),
        Sample(prompt="x", completion=""),
    ]
    scores = reward.score(samples)
    assert scores[1].status is Status.INVALID_INPUT
    rows = stepwise_rows(samples, scores)
    dataset = Dataset.from_list(rows)
    assert dataset.column_names == ["prompt", "completions", "labels"] and len(dataset) == 1
    assert dataset[0]["completions"][1] == "Then 4 * 3 = 13."
    assert dataset[0]["labels"] == [True, True, False]
    assert stepwise_rows(samples, scores, soft=True)[0]["labels"] == pytest.approx([1.0, 1 / 3, 0.0])


def test_the_local_continuer_samples_reproducibly(tiny_causal_lm, tiny_tokenizer):
    loaded = LoadedModel(tiny_causal_lm.eval(), tiny_tokenizer, "tiny")
    continuer = LocalContinuer(loaded, max_tokens=5, temperature=1.0)

    def sample(prefix):
        return asyncio.run(continuer.continuations("Q: ", prefix, 4))

    first = sample("step one\n\n")
    assert len(first) == 4 and all(isinstance(c.text, str) for c in first)
    assert sample("step one\n\n") == first  # seeded by prompt and prefix
    assert sample("step two\n\n") != first
    # Cut: stopped at the 5-token limit. A model that cannot end is always cut; one whose
    # every token ends it never is.
    config = tiny_causal_lm.generation_config
    config.suppress_tokens = [tiny_tokenizer.eos_token_id]
    assert all(c.cut for c in sample("step three\n\n"))
    config.suppress_tokens, config.eos_token_id = None, list(range(len(tiny_tokenizer)))
    assert not any(c.cut for c in sample("step three\n\n"))
    config.eos_token_id = None
    reward = build(
        {"type": "monte_carlo_steps", "verifier": {"type": "regex_match", "pattern": "zzzz"}, "n": 2}
    )
    reward.continuer = continuer
    (score,) = reward.score([Sample(prompt="Q: ", completion="a\n\nb")])
    assert score.ok and score.steps == [0.0, 0.0] and score.details["first_error"] == 0


def test_the_backend_continuer_continues_the_assistant_message(scripted):
    def answer(body):
        # The policy runs out of tokens on even seeds.
        return Reply(text=" \\boxed{12}", finish_reason="length" if body["seed"] % 2 == 0 else "stop")

    scripted.default = answer
    continuer = {
        "backend": {"type": "openai", "base_url": scripted.url, "model": "policy"},
        "client": {"cache": None},
    }
    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=continuer, n=3)
    assert isinstance(reward.continuer, BackendContinuer)
    (score,) = reward.score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12")])
    assert score.ok, score.reason
    assert score.steps == pytest.approx([1.0, 1.0, 0.0])
    bodies = scripted.requests
    assert len(bodies) == 6  # three per step, and none for the last step
    for body in bodies:
        assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
        assert body["messages"][0] == {"role": "user", "content": "2 + 2, times 3?"}
        assert body["messages"][-1]["role"] == "assistant"
        assert SOLUTION.startswith(body["messages"][-1]["content"])
    assert len({body["seed"] for body in bodies}) == 6
    expected_cut = [sum(b["seed"] % 2 == 0 for b in bodies[i : i + 3]) for i in (0, 3)]
    assert score.details["cut_continuations"] == [*expected_cut, 0]
    assert score.usage.completion_tokens >= 6 * 5  # the scripted server reports 5 per call
    reward.close()


def test_the_backend_continuer_fails_the_sample_when_the_policy_fails(scripted):
    # Step 1's two continuations are answered; step 2's first is refused.
    scripted.script(Reply(text=" \\boxed{12}"), Reply(text=" \\boxed{12}"), Reply(status=400))
    scripted.default = Reply(text=" \\boxed{12}")
    continuer = {
        "backend": {"type": "openai", "base_url": scripted.url, "model": "policy"},
        "client": {"cache": None},
    }
    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=continuer, n=2)
    (score,) = reward.score([Sample(prompt="q", completion=SOLUTION, reference="12")])
    assert score.status is Status.BACKEND_ERROR and "step 2: continuing failed" in score.reason
    assert "400" in score.reason
    # Every answered call is charged: step 1's two and step 2's other one (5 tokens each).
    assert score.usage.completion_tokens == 3 * 5
    reward.close()


def test_monte_carlo_labels_through_the_real_local_server(local_server):
    continuer = {
        "backend": {"type": "openai", "base_url": local_server, "model": "smollm2"},
        "client": {"cache": None},
        "max_tokens": 12,
    }
    reward = build(
        {"type": "monte_carlo_steps", "verifier": {"type": "math_answer"}, "continuer": continuer, "n": 2}
    )
    (score,) = reward.score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12")])
    assert score.ok, score.reason
    assert len(score.steps) == 3 and all(0.0 <= value <= 1.0 for value in score.steps)
    assert score.steps[-1] == 0.0  # the solution's own answer, 13, is wrong
    assert all(0 <= cut <= 2 for cut in score.details["cut_continuations"])
    assert score.usage.completion_tokens > 0
    reward.close()


def test_a_synchronous_continuer_of_strings_works_and_a_bad_answer_fails_one_sample():
    class Plain:
        def continuations(self, prompt, prefix, n):
            return [" \\boxed{12}"] * n

    class Broken:
        def continuations(self, prompt, prefix, n):
            return ["only one"]

    class NotText:
        def continuations(self, prompt, prefix, n):
            return [1] * n

    sample = Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12")
    plain = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=Plain(), n=2)
    (score,) = plain.score([sample])
    assert score.steps == pytest.approx([1.0, 1.0, 0.0])
    broken = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=Broken(), n=2)
    scores = broken.score([sample, Sample(prompt="x", completion="")])
    assert scores[0].status is Status.ERROR and "must return 2 Continuations" in scores[0].reason
    assert scores[1].status is Status.INVALID_INPUT
    not_text = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=NotText(), n=2)
    (score,) = not_text.score([sample])
    assert score.status is Status.ERROR and "must return 2 Continuations" in score.reason
    with pytest.raises(ValueError, match=r"continuer: .*continuations\(prompt, prefix, n\) method"):
        MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=object())
    with pytest.raises(ValueError, match=r"continuer.max_new_tokens: unknown option; accepted .*max_tokens"):
        MonteCarloStepReward(verifier={"type": "math_answer"}, continuer={"max_new_tokens": 3})


def test_a_chat_prompt_reaches_the_served_policy_whole(scripted):
    scripted.default = Reply(text=" \\boxed{12}")
    continuer = {
        "backend": {"type": "openai", "base_url": scripted.url, "model": "p"},
        "client": {"cache": None},
    }
    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=continuer, n=1)
    prompt = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "2 + 2, times 3?"}]
    (score,) = reward.score([Sample(prompt=prompt, completion=SOLUTION, reference="12")])
    assert score.ok, score.reason
    assert scripted.requests[0]["messages"][:2] == prompt
    reward.close()


def test_a_policy_that_cannot_continue_is_refused_when_built():
    with pytest.raises(ValueError, match="cannot continue an assistant message"):
        MonteCarloStepReward(
            verifier={"type": "math_answer"},
            continuer={"backend": {"type": "openai", "model": "gpt-4o-mini"}},
        )
