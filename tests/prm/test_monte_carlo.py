"""Monte-Carlo step labels. The label arithmetic against a scripted continuer whose finished
solutions are known; the real `LocalContinuer` on a tiny Llama (shapes, reproducibility); and
the export to TRL's stepwise format, loaded as a `datasets.Dataset`."""

import pytest

from rewardlab import Sample, Status, build
from rewardlab.prm.models import LoadedModel
from rewardlab.prm.monte_carlo import LocalContinuer, MonteCarloStepReward, stepwise_rows

SOLUTION = "2 + 2 = 4.\n\nThen 4 * 3 = 13.\n\nSo the answer is \\boxed{13}."


class Scripted:
    """Finishes a prefix with the answer 12 unless the prefix already holds the mistake "= 13"
    - then sometimes (every third continuation) the solver notices and fixes it."""

    def __init__(self):
        self.calls = []

    def continuations(self, prompt, prefix, n):
        self.calls.append((prompt, prefix, n))
        if "= 13" not in prefix:
            return [" ... \\boxed{12}"] * n
        if "boxed{13}" in prefix:
            return [""] * n
        return [" wait, 4 * 3 = 12, \\boxed{12}" if i % 3 == 0 else " \\boxed{13}" for i in range(n)]


def test_soft_and_hard_labels_and_the_first_error():
    continuer = Scripted()
    reward = MonteCarloStepReward(verifier={"type": "math_answer"}, continuer=continuer, n=6)
    (score,) = reward.score([Sample(prompt="2 + 2, times 3?", completion=SOLUTION, reference="12")])
    # Step 1 always finishes at 12; after step 2, 2 of 6 continuations recover; the last step's
    # label is the solution's own answer (13: wrong), graded without continuing it.
    assert score.steps == pytest.approx([1.0, 2 / 6, 0.0])
    assert score.details["hard_labels"] == [True, True, False]
    assert score.details["first_error"] == 2 and score.value == 0.0
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
    continuer = LocalContinuer(loaded, max_new_tokens=5, temperature=1.0)
    first = continuer.continuations("Q: ", "step one\n\n", 4)
    assert len(first) == 4 and all(isinstance(text, str) for text in first)
    assert continuer.continuations("Q: ", "step one\n\n", 4) == first  # seeded by prompt and prefix
    assert continuer.continuations("Q: ", "step two\n\n", 4) != first
    reward = build(
        {"type": "monte_carlo_steps", "verifier": {"type": "regex_match", "pattern": "zzzz"}, "n": 2}
    )
    reward.continuer = continuer
    (score,) = reward.score([Sample(prompt="Q: ", completion="a\n\nb")])
    assert score.ok and score.steps == [0.0, 0.0] and score.details["first_error"] == 0
