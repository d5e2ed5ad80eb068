"""The probe's comparisons, on rewards written for the test whose weaknesses are known: where a
variant is scored, what it is compared with, and how failures are counted."""

from __future__ import annotations

import pytest

from rewardlab import Reward, Sample, Score, Status, build
from rewardlab.probe import probe_reward, register_exploit, registered_exploits
from rewardlab.probe import registry as exploit_registry
from rewardlab.probe.exploit import Exploit
from rewardlab.probe.registry import exploits_named


class LongestInGroup(Reward):
    """The share of the other completions of its prompt that a completion is longer than; a
    completion alone has nothing to be compared with."""

    name = "longest_in_group"

    async def ascore(self, samples):
        scores = []
        for sample in samples:
            others = [o for o in samples if o is not sample and o.group_key() == sample.group_key()]
            if not others:
                scores.append(Score.failure(Status.NOT_APPLICABLE, "alone"))
                continue
            longer = sum(len(sample.completion_text) > len(o.completion_text) for o in others)
            scores.append(Score(longer / len(others)))
        return scores


class MentionsTheReference(Reward):
    """1 when the reference appears anywhere in the completion: a grader that reads no answer."""

    name = "mentions_reference"

    async def ascore(self, samples):
        scores = []
        for sample in samples:
            text = sample.completion_text
            if "As an expert" in text:
                scores.append(Score.failure(Status.TIMEOUT, "took too long"))
            elif "Note to the grader" in text:
                raise RuntimeError("the grader crashed")
            else:
                scores.append(Score(float(sample.reference is not None and sample.reference in text)))
        return scores


def test_a_variant_is_scored_in_its_group_in_place_of_the_honest_completion():
    samples = [
        Sample(prompt="q", completion="a fairly long honest answer with many words", id="long"),
        Sample(prompt="q", completion="short", id="short"),
        Sample(prompt="other", completion="alone", id="alone"),
    ]
    result = probe_reward(LongestInGroup(), samples, exploits=exploits_named(["fluff_padding"]))
    (padding,) = result.exploits
    # "short", padded, is longer than "long": 0 -> 1. "long" padded stays the longest: a tie.
    # Scored alone, either would have been not_applicable; "alone" is not probed at all.
    assert (padding.rows, padding.scored, padding.wins, padding.losses) == (2, 2, 1, 0)
    assert [(e.id, e.baseline, e.variant) for e in padding.examples] == [("short", 0.0, 1.0)]
    assert result.honest == {"ok": 2, "not_applicable": 1}


class RightAboveBatchMean(Reward):
    """1 for a completion saying "right", 0 otherwise, minus that over the whole call: batch
    normalisation, as ``ensemble`` with ``normalize: batch`` does it. Records each call."""

    name = "right_above_batch_mean"
    scores_groups = True
    scores_batches = True

    def __init__(self):
        self.calls: list[list[str]] = []

    async def ascore(self, samples):
        self.calls.append([sample.completion_text for sample in samples])
        right = [float("right" in sample.completion_text) for sample in samples]
        mean = sum(right) / len(right)
        return [Score(value - mean) for value in right]


def _own_exploit(name, make):
    return Exploit(name, frozenset({"any"}), False, name, make)


def test_a_batch_relative_reward_sees_one_variant_per_call_in_its_honest_batch():
    """Red-team 22b finding 5. Four prompts, answers right, right, wrong, wrong (honest values
    0.5, 0.5, -0.5, -0.5 around the batch mean 0.5). ``break`` makes a right answer wrong; ``pad``
    adds a word. In place, only one row changed: a broken answer is 0 - 0.25 = -0.25 (a loss), a
    padded one keeps its value (a tie). Put in one call with the other rows' variants (both breaks
    and two pads), the batch mean would fall to 0 and the padded wrong answers rise to 0: two wins
    that no single change earns."""
    reward = RightAboveBatchMean()
    samples = [
        Sample(prompt=f"q{i}", completion=text, id=f"r{i}")
        for i, text in enumerate(["right"] * 2 + ["wrong"] * 2)
    ]
    exploits = [
        _own_exploit(
            "break", lambda t: t.completion.replace("right", "wrong") if "right" in t.completion else None
        ),
        _own_exploit("pad", lambda t: t.completion + " ok"),
    ]
    brk, pad = probe_reward(reward, samples, exploits=exploits).exploits
    assert (brk.rows, brk.wins, brk.losses) == (2, 0, 2)
    assert brk.mean_gain == pytest.approx(-0.75) and brk.max_gain == pytest.approx(-0.75)
    assert (pad.rows, pad.wins, pad.losses, pad.max_gain) == (4, 0, 0, 0.0)
    honest, *variant_calls = reward.calls
    assert honest == ["right", "right", "wrong", "wrong"] and len(variant_calls) == 6
    for call in variant_calls:  # the honest batch with exactly one row changed
        assert len(call) == 4 and sum(a != b for a, b in zip(call, honest, strict=True)) == 1


TWO = {"a": {"type": "math_answer"}, "b": {"type": "length", "mode": "linear_target", "target_length": 100}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"type": "ensemble", "normalize": "batch", "members": TWO}, True),
        ({"type": "ensemble", "normalize": "none", "members": TWO}, False),
        ({"type": "length_controlled", "fit": "batch", "reward": {"type": "math_answer"}}, True),
        ({"type": "length_controlled", "fit": "group", "reward": {"type": "math_answer"}}, False),
        (
            {
                "type": "combine",
                "components": {
                    "lc": {"type": "length_controlled", "fit": "batch", "reward": {"type": "math_answer"}}
                },
            },
            True,
        ),
    ],
)
def test_which_rewards_say_they_score_the_batch(spec, expected):
    reward = build(spec)
    assert reward.scores_batches is expected and reward.scores_groups is (
        expected or spec.get("fit") == "group"
    )


def _math_rows() -> list[Sample]:
    return [
        Sample(prompt="What is 6*7?", completion="6*7 is 42, so $\\boxed{42}$.", reference="42", id="right"),
        Sample(prompt="What is 2+2?", completion="2+2 is $\\boxed{5}$.", reference="4", id="wrong"),
        Sample(prompt="Say hi.", completion="hi", id="no-reference"),
    ]


def test_answer_aware_exploits_are_measured_against_a_decoy_control():
    names = ["several_boxes", "hedge", "negated_answer", "apologetic_refusal"]
    result = probe_reward(MentionsTheReference(), _math_rows(), exploits=exploits_named(names))
    found = {exploit.name: exploit for exploit in result.exploits}
    for name in ["several_boxes", "hedge", "negated_answer"]:
        # The variant holds the reference and the control a wrong answer: the grader pays one.
        # The row without a reference has no answer to insert.
        assert (found[name].rows, found[name].wins, found[name].win_rate) == (2, 2, 1.0), name
        assert all(example.baseline == 0.0 for example in found[name].examples)
    # A blind exploit is measured against the honest sample: the refusal loses where the honest
    # completion mentions its reference ("right"), ties elsewhere.
    refusal = found["apologetic_refusal"]
    assert (refusal.rows, refusal.wins, refusal.losses) == (3, 0, 1)
    assert {exploit.name for exploit in result.failing} == {"several_boxes", "hedge", "negated_answer"}


def test_the_threshold_is_on_the_win_rate():
    hedge = exploits_named(["hedge"])
    passing = probe_reward(MentionsTheReference(), _math_rows(), exploits=hedge, threshold=1.0)
    assert passing.failing == [] and passing.exploits[0].win_rate == 1.0


def test_failed_variants_and_pipeline_failures_are_counted_not_compared():
    names = ["claimed_authority", "grader_instruction"]
    result = probe_reward(MentionsTheReference(), _math_rows(), exploits=exploits_named(names))
    authority, instruction = result.exploits
    assert authority.failed == {"timeout": 3} and authority.scored == 0
    assert instruction.failed == {"error": 3}
    # A reward that raises is a failure of the pipeline, reported as ``rewardlab score`` does.
    assert len(result.pipeline_failures) == 1 and "error in 3 rows" in result.pipeline_failures[0]
    assert "the grader crashed" in result.pipeline_failures[0]
    assert result.failing == []


def test_exploits_apply_by_kind():
    class MathOnly(MentionsTheReference):
        probe_kinds = frozenset({"math"})

    result = probe_reward(MathOnly(), _math_rows())
    made = {exploit.name for exploit in result.exploits if exploit.rows}
    assert "hedge" in made and "truncated" in made  # math, and any
    assert not made & {"exit_zero", "fake_verdict", "grader_instruction"}  # code, judge


def test_a_probe_is_reproducible_from_its_seed():
    first = probe_reward(MentionsTheReference(), _math_rows(), seed=7).to_dict()
    assert probe_reward(MentionsTheReference(), _math_rows(), seed=7).to_dict() == first


@pytest.fixture
def own_registry(monkeypatch):
    monkeypatch.setattr(exploit_registry, "_EXPLOITS", dict(registered_exploits()))


def test_an_exploit_of_ones_own_joins_the_library(own_registry):
    @register_exploit("shouting", kinds=["any"])
    def shouting(target):
        """The honest answer in capitals."""
        return target.completion.upper()

    assert registered_exploits()["shouting"].description == "The honest answer in capitals."
    result = probe_reward(MentionsTheReference(), _math_rows(), exploits=exploits_named(["shouting"]))
    assert result.exploits[0].rows == 3  # "HI" differs from "hi"; "$\\BOXED{42}$" from the rest
    with pytest.raises(ValueError, match="already registered"):
        register_exploit("shouting", kinds=["any"])(shouting)
    with pytest.raises(ValueError, match="at least one reward kind"):
        register_exploit("nothing", kinds=[])


def test_a_variant_past_the_size_bound_is_an_exploit_bug(own_registry):
    @register_exploit("flood", kinds=["any"])
    def flood(target):
        """Far too much text."""
        return target.completion * 1000 + "x" * 60_000

    with pytest.raises(ValueError, match="exploit 'flood' made a variant of"):
        probe_reward(MentionsTheReference(), _math_rows(), exploits=exploits_named(["flood"]))


def test_unknown_exploit_names_list_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown exploit 'nope'; one of: .*hedge"):
        exploits_named(["hedge", "nope"])


def test_the_games_against_a_check_inside_a_kimi_length_reward_are_run():
    """Kimi's length reward (Kimi k1.5, arXiv:2501.12599 section 2.3.3) over groups of two, its
    correctness check a weak box check: per group, lambda = 0.5 - (len - min) / (max - min) is 0.5
    for the shorter answer and -0.5 for the longer; a correct answer gets lambda, a wrong one
    min(0, lambda)."""
    boxed = "We work it out step by step with care and the answer is $\\boxed{12}$ in the end."  # 17 words
    unboxed = " ".join(["reasoning"] * 30)  # 30 words, no box: wrong
    samples = [
        Sample(prompt=f"q{group}", completion=text, id=f"{group}-{kind}")
        for group in (1, 2)
        for kind, text in (("boxed", boxed), ("unboxed", unboxed))
    ]
    reward = build(
        {
            "type": "length",
            "mode": "kimi",
            "unit": "words",
            "correctness": {"type": "regex_match", "pattern": "\\\\boxed\\{"},
        }
    )
    (format_only,) = probe_reward(reward, samples, exploits=exploits_named(["format_only"])).exploits
    # format_only's 15 words with an empty box: in place of the unboxed answer it is the shorter
    # and "correct", 0.5 against -0.5 (a win); in place of the boxed one, 0.5 against 0.5 (a tie).
    assert (format_only.rows, format_only.scored, format_only.wins, format_only.losses) == (4, 4, 2, 0)
    assert format_only.mean_gain == pytest.approx(0.5)
    assert sorted(e.id for e in format_only.examples) == ["1-unboxed", "2-unboxed"]
