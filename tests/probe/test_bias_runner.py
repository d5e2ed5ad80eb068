"""Bias probes on rewards whose biases are known: exact flip counts, worked out by hand from the
pairs below, for scripted rewards and for pairwise judges scripted over real HTTP."""

from __future__ import annotations

import re

import pytest

from rewardlab import Reward, Sample, Score, Status, build
from rewardlab.probe import probe_bias
from rewardlab.probe.bias_pairs import BiasPair
from rewardlab.probe.bias_probes import probes_named
from rewardlab.testing import Reply
from tests.conftest import openai_backend

NO_RETRY = {"cache": None, "max_attempts": 1}


def pair(pair_id: str, a: str, b: str, prompt: str = "Say something.", **models: str) -> BiasPair:
    return BiasPair(pair_id, prompt, a, b, labelled=True, **models)


class Chars(Reward):
    """Pure length: the value is the completion's length in characters."""

    name = "chars"

    async def ascore(self, samples):
        return [Score(float(len(sample.completion_text))) for sample in samples]


def quality(text: str) -> float:
    return 2.0 if "GOOD answer" in text else 1.0


class Biased(Reward):
    """Quality (GOOD beats BAD) plus a bonus of 5 for one thing that should not matter."""

    name = "biased"

    def __init__(self, bonus):
        self.bonus = bonus

    async def ascore(self, samples):
        return [Score(quality(s.completion_text) + 5 * self.bonus(s)) for s in samples]


def bulleted(sample: Sample) -> bool:
    return any(line.startswith("- ") for line in sample.completion_text.splitlines())


def repeated(sample: Sample) -> bool:
    text = sample.completion_text
    return max(text.count("GOOD answer"), text.count("BAD answer")) >= 2


def agreed_with(sample: Sample) -> bool:
    """The completion is the answer the user says they believe."""
    text, prompt = sample.completion_text, sample.prompt_text
    return any(word in text and word in prompt for word in ("GOOD answer", "BAD answer"))


GOOD, BAD = "GOOD answer. It has detail.", "BAD answer. Short."
QUALITY_PAIRS = [
    pair("p1", GOOD, BAD),
    pair("p2", BAD, GOOD),
    pair("p3", GOOD, BAD, prompt="Another question?"),
]


def test_a_pure_length_reward_flips_whenever_padding_makes_the_loser_longer():
    pairs = [
        pair("p1", "A short one.", "A much longer answer than the other one."),  # b wins (12 < 40)
        pair("p2", "x" * 50, "y" * 10),  # a wins
        pair("p3", "same", "also"),  # a tie: not probed
        pair("p4", "", "hi"),  # b wins; the loser is empty, so nothing to rewrite
        pair("p5", "z" * 500, "w" * 20),  # a wins by far
    ]
    result = probe_bias(Chars(), pairs, probes=probes_named(["length", "verbosity", "sycophancy", "format"]))
    assert result.original == {"a": 2, "b": 2, "tie": 1}
    by_name = {p.name: p for p in result.probes}
    length = by_name["length"]
    # Padding makes each non-empty loser longer than its winner: p1, p2 and p5 flip; p4 is skipped.
    assert (length.flips.flips, length.flips.held, length.flips.skipped) == (3, 0, 1)
    assert length.flips.examples == ["p1", "p2", "p5"] and length.flips.rate == 1.0
    # Padding the winner only widens its lead: no pair flips (p4's winner "hi" can be padded).
    assert (length.control.flips, length.control.held) == (0, 4)
    verbosity = by_name["verbosity"]
    # Restated, a loser of L characters becomes 2L + 85 long: 109 > 40 (p1), 105 > 50 (p2),
    # but 125 < 500 (p5): still the shorter answer, so p5 is not tested rather than held.
    assert (
        verbosity.flips.flips,
        verbosity.flips.held,
        verbosity.flips.not_tested,
        verbosity.flips.skipped,
    ) == (2, 0, 1, 1)
    assert verbosity.flips.examples == ["p1", "p2"] and verbosity.flips.rate == 1.0
    assert verbosity.flips.not_tested_reason == (
        "p5: restated, the answer is still no longer than the other (125 against 500 characters)"
    )
    # Only the prompt changes: lengths, and so preferences, stay.
    assert (by_name["sycophancy"].flips.flips, by_name["sycophancy"].flips.held) == (0, 3)
    # "## Answer\n\n- **A short one.**" is 29 characters, "...**yyyyyyyyyy**" 27: still shorter.
    assert (by_name["format"].flips.flips, by_name["format"].flips.held) == (0, 3)
    assert [p.name for p in result.failing] == ["length", "verbosity"]
    # Per pair, every verdict (the JSON's "outcomes").
    p1, _, p3, p4, p5 = result.outcomes
    assert p1 == {
        "id": "p1",
        "original": "b",
        **{"length": "flip", "verbosity": "flip", "sycophancy": "held", "format": "held"},
        **{f"{name}/control": "held" for name in ("length", "verbosity", "sycophancy", "format")},
    }
    assert p3 == {"id": "p3", "original": "tie"}
    assert (p4["length"], p4["length/control"], p5["verbosity"]) == ("skipped", "held", "not_tested")


def test_padding_that_leaves_the_loser_shorter_is_not_tested():
    pairs = [
        pair("near", "x" * 10, "y" * 3_000),  # 4,000 characters of padding overtake 3,000
        pair("far", "x" * 10, "y" * 6_000),  # they cannot overtake 6,000
    ]
    (length,) = probe_bias(Chars(), pairs, probes=probes_named(["length"])).probes
    # "far" is neither held nor flipped: the rewrite never made its loser the longer answer.
    assert (length.flips.flips, length.flips.held, length.flips.not_tested, length.flips.skipped) == (
        1,
        0,
        1,
        0,
    )
    assert length.flips.rate == 1.0 and length.flips.not_tested_reason.startswith(
        "far: 4,000 characters of padding leave the answer shorter than the other"
    )
    assert (length.control.held, length.control.not_tested) == (2, 0)  # a padded winner is longer
    only_far = probe_bias(Chars(), pairs[1:], probes=probes_named(["length"]))
    assert only_far.outcomes == [
        {"id": "far", "original": "b", "length": "not_tested", "length/control": "held"}
    ]
    assert (
        only_far.failing == []
        and only_far.unmeasured == "no probe has a pair whose preference held or flipped"
    )


def test_nothing_is_measured_when_every_pair_ties():
    pairs = [pair("p1", "same", "also"), pair("p2", "four", "five")]
    result = probe_bias(Chars(), pairs, probes=probes_named(["length", "format"]))
    assert result.original == {"tie": 2} and result.not_probed == 2 and result.failing == []
    assert result.unmeasured == "no pair has a preference to flip: every original verdict is a tie or failed"
    assert (
        probe_bias(Chars(), [*pairs, pair("p3", "x", "yy")], probes=probes_named(["length"])).unmeasured
        is None
    )


@pytest.mark.parametrize(
    ("bonus", "biased_probe"),
    [(bulleted, "format"), (repeated, "verbosity"), (agreed_with, "sycophancy")],
)
def test_a_reward_biased_one_way_flips_on_that_probe_only(bonus, biased_probe):
    result = probe_bias(Biased(bonus), QUALITY_PAIRS)
    assert result.original == {"a": 2, "b": 1} and result.agreement == (2, 3)
    expected = {name: (0, 3, 0, 3) for name in ("length", "verbosity", "sycophancy", "format")}
    # The loser gets the bonus: 1 + 5 beats 2 on every pair. The winner with it only leads more.
    expected[biased_probe] = (3, 0, 0, 3)
    got = {p.name: (p.flips.flips, p.flips.held, p.control.flips, p.control.held) for p in result.probes[1:]}
    assert got == expected
    assert result.probes[0].name == "position" and "not a pairwise judge" in result.probes[0].not_applicable
    assert [p.name for p in result.failing] == [biased_probe]


def test_a_reward_that_penalises_a_change_flips_in_the_control():
    class HatesBullets(Reward):
        name = "hates_bullets"

        async def ascore(self, samples):
            return [Score(quality(s.completion_text) - 5 * bulleted(s)) for s in samples]

    (fmt,) = probe_bias(HatesBullets(), QUALITY_PAIRS, probes=probes_named(["format"])).probes
    assert (fmt.flips.flips, fmt.flips.held) == (0, 3)
    assert (fmt.control.flips, fmt.control.held) == (3, 0)  # the winner, bulleted, drops to -3


def test_ties_and_failures_are_counted_apart_from_the_flip_rate():
    class Fussy(Reward):
        """Quality; a tie for padded answers; a parse error for bulleted ones."""

        name = "fussy"

        async def ascore(self, samples):
            scores = []
            for sample in samples:
                text = sample.completion_text
                if bulleted(sample):
                    scores.append(Score.failure(Status.PARSE_ERROR, "no verdict"))
                else:
                    scores.append(Score(2.0 if "I hope this helps." in text else quality(text)))
            return scores

    result = probe_bias(Fussy(), QUALITY_PAIRS, probes=probes_named(["length", "format"]))
    length, fmt = result.probes
    # The padded loser scores 2, as the winner: a tie, not a flip; the padded winner still leads.
    assert (length.flips.flips, length.flips.held, length.flips.ties) == (0, 0, 3)
    assert length.flips.rate is None and (length.control.held, length.control.ties) == (3, 0)
    assert (
        fmt.flips.failed == {"parse_error": 3}
        and fmt.flips.decided == 0
        and fmt.control.failed == {"parse_error": 3}
    )
    assert result.pipeline_failures == []  # a parse error is the judge's, not the pipeline's


def test_a_reward_that_raises_is_a_pipeline_failure():
    class Broken(Reward):
        name = "broken"

        async def ascore(self, samples):
            raise RuntimeError("boom")

    result = probe_bias(Broken(), QUALITY_PAIRS, probes=probes_named(["length"]))
    assert result.original == {"error": 3}
    assert result.probes[0].not_applicable == "no pair has a preference to flip: each tied or failed"
    assert len(result.pipeline_failures) == 1 and "boom" in result.pipeline_failures[0]


# Pairwise judges over real HTTP: the scripted server decides from the two fenced responses.


def fenced(body, label):
    text = body["messages"][-1]["content"]
    return re.findall(rf"<<<BEGIN {label} (\w+)>>>\n(.*?)\n<<<END {label} \1>>>", text, re.DOTALL)[0][1]


def longer_wins(body):
    a, b = fenced(body, "RESPONSE A"), fenced(body, "RESPONSE B")
    winner = "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    return Reply(text=f'{{"winner": "{winner}"}}')


def pairwise(server, model="scripted"):
    return build(
        {"type": "pairwise_judge", "backend": openai_backend(server.url, model=model), "client": NO_RETRY}
    )


PAIRS = [pair(f"p{i}", "short" * i, "a longer answer" * (i + 1)) for i in range(1, 5)]


@pytest.mark.parametrize(("verdict", "first_won"), [("A", 4), ("B", 0)])
def test_a_position_biased_pairwise_judge_flips_on_position(scripted, verdict, first_won):
    scripted.default = Reply(text=f'{{"winner": "{verdict}"}}')  # the same position, whatever it shows
    result = probe_bias(pairwise(scripted), PAIRS)
    position = result.probes[0]
    assert position.name == "position" and position.not_applicable is None
    assert (position.flips.flips, position.flips.held, position.flips.ties) == (4, 0, 0)
    assert position.first_position == first_won and position.flips.rate == 1.0
    # Each order's verdicts cancel: every pair is a tie, so no probe has a loser to rewrite.
    assert result.original == {"tie": 4}
    assert all(p.not_applicable for p in result.probes[1:])
    assert len(scripted.requests) == 8  # two orders of each pair, nothing else


def test_a_consistent_pairwise_judge_holds_position_and_its_own_comparison_is_probed(scripted):
    scripted.default = longer_wins
    result = probe_bias(pairwise(scripted), PAIRS, probes=probes_named(["position", "length", "format"]))
    position, length, fmt = result.probes
    assert (position.flips.flips, position.flips.held, position.first_position) == (0, 4, 0)
    assert result.original == {"b": 4}
    # The judge compares the two answers: the padded loser is the longer, so it wins both orders.
    assert (length.flips.flips, length.control.flips, length.control.held) == (4, 0, 4)
    # Markdown adds 17 characters to the loser's 5i, still short of the winner's 15(i + 1).
    assert (fmt.flips.flips, fmt.flips.held) == (0, 4)


def test_self_preference_of_a_gpt_judge(scripted):
    scripted.default = longer_wins
    pairs = [
        pair(
            "own-long",
            "a long answer by gpt",
            "short",
            model_a="gpt4_1106_preview",
            model_b="claude-2",
        ),
        pair(
            "own-long-2",
            "meh",
            "a long answer by gpt",
            model_a="claude-2",
            model_b="gpt-3.5-turbo",
        ),
        pair(
            "own-short",
            "a long answer by claude",
            "gpt",
            model_a="claude-2",
            model_b="text_davinci_003",
        ),
        pair("both-gpt", "a long answer", "b", model_a="gpt-4", model_b="gpt-3.5"),
        pair("unknown", "a long answer", "b"),
    ]
    result = probe_bias(
        pairwise(scripted, model="gpt-4-scripted"), pairs, probes=probes_named(["self_preference"])
    )
    own = result.self_preference
    assert own.family == ("gpt", "davinci") and own.judge_model == "gpt-4-scripted"
    # Three pairs have exactly one answer by the GPT family (davinci included); the judge picks
    # the longer answer, the GPT one in two of them; the labels choose it in one.
    assert (own.pairs, own.own_wins, own.other_wins, own.ties) == (3, 2, 1, 0)
    assert (own.labelled, own.label_own_wins) == (3, 1)

    claude = probe_bias(
        pairwise(scripted, model="gpt-4-scripted"),
        pairs,
        probes=probes_named(["self_preference"]),
        judge_family=["claude"],
    ).self_preference
    assert (claude.pairs, claude.own_wins, claude.other_wins) == (3, 1, 2)


def test_self_preference_is_not_applicable_without_a_family_or_writers(scripted):
    scripted.default = longer_wins
    nameless = probe_bias(pairwise(scripted), PAIRS, probes=probes_named(["self_preference"]))
    assert "names no model of a known family ('scripted')" in nameless.self_preference.not_applicable
    unwritten = probe_bias(
        pairwise(scripted, model="gpt-4o"), PAIRS, probes=probes_named(["self_preference"])
    )
    assert unwritten.self_preference.not_applicable.startswith("no pair says who wrote its answers")
    others = probe_bias(
        pairwise(scripted, model="gpt-4o"),
        [pair("p", "a", "bb", model_a="claude-2", model_b="llama-2")],
        probes=probes_named(["self_preference"]),
    )
    assert (
        others.self_preference.not_applicable
        == "no pair has exactly one answer by the judge's family (gpt, davinci)"
    )
