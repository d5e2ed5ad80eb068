"""What the probe tells exploits about a row (answer, decoys, options, rubric), and which exploits
apply to which reward."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rewardlab import Reward, Sample, Score, build
from rewardlab.probe import BUILTIN_KINDS, registered_exploits
from rewardlab.probe.kinds import ALL_KINDS, LOOKED_THROUGH, declared_kinds, sample_kinds, scoring_rewards
from rewardlab.probe.targets import choices_of, criteria_of, decoys_for, gold_answer
from rewardlab.rewards.math.reward import fast_verdict
from rewardlab.rewards.registry import BUILTIN_REWARDS

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "reward.yaml"


def test_the_gold_answer_of_a_whole_solution_is_its_boxed_answer():
    solution = "We add 2 and 3 to get 5. So the total is $\\boxed{5}$."
    assert gold_answer(Sample(reference=solution)) == "5"
    assert gold_answer(Sample(reference="\\frac{3}{8}")) == "\\frac{3}{8}"
    assert gold_answer(Sample()) is None


@pytest.mark.parametrize("gold", ["42", "-3", "0.75", "5 cm", "1\\frac{1}{10}", "10{,}000"])
def test_numeric_decoys_are_wrong_answers_of_the_same_shape(gold):
    decoys = decoys_for(gold, pool=[], rng=random.Random(0))
    assert len(decoys) == 3 and len(set(decoys)) == 3
    for decoy in decoys:
        assert fast_verdict(gold, decoy)[0] is False, decoy
        # Only the leading number moved: the rest of the answer is the same.
        assert decoy.lstrip("-0123456789.") == gold.lstrip("-0123456789.")


def test_other_decoys_come_from_the_other_rows_answers():
    pool = ["\\frac{3}{8}", "x^2", "\\sqrt{2}", "\\pi"]
    decoys = decoys_for("\\pi", pool, random.Random(0))
    assert set(decoys) == {"\\frac{3}{8}", "x^2", "\\sqrt{2}"}
    assert decoys_for("\\pi", ["\\pi"], random.Random(0)) == ()


def test_choices_come_from_a_field_or_from_the_prompt():
    assert choices_of(Sample(fields={"choices": ["red", "green", "blue"]})) == ("A", "B", "C")
    assert choices_of(Sample(fields={"options": {"A": "x", "B": "y"}})) == ("A", "B")
    prompt = "Which is prime?\n(A) 4\n(B) 6\n(C) 7\n(D) 9"
    assert choices_of(Sample(prompt=prompt)) == ("A", "B", "C", "D")
    assert choices_of(Sample(prompt="A. yes\nB. no\n")) == ("A", "B")
    assert choices_of(Sample(prompt="Point (A) lies on the line.")) == ()


def test_rubric_criteria_come_from_the_config_or_the_sample():
    config = {
        "type": "rubric",
        "rubric": [{"text": "Answers the question", "category": "essential"}],
        "backend": {"type": "http", "base_url": "http://127.0.0.1:9", "model": "m"},
    }
    reward = build(config)
    assert [c.text for c in criteria_of(reward, Sample())] == ["Answers the question"]
    own = {"rubric": [{"text": "Mentions the sea", "weight": 2}]}
    assert [c.text for c in criteria_of(reward, Sample(fields=own))] == ["Mentions the sea"]
    assert criteria_of(build({"type": "math_answer"}), Sample()) == ()


def test_routes_and_combinations_are_looked_through():
    reward = build(str(EXAMPLE_CONFIG))
    try:
        assert sample_kinds(reward, Sample(fields={"data_source": "math"})) == {"math"}
        assert sample_kinds(reward, Sample(fields={"data_source": "chat"})) == {"judge", "rubric"}
        assert sample_kinds(reward, Sample(fields={"data_source": "json"})) == {"format"}
        assert sample_kinds(reward, Sample(fields={"data_source": "poetry"})) is None
        assert sample_kinds(reward, Sample()) is None
        math_leaves = scoring_rewards(reward, Sample(fields={"data_source": "math"}))
        # The gate is a leaf too: what it reads decides whether the others count.
        assert sorted(leaf.name for leaf in math_leaves) == [
            "accuracy",
            "math_answer",
            "overlong",
            "repetition",
        ]
    finally:
        reward.close()


class _Unknown(Reward):
    async def ascore(self, samples):
        return [Score(0.0) for _ in samples]


class _Declared(_Unknown):
    probe_kinds = frozenset({"math"})


class _Wrapper(_Unknown):
    def __init__(self, *inner: Reward):
        self.inner = list(inner)


def test_a_reward_that_does_not_say_gets_every_exploit_and_one_that_does_gets_its_own():
    assert declared_kinds(_Unknown()) == ALL_KINDS
    assert declared_kinds(_Declared()) == {"math"}
    assert scoring_rewards(_Wrapper(_Declared(), _Unknown()), Sample())[0].probe_kinds == {"math"}  # type: ignore[attr-defined]
    assert sample_kinds(_Wrapper(_Declared()), Sample()) == {"math"}
    targeted = {name for name, e in registered_exploits().items() if e.targets(declared_kinds(_Declared()))}
    assert "hedge" in targeted and "fluff_padding" in targeted and "exit_zero" not in targeted


def test_every_builtin_reward_has_kinds_chosen_for_it():
    """A new built-in reward must be placed here on purpose (or it would get every exploit)."""
    assert set(BUILTIN_KINDS) | LOOKED_THROUGH == set(BUILTIN_REWARDS) - {"remote"}
    assert not set(BUILTIN_KINDS) & LOOKED_THROUGH


WEAK_BOX = {"type": "regex_match", "pattern": "\\\\boxed\\{"}


def test_a_reward_with_kinds_of_its_own_is_looked_through_to_the_rewards_it_holds():
    # Kimi's length reward pays a short answer only when its correctness check passes: the games
    # against that check are games against it. Without a check it is a shaping term: no kind.
    kimi = build({"type": "length", "mode": "kimi", "unit": "words", "correctness": WEAK_BOX})
    assert sample_kinds(kimi, Sample()) == {"format", "math"}
    assert [leaf.name for leaf in scoring_rewards(kimi, Sample())] == ["length", "regex_match"]
    assert sample_kinds(build({"type": "length", "mode": "kimi", "unit": "words"}), Sample()) == frozenset()
    # The same inside a combination, and for a reward of one's own that says its kinds.
    combined = build(
        {
            "type": "combine",
            "components": {"brevity": {"type": "length", "mode": "kimi", "correctness": WEAK_BOX}},
        }
    )
    assert sample_kinds(combined, Sample()) == {"format", "math"}

    class JudgeWithCheck(_Declared):
        probe_kinds = frozenset({"judge"})

        def __init__(self, check: Reward):
            self.check = check

    assert sample_kinds(JudgeWithCheck(_Declared()), Sample()) == {"judge", "math"}
