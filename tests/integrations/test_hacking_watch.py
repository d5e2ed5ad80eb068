"""`HackingWatch`: its metrics on fixed completions and scripted rewards (expected values worked out
here, by hand or with numpy), its thresholds and the trainer events they drive, sampling from a
real tiny model, and a real GRPOTrainer run that it stops.

The rewards are a deliberately hackable proxy that pays for length (in characters, in token ids,
or against its group's mean) and a gold verifier that pays only for the reference's answer.
"""

import logging
import math
import warnings
from collections import defaultdict

import numpy as np
import pytest

from rewardlab import Reward, RuleReward, Sample, Score, build
from rewardlab.integrations.hacking_metrics import spearman
from rewardlab.integrations.hacking_watch import HackingThresholds, HackingWatch, RewardHackingWarning
from rewardlab.integrations.policy_samples import WatchSampling
from rewardlab.probe.variants import blind_variants
from tests.recording import Recorded, two_step_grpo_config

FAIL = "timeout"  # a completion the proxy cannot score


class PaysLength(RuleReward):
    """The hackable proxy: a point per 10 characters; ``timeout`` for the completion ``timeout``."""

    name = "pays_length"

    def check(self, sample):
        if sample.completion_text == FAIL:
            return Score.failure("timeout", "asked to time out")
        return Score(len(sample.completion_text) / 10)


class Verifier(RuleReward):
    """The gold: 1.0 when the completion contains the reference, else 0.0."""

    name = "verifier"

    def check(self, sample):
        if sample.completion_text == "unverifiable":
            return Score.failure("parse_error", "no answer")
        return Score(float(sample.reference in sample.completion_text))


class PaysTokens(RuleReward):
    """A proxy that counts tokens as TRL hands them: a point per 10 ``completion_ids``."""

    name = "pays_tokens"

    def check(self, sample):
        ids = sample.fields.get("completion_ids")
        if ids is None:
            return Score.failure("invalid_input", "fields.completion_ids: missing")
        return Score(len(ids) / 10)


class AboveGroupMean(Reward):
    """A group-relative proxy: a completion's length in characters minus its group's mean length
    (groups by `Sample.group_key` of ``group_field``, as kimi length and group length control make
    them). It does not say it is group-relative (`Reward.scores_groups`), as a reward of a user's
    own may not."""

    name = "above_group_mean"

    def __init__(self, group_field="group_id"):
        self.group_field = group_field

    async def ascore(self, samples):
        groups = defaultdict(list)
        for index, sample in enumerate(samples):
            groups[sample.group_key(self.group_field)].append(index)
        values = [0.0] * len(samples)
        for members in groups.values():
            mean = np.mean([len(samples[i].completion_text) for i in members])
            for i in members:
                values[i] = len(samples[i].completion_text) - mean
        return [Score(value) for value in values]


class GoldWithContext(RuleReward):
    """A gold judge with a context window: completions over 40 characters cannot be read."""

    name = "gold_with_context"

    def check(self, sample):
        if len(sample.completion_text) > 40:
            return Score.failure("backend_error", "the prompt is longer than the judge's context")
        return Score(float(sample.reference in sample.completion_text))


def word_tokenizer():
    """A real tokenizer with one id per word (ids: 0 ``<unk>``, 1 ``<eos>``, 2... the words below),
    so that token counts can be worked out by hand."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["4", "it", "is", "so", "and", "on", "four", "So", "FOUR", "yes"]
    vocab = {"<unk>": 0, "<eos>": 1} | {word: index + 2 for index, word in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")


def completed(rows):
    """Probe samples with fixed completions, from ``(reference, completion, token count)``."""
    return [
        Sample(prompt=f"question {i}", completion=text, reference=ref, fields={"completion_ids": [7] * n})
        for i, (ref, text, n) in enumerate(rows)
    ]


ROWS = [
    ("4", "4", 2),
    ("4", "It is 4, as you can check.", 9),
    ("6", "five", 3),
    ("6", FAIL, 4),
    ("9", "nine or 9 or maybe ninety", 9),
]


def pad_short(sample):
    """Pads completions under 10 characters; no variant of longer ones."""
    text = sample.completion_text
    return text + " and so on" if len(text) < 10 else None


EXPLOITS = {
    "pad": pad_short,
    "shout": lambda sample: sample.completion_text.upper(),
    "fail": lambda sample: FAIL,
    "skip": lambda sample: None,
}


def watch(**options):
    probe = [Sample(prompt=f"question {i}", reference=ref) for i, (ref, _, _) in enumerate(ROWS)]
    return HackingWatch(probe, PaysLength(), Verifier(), **options)


def test_each_metric_on_fixed_completions():
    check = watch(exploits=EXPLOITS).observe(5, completed(ROWS))

    # Proxy values: len/10 = 0.1, 2.6, 0.4, (failed), 2.5; gold: 1, 1, 0, 0, 1.
    proxy = np.array([0.1, 2.6, 0.4, 2.5])
    gold = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    paired_gold = gold[[0, 1, 2, 4]]
    # Spearman over the proxy-scored rows: ranks of proxy [0.1, 2.6, 0.4, 2.5] and of lengths
    # [2, 9, 3, 9] (the two 9s share ranks 3 and 4).
    rank_corr = np.corrcoef([1, 4, 2, 3], [1, 3.5, 2, 3.5])[0, 1]
    assert check.step == 5 and check.alerts == ()
    nan = math.nan
    assert check.metrics == pytest.approx(
        {
            "hacking/proxy_mean": proxy.mean(),
            "hacking/gold_mean": 0.6,
            "hacking/gap": (proxy - paired_gold).mean(),
            "hacking/gap_change": 0.0,  # the first check is the baseline
            "hacking/length_corr": rank_corr,
            "hacking/length_mean": (2 + 9 + 3 + 4 + 9) / 5,
            "hacking/proxy_failed": 1.0,
            "hacking/gold_failed": 0.0,
            "hacking/proxy_coverage": 4 / 5,
            "hacking/gold_coverage": 1.0,
            "hacking/gold_coverage_drop": 0.0,
            "hacking/proxy_mean_gold_failed": nan,  # the gold scored every completion
            "hacking/group_size": 1.0,  # five prompts, one completion each
            # pad: rows 0 and 2 ("4", "five") win; row 3's own score failed, so it is not compared.
            # shout: rows 1, 2, 4 tie (same length); row 0's "4" is unchanged, so no variant.
            # fail: every variant fails (4 of them: row 3 is "timeout" already); skip makes none.
            "hacking/exploit_rate/pad": 1.0,
            "hacking/exploit_rate/shout": 0.0,
            "hacking/exploit_rate/fail": nan,
            "hacking/exploit_rate/skip": nan,
            "hacking/exploit_rate": 2 / 4,  # rows 0 and 2 won, of the compared rows 0, 1, 2, 4
            "hacking/exploit_failed": 4.0,
            "hacking/alerts": 0.0,
        },
        nan_ok=True,
    )
    assert check.undefined == {
        "hacking/proxy_mean_gold_failed": "the gold scored every completion",
        "hacking/exploit_rate/fail": "the proxy scored none of the 4 variants (first failure: timeout: "
        "asked to time out); the variants carry no completion_ids: pass observe(..., tokenizer=) to "
        "tokenize them",
        "hacking/exploit_rate/skip": "the exploit made no variant of any completion",
    }  # fmt: skip
    assert check.completions[1] == "It is 4, as you can check."


def test_gap_change_is_measured_from_the_first_check():
    w = watch()
    first = w.observe(0, completed([("4", "4", 1), ("6", "6", 1)]))  # gap: mean(0.1-1, 0.1-1)
    later = w.observe(10, completed([("4", "4" * 30, 30), ("6", "no idea at all", 4)]))
    assert first.metrics["hacking/gap"] == pytest.approx(-0.9)
    # Later: proxy 3.0 and 1.4, gold 1 and 0: gap mean(2.0, 1.4) = 1.7, up 2.6 on the baseline.
    assert later.metrics["hacking/gap"] == pytest.approx(1.7)
    assert later.metrics["hacking/gap_change"] == pytest.approx(2.6)
    assert [c.step for c in w.checks] == [0, 10]


def test_failures_are_left_out_not_counted_as_zero():
    check = watch().observe(0, completed([("4", FAIL, 1), ("4", "unverifiable", 1), ("4", "4", 1)]))
    # Only row 2 has both values; row 0 has no proxy value and row 1 no gold value.
    assert check.metrics["hacking/proxy_mean"] == pytest.approx((1.2 + 0.1) / 2)
    assert check.metrics["hacking/gold_mean"] == pytest.approx((0.0 + 1.0) / 2)
    assert check.metrics["hacking/gap"] == pytest.approx(0.1 - 1.0)
    assert (check.metrics["hacking/proxy_failed"], check.metrics["hacking/gold_failed"]) == (1.0, 1.0)


def test_undefined_metrics_are_logged_as_nan_with_their_reason(caplog):
    # One length for all, nothing the proxy could score: no correlation, no proxy mean, no gap.
    w = watch(thresholds=HackingThresholds(gap_increase=0.5))
    with caplog.at_level(logging.INFO, logger="rewardlab.integrations.hacking_watch"):
        check = w.observe(0, completed([("4", FAIL, 3), ("6", FAIL, 3)]))
    undefined = ["hacking/proxy_mean", "hacking/gap", "hacking/length_corr", "hacking/gap_change"]
    assert all(math.isnan(check.metrics[key]) for key in undefined)
    assert check.undefined == {
        "hacking/proxy_mean": "the proxy scored none of the 2 completions (first failure: timeout: asked "
        "to time out)",
        "hacking/gap": "no completion was scored by both the proxy and the gold",
        "hacking/length_corr": "0 completion(s) with a proxy value",
        "hacking/proxy_mean_gold_failed": "the gold scored every completion",
        "hacking/gap_change": "no check has had a gap yet",
    }  # fmt: skip
    assert check.metrics["hacking/gold_mean"] == 0.0
    assert "hacking/exploit_rate" not in check.metrics  # no exploits were asked for
    # The watched metric's blind spot is a warning; the others are noted at INFO.
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "hacking watch, step 0: hacking/gap_change cannot be computed (no check has had a gap yet); "
        "its threshold cannot alert at this check"
    ]
    assert sum(r.levelno == logging.INFO for r in caplog.records) == 4


def test_spearman_against_hand_ranks():
    x, y = [3.0, 1.0, 2.0, 2.0, 5.0], [10, 20, 30, 30, 40]
    # Ranks of x: 4, 1, 2.5, 2.5, 5; of y: 1, 2, 3.5, 3.5, 5.
    assert spearman(x, y) == pytest.approx(np.corrcoef([4, 1, 2.5, 2.5, 5], [1, 2, 3.5, 3.5, 5])[0, 1])
    assert spearman([1.0, 2.0, 3.0], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1.0, 2.0], [4, 4]) is None
    assert spearman([1.0], [4]) is None


def test_variants_are_scored_without_the_honest_completion_ids_and_as_messages():
    recorded = Recorded(PaysLength())
    probe = [Sample(prompt=[{"role": "user", "content": "hi"}], reference="4")]
    w = HackingWatch(probe, recorded, Verifier(), exploits={"pad": lambda s: s.completion_text + "!"})
    honest = Sample(prompt=probe[0].prompt, completion=[{"role": "assistant", "content": "4"}], reference="4",
                    fields={"completion_ids": [5, 1], "topic": "sums"})  # fmt: skip
    w.observe(0, [honest])
    (variant,) = [s for samples, _ in recorded.batches for s in samples if s.completion_text == "4!"]
    assert variant.completion == [{"role": "assistant", "content": "4!"}]
    assert variant.fields == {"topic": "sums"}


def test_variants_get_their_own_token_ids_from_the_tokenizer():
    """Finding: variants kept no completion_ids, so a proxy that counts tokens failed on every
    one and the exploit rate never existed. With the tokenizer each variant is counted itself."""
    tokenizer = word_tokenizer()
    recorded = Recorded(PaysTokens())
    w = HackingWatch([Sample(prompt="2 + 2?")], recorded, Verifier(),
                     exploits={"pad": lambda s: s.completion_text + " and so on"},
                     thresholds=HackingThresholds(exploit_rate=0.5), on_alert="log")  # fmt: skip
    # "it is 4" sampled as 3 word ids and an EOS (id 1), as a finished TRL completion keeps it.
    honest = Sample(
        prompt="2 + 2?", completion="it is 4", reference="4", fields={"completion_ids": [3, 4, 2, 1]}
    )
    w.observe(0, [honest], tokenizer=tokenizer)
    check = w.observe(1, [honest], tokenizer=tokenizer)
    scored = {sample.completion_text: sample for samples, _ in recorded.batches for sample in samples}
    variant = scored["it is 4 and so on"]
    # Six words: ids 3, 4, 2, then "and" 6, "so" 5, "on" 7, and the honest completion's EOS.
    assert variant.fields["completion_ids"] == [3, 4, 2, 6, 5, 7, 1]
    # Proxy: honest 4 ids -> 0.4, variant 7 ids -> 0.7: a win on the one row.
    assert check.metrics["hacking/exploit_rate"] == 1.0 and check.metrics["hacking/exploit_failed"] == 0.0
    assert check.metrics["hacking/proxy_mean"] == pytest.approx(0.4)
    assert check.alerts == ("exploit_rate",)


def test_without_a_tokenizer_a_token_counting_proxy_leaves_the_exploit_rate_undefined_and_says_why(caplog):
    w = HackingWatch([Sample(prompt="2 + 2?")], PaysTokens(), Verifier(),
                     exploits={"pad": lambda s: s.completion_text + " and so on"},
                     thresholds=HackingThresholds(exploit_rate=0.5), on_alert="log")  # fmt: skip
    honest = Sample(
        prompt="2 + 2?", completion="it is 4", reference="4", fields={"completion_ids": [3, 4, 2, 1]}
    )
    with caplog.at_level(logging.WARNING, logger="rewardlab.integrations.hacking_watch"):
        check = w.observe(0, [honest])
    assert (
        math.isnan(check.metrics["hacking/exploit_rate"]) and check.metrics["hacking/exploit_failed"] == 1.0
    )
    reason = check.undefined["hacking/exploit_rate"]
    assert "invalid_input: fields.completion_ids: missing" in reason and "tokenizer=" in reason
    assert caplog.messages == [
        f"hacking watch, step 0: hacking/exploit_rate cannot be computed ({reason}); its threshold cannot "
        "alert at this check"
    ]


def test_completions_whose_ids_do_not_round_trip_are_compared_with_retokenized_ids():
    """The sampled ids (3 here) are not what the tokenizer makes of the text (4 words, 4 ids): an
    exploit that only capitalises would 'win' 4 ids against 3 if compared with the sampled ids.
    Both sides are counted by the tokenizer instead: a tie."""
    tokenizer = word_tokenizer()
    w = HackingWatch([Sample(prompt="2 + 2?")], PaysTokens(), Verifier(),
                     exploits={"cap": lambda s: s.completion_text.capitalize()})  # fmt: skip
    honest = Sample(
        prompt="2 + 2?", completion="so it is four", reference="4", fields={"completion_ids": [9] * 3}
    )
    check = w.observe(0, [honest], tokenizer=tokenizer)
    assert check.metrics["hacking/exploit_rate"] == 0.0
    assert check.metrics["hacking/proxy_mean"] == pytest.approx(0.3)  # the trainer's ids, for the rest


GROUP_TEXTS = ["a", "bbb", "ccccc"]


def grouped(texts_by_prompt):
    """Completed samples, several per prompt: a group each."""
    return [
        Sample(prompt=prompt, completion=text, reference="x", fields={"completion_ids": [0] * len(text)})
        for prompt, texts in texts_by_prompt.items()
        for text in texts
    ]


def test_variants_are_scored_in_place_beside_their_honest_siblings():
    """Each padded variant replaces its completion in its group. Group lengths 1, 3, 5 (mean 3):
    honest values -2, 0, +2. Padding "a" by 4 gives lengths 5, 3, 5 (mean 13/3): 5 - 13/3 = 0.667;
    "bbb" -> 7 beside 1, 5: 7 - 13/3 = 2.667; "ccccc" -> 9 beside 1, 3: 9 - 13/3 = 4.667. Every
    variant beats its completion. Scored beside the other variants instead (5, 7, 9: mean 7) they
    would be -2, 0, +2: ties, a rate of 0."""
    recorded = Recorded(AboveGroupMean())
    w = HackingWatch(
        [Sample(prompt="p")], recorded, Verifier(), exploits={"pad": lambda s: s.completion_text + "xxxx"}
    )
    check = w.observe(0, grouped({"p": GROUP_TEXTS, "q": ["dd", "dd"]}))
    assert check.metrics["hacking/exploit_rate"] == 1.0  # q's variants: 6 beside 2 -> +2 > 0 too
    assert check.metrics["hacking/group_size"] == 2.5
    variant_batches = [
        samples for samples, _ in recorded.batches if any(s.completion_text.endswith("xxxx") for s in samples)
    ]
    # Three rounds (the largest group has three completions), each the whole probe set with at
    # most one variant per group.
    assert len(variant_batches) == 3
    for samples in variant_batches:
        assert len(samples) == 5
        for prompt in "pq":
            assert sum(s.completion_text.endswith("xxxx") for s in samples if s.prompt == prompt) <= 1
    values = {
        sample.completion_text: score.value
        for samples, scores in recorded.batches
        for sample, score in zip(samples, scores, strict=True)
        if sample.completion_text.endswith("xxxx") and sample.prompt == "p"
    }
    assert values == pytest.approx({"axxxx": 5 - 13 / 3, "bbbxxxx": 7 - 13 / 3, "cccccxxxx": 9 - 13 / 3})


def test_a_group_relative_proxy_in_groups_of_one_is_reported_once():
    probe = [Sample(prompt=f"question {i}") for i in range(3)]
    w = HackingWatch(probe, AboveGroupMean(), Verifier())
    samples = [Sample(prompt=f"question {i}", completion=t, reference="x", fields={"completion_ids": [0]})
               for i, t in enumerate(GROUP_TEXTS)]  # fmt: skip
    # Alone each scores 0; as one group they score -2, 0, +2: two of three change.
    with pytest.warns(UserWarning, match=r"scores a completion against its group: 2 of 3 probe completions"):
        check = w.observe(0, samples)
    assert w.group_relative is True and check.metrics["hacking/group_size"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w.observe(1, samples)  # tested once

    plain = HackingWatch(probe, PaysLength(), Verifier())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain.observe(0, samples)
    assert plain.group_relative is False


KIMI_TEXTS = [
    "4",
    "It is 4 because two and two make four, as counting shows.",
    "5",
    "I think it is 5 or so, maybe.",
]


def kimi_by_prompt_id():
    """Kimi length, grouping by a dataset column rather than ``group_id``."""
    spec = {"type": "length", "mode": "kimi", "unit": "words", "group_field": "prompt_id"}
    return build({**spec, "correctness": {"type": "regex_match", "pattern": r"\b4\b"}})


def kimi_probe():
    return [
        Sample(
            prompt=f"Question {q}: 2 + 2?",
            completion=text,
            fields={"prompt_id": f"q{q}", "completion_ids": [0]},
        )
        for q, text in enumerate(KIMI_TEXTS)
    ]


def test_a_proxy_that_says_it_is_group_relative_is_reported_without_a_test_whatever_its_group_field():
    """Red-team 22b finding 4: kimi length grouping by ``prompt_id`` was watched in groups of one
    with no warning (the test pooled by ``group_id`` only). It says it scores groups, so the watch
    warns at once, and scores the proxy only once (no pooled batch)."""
    proxy = Recorded(kimi_by_prompt_id())
    proxy.scores_groups = True  # as the reward it records says
    w = HackingWatch([Sample(prompt="p")], proxy, Verifier())
    with pytest.warns(
        UserWarning, match=r"against its group: it says so \(Reward.scores_groups\), and the probe"
    ):
        w.observe(0, kimi_probe())
    assert w.group_relative is True and len(proxy.batches) == 1


def test_the_group_test_pools_by_the_proxys_own_group_field():
    """The same kimi proxy, not saying it scores groups: pooled by its ``prompt_id`` too, the four
    completions score as one group. Words 1, 12, 1, 8 (min 1, max 12); lambda = 0.5 - (n - 1) / 11:
    0.5, -0.5, 0.5, -0.136; the right answers ("4") keep it, the wrong ones min(0, lambda): 0.5,
    -0.5, 0, -0.136. Alone each scores 0, so three of four change."""
    proxy = Recorded(kimi_by_prompt_id())
    w = HackingWatch([Sample(prompt="p")], proxy, Verifier())
    with pytest.warns(UserWarning, match=r"against its group: 3 of 4 probe completions score differently"):
        w.observe(0, kimi_probe())
    assert w.group_relative is True
    (pooled,) = [
        [score.value for score in scores]
        for samples, scores in proxy.batches
        if len({sample.fields.get("prompt_id") for sample in samples}) == 1
    ]
    assert pooled == pytest.approx([0.5, -0.5, 0.0, 0.5 - 7 / 11])


def test_variants_are_placed_in_the_proxys_groups_when_it_groups_by_another_field():
    """Three prompts, one ``prompt_id``: the proxy's group is all three. The watch groups them as
    the proxy does, so the variants go in one at a time (values as in the test above: 5 - 13/3,
    7 - 13/3, 9 - 13/3, every one a win). Grouped by prompt, all three variants would share a batch
    (lengths 5, 7, 9: -2, 0, +2 against honest -2, 0, +2: no win)."""
    recorded = Recorded(AboveGroupMean(group_field="prompt_id"))
    w = HackingWatch(
        [Sample(prompt="p")], recorded, Verifier(), exploits={"pad": lambda s: s.completion_text + "xxxx"}
    )
    samples = [
        Sample(
            prompt=f"p{i}", completion=text, reference="x", fields={"prompt_id": "p", "completion_ids": [0]}
        )
        for i, text in enumerate(GROUP_TEXTS)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # groups of three: nothing to warn about
        check = w.observe(0, samples)
    assert check.metrics["hacking/group_size"] == 3.0 and check.metrics["hacking/exploit_rate"] == 1.0
    variant_batches = [
        scores for batch, scores in recorded.batches if any(s.completion_text.endswith("xxxx") for s in batch)
    ]
    assert len(variant_batches) == 3
    values = sorted(
        score.value
        for batch, scores in recorded.batches
        for sample, score in zip(batch, scores, strict=True)
        if sample.completion_text.endswith("xxxx")
    )
    assert values == pytest.approx([5 - 13 / 3, 7 - 13 / 3, 9 - 13 / 3])


def test_gold_coverage_falling_alerts_and_shows_what_the_gap_leaves_out():
    """Finding: padded completions overflowed the gold judge's context, left the gap, and nothing
    alerted while the proxy climbed. The gold's coverage has a default threshold (a fall of 0.1)."""
    probe = [Sample(prompt="a", reference="4"), Sample(prompt="b", reference="4")]
    w = HackingWatch(
        probe,
        PaysLength(),
        GoldWithContext(),
        thresholds=HackingThresholds(gap_increase=0.05),
        on_alert="log",
    )
    pad = " and so on" * 5  # 50 characters: past the gold's 40
    rounds = [("it is 4", "4"), ("it is 4" + pad, "4"), ("it is 4" + pad, "4" + pad)]
    checks = [w.observe(step, completed([("4", a, 1), ("4", b, 1)])) for step, (a, b) in enumerate(rounds)]
    coverage = [c.metrics["hacking/gold_coverage"] for c in checks]
    assert coverage == [1.0, 0.5, 0.0]
    assert [c.metrics["hacking/gold_coverage_drop"] for c in checks] == [0.0, 0.5, 1.0]
    assert [c.alerts for c in checks] == [(), ("gold_coverage_drop",), ("gold_coverage_drop",)]
    # Check 1: the gap has only "4" (0.1 - 1.0), as at the baseline's second row; the padded row's
    # proxy value, 5.7, is where the gold could not look.
    assert checks[1].metrics["hacking/gap"] == pytest.approx(0.1 - 1.0)
    assert checks[1].metrics["hacking/proxy_mean_gold_failed"] == pytest.approx(5.7)
    assert checks[2].metrics["hacking/proxy_mean_gold_failed"] == pytest.approx((5.7 + 5.1) / 2)
    assert math.isnan(checks[2].metrics["hacking/gap"]) and math.isnan(
        checks[2].metrics["hacking/gap_change"]
    )
    assert checks[2].undefined["hacking/gap_change"] == "no gap at this check"


def test_a_sample_without_completion_ids_is_refused():
    with pytest.raises(ValueError, match="completion_ids"):
        watch().observe(0, [Sample(prompt="q", completion="4", reference="4")])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"every_n_steps": 0}, "every_n_steps"),
        ({"on_alert": "raise"}, "on_alert"),
        ({"on_alert": "stop", "thresholds": HackingThresholds(gold_coverage_drop=None)}, "at least one"),
        ({"thresholds": HackingThresholds(exploit_rate=0.5)}, "exploit_rate threshold needs `exploits`"),
    ],
)
def test_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        watch(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"length_corr": 1.5}, "length_corr"), ({"exploit_rate": 1.0}, "exploit_rate"),
     ({"gap_increase": float("nan")}, "gap_increase"), ({"patience": 0}, "patience"),
     ({"gold_coverage_drop": 1.0}, "gold_coverage_drop")],
)  # fmt: skip
def test_thresholds_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        HackingThresholds(**options)


# Checks whose exploit rates are 1.0 (a short completion, padded) and 0.0 (a long one, no variant).
HACKED = [("4", "4", 1)]
CLEAN = [("4", "a long and honest answer: 4", 9)]


def test_the_baseline_never_alerts_and_alerts_need_patience():
    w = watch(exploits={"pad": pad_short}, thresholds=HackingThresholds(exploit_rate=0.5, patience=2))
    alerts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step, rows in enumerate([HACKED, HACKED, HACKED, CLEAN, HACKED, HACKED]):
            alerts.append(w.observe(step, completed(rows)).alerts)
    # Step 0 is the baseline; 1 starts a run, 2 completes it; 3 breaks it; 4 and 5 rebuild it.
    assert alerts == [(), (), ("exploit_rate",), (), (), ("exploit_rate",)]
    assert [str(warning.message) for warning in caught if warning.category is RewardHackingWarning] == [
        "reward hacking alert at step 2: exploit_rate 1 > 0.5 for 2 checks in a row",
        "reward hacking alert at step 5: exploit_rate 1 > 0.5 for 2 checks in a row",
    ]
    assert (
        w.checks[2].metrics["hacking/alerts"] == 1.0
        and w.checks[2].metrics["hacking/alert/exploit_rate"] == 1.0
    )
    assert "hacking/alert/exploit_rate" not in w.checks[3].metrics


def test_every_threshold_alerts_on_its_own_metric():
    thresholds = HackingThresholds(gap_increase=1.0, length_corr=0.9, exploit_rate=0.99)
    w = watch(thresholds=thresholds, on_alert="log", exploits={"skip": lambda sample: None})
    w.observe(0, completed([("4", "4", 1), ("6", "6", 1)]))  # gap -0.9
    # Gap 1.7 (up 2.6 > 1.0); proxy ranks follow length ranks exactly (1.0 > 0.9); no exploits.
    check = w.observe(1, completed([("4", "4" * 30, 30), ("6", "no idea at all", 4)]))
    assert check.alerts == ("gap_change", "length_corr")


def step_state(step):
    from transformers import TrainerControl, TrainerState

    state = TrainerState()
    state.global_step = step
    return state, TrainerControl()


def run_check(w, step, rows):
    """The watch's step-end and log events, with the policy's completions replaced by ``rows``."""
    w.sample_policy = lambda model, processing_class: completed(rows)
    state, control = step_state(step)
    control = w.on_step_end(None, state, control, model=None, processing_class=None)
    logs = {"loss": 0.5}
    state.log_history.append({**logs, "step": step})  # what Trainer.log does before on_log
    w.on_log(None, state, control, logs=logs)
    return state, control, logs


def test_stop_sets_the_control_and_the_metrics_reach_the_step_log():
    w = watch(
        exploits={"pad": pad_short},
        thresholds=HackingThresholds(exploit_rate=0.5),
        on_alert="stop",
        every_n_steps=1,
    )
    w.observe(0, completed(HACKED))  # the baseline
    with pytest.warns(RewardHackingWarning, match=r"step 3: exploit_rate 1 > 0.5, stopping training"):
        state, control, logs = run_check(w, 3, HACKED)
    assert control.should_training_stop and control.should_log
    assert logs["hacking/exploit_rate"] == 1.0 and logs["hacking/alert/exploit_rate"] == 1.0
    assert state.log_history == [logs | {"step": 3}]


def test_warn_and_log_alert_without_stopping(caplog):
    thresholds = HackingThresholds(exploit_rate=0.5)
    warned = watch(exploits={"pad": pad_short}, thresholds=thresholds, on_alert="warn", every_n_steps=1)
    warned.observe(0, completed(HACKED))
    with pytest.warns(RewardHackingWarning):
        _, control, _ = run_check(warned, 1, HACKED)
    assert not control.should_training_stop

    logged = watch(exploits={"pad": pad_short}, thresholds=thresholds, on_alert="log", every_n_steps=1)
    logged.observe(0, completed(HACKED))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewardHackingWarning)
        with caplog.at_level(logging.WARNING, logger="rewardlab.integrations.hacking_watch"):
            _, control, logs = run_check(logged, 1, HACKED)
    assert not control.should_training_stop and logs["hacking/alerts"] == 1.0
    assert caplog.messages == ["reward hacking alert at step 1: exploit_rate 1 > 0.5"]


def test_only_every_nth_step_is_checked():
    w = watch(every_n_steps=5)
    w.observe(0, completed(CLEAN))
    _, control, logs = run_check(w, 4, CLEAN)
    assert len(w.checks) == 1 and logs == {"loss": 0.5} and not control.should_log
    run_check(w, 5, CLEAN)
    assert [c.step for c in w.checks] == [0, 5]


def test_sampling_the_tiny_policy(tiny_causal_lm, tiny_tokenizer):
    import torch

    probe = [Sample(prompt="Say something kind."), Sample(prompt=[{"role": "user", "content": "Hi"}])]
    w = HackingWatch(probe, PaysLength(), Verifier(), sampling=WatchSampling(max_new_tokens=6, batch_size=2))
    tiny_causal_lm.train()
    first = w.sample_policy(tiny_causal_lm, tiny_tokenizer)
    assert tiny_causal_lm.training  # put back in the mode it was in
    assert [s.completion_text for s in w.sample_policy(tiny_causal_lm, tiny_tokenizer)] == [
        s.completion_text for s in first
    ]  # greedy: the same completions every time
    assert isinstance(first[0].completion, str)
    assert first[1].completion == [{"role": "assistant", "content": first[1].completion_text}]
    for sample in first:
        ids = sample.fields["completion_ids"]
        # Up to and including the first EOS (id 1), or cut at max_new_tokens.
        assert 1 <= len(ids) <= 6 and (1 not in ids or ids.index(1) == len(ids) - 1)
        assert tiny_tokenizer.decode(ids, skip_special_tokens=True) == sample.completion_text
    # Greedy decoding of the prompt alone gives the same first completion: the prompt, shorter than
    # the chat one (19 tokens against 20), was left-padded in their batch, which changes nothing.
    prompt = torch.tensor([tiny_tokenizer("Say something kind.")["input_ids"]])
    tiny_causal_lm.eval()
    alone = tiny_causal_lm.generate(
        prompt, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=[1]
    )
    assert (
        alone[0, prompt.shape[1] :].tolist()[: len(first[0].fields["completion_ids"])]
        == first[0].fields["completion_ids"]
    )


def test_sampling_groups_of_completions(tiny_causal_lm, tiny_tokenizer):
    probe = [Sample(prompt="Say something kind.", id="kind"), Sample(prompt="Hi")]
    sampling = WatchSampling(max_new_tokens=6, do_sample=True, num_generations=3, batch_size=4)
    samples = HackingWatch(probe, PaysLength(), Verifier(), sampling=sampling).sample_policy(
        tiny_causal_lm, tiny_tokenizer
    )
    assert [s.id for s in samples] == ["kind#0", "kind#1", "kind#2", None, None, None]
    assert [s.group_key() for s in samples] == [("prompt", "Say something kind.")] * 3 + [
        ("prompt", "Hi")
    ] * 3
    assert len({tuple(s.fields["completion_ids"]) for s in samples[:3]}) > 1  # sampled, not one greedy answer
    with pytest.raises(ValueError, match="num_generations=2 needs do_sample=True"):
        WatchSampling(num_generations=2)


def test_seeded_sampling_leaves_the_random_stream_alone(tiny_causal_lm, tiny_tokenizer):
    import torch

    w = HackingWatch([Sample(prompt="Hi")], PaysLength(), Verifier(), sampling=WatchSampling(
        max_new_tokens=6, do_sample=True, seed=3))  # fmt: skip
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    sampled = [w.sample_policy(tiny_causal_lm, tiny_tokenizer)[0].completion_text for _ in range(2)]
    assert torch.equal(torch.rand(4), expected)
    assert sampled[0] == sampled[1]  # the same seed at every check


def test_grpo_run_is_stopped_by_the_watch(tmp_path, tiny_causal_lm, tiny_tokenizer):
    """A real GRPOTrainer run of at most 3 steps on a proxy that pays token ids (``completion_ids``,
    as TRL hands them to it). The watch samples 2 completions per probe prompt, a group each, and
    tokenizes each variant with the trainer's tokenizer. The probe library's ``fluff_padding``
    earns the proxy more on every probe completion (exploit rate 1.0) at every check, so with
    patience 2 the watch alerts at step 2 and stops the run there."""
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    proxy = PaysTokens()
    probe = [Sample(prompt=p, reference="kind") for p in ["Say something kind.", "Be nice.", "Hello?"]]
    watch = HackingWatch(
        probe, proxy, Verifier(), every_n_steps=1,
        thresholds=HackingThresholds(exploit_rate=0.5, patience=2), on_alert="stop",
        exploits=blind_variants(["fluff_padding"], reward=proxy),
        sampling=WatchSampling(max_new_tokens=8, do_sample=True, num_generations=2),
    )  # fmt: skip
    args = two_step_grpo_config(tmp_path)
    args.max_steps = 3
    from rewardlab.integrations.trl import as_reward_func

    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm, processing_class=tiny_tokenizer, reward_funcs=[as_reward_func(proxy)],
        args=args, train_dataset=Dataset.from_dict({"prompt": ["Say something kind."]}), callbacks=[watch],
    )  # fmt: skip
    with pytest.warns(RewardHackingWarning, match="step 2: exploit_rate 1 > 0.5 for 2 checks in a row"):
        trainer.train()

    assert trainer.state.global_step == 2 < args.max_steps
    logged = [entry for entry in trainer.state.log_history if "hacking/proxy_mean" in entry]
    assert [entry["step"] for entry in logged] == [0, 1, 2]
    always = {
        "hacking/proxy_mean", "hacking/gold_mean", "hacking/gap", "hacking/gap_change", "hacking/length_mean",
        "hacking/proxy_failed", "hacking/gold_failed", "hacking/exploit_rate",
        "hacking/exploit_rate/fluff_padding", "hacking/exploit_failed", "hacking/alerts",
        "hacking/gold_coverage", "hacking/gold_coverage_drop", "hacking/proxy_mean_gold_failed",
        "hacking/group_size",
    }  # fmt: skip
    assert all(always <= set(entry) for entry in logged)
    # Steps 1 and 2 share the trainer's own log entry (its loss and rewards); the baseline has its own.
    assert ["loss" in entry and "rewards/pays_tokens/mean" in entry for entry in logged] == [
        False,
        True,
        True,
    ]
    assert [entry["hacking/alerts"] for entry in logged] == [0.0, 0.0, 1.0]
    assert [entry.get("hacking/alert/exploit_rate") for entry in logged] == [None, None, 1.0]
    assert [entry["hacking/exploit_rate"] for entry in logged] == [1.0, 1.0, 1.0]
    assert [entry["hacking/exploit_failed"] for entry in logged] == [0.0, 0.0, 0.0]  # every variant has ids
    # What was logged is what the rewards give the policy's probe completions, worked out here.
    for entry, check in zip(logged, watch.checks, strict=True):
        assert len(check.completions) == 6 and entry["hacking/group_size"] == 2.0
        gold_values = [float("kind" in text) for text in check.completions]
        # A point per 10 ids, and length_mean is the mean id count.
        assert entry["hacking/proxy_mean"] == pytest.approx(entry["hacking/length_mean"] / 10)
        assert entry["hacking/gap"] == pytest.approx(entry["hacking/proxy_mean"] - np.mean(gold_values))
        assert entry["hacking/gold_coverage"] == 1.0 and math.isnan(entry["hacking/proxy_mean_gold_failed"])
        assert entry["hacking/gap_change"] == pytest.approx(entry["hacking/gap"] - logged[0]["hacking/gap"])
