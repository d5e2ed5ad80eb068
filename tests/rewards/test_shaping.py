import math

import pytest

import rewardlab
from rewardlab import ConfigError, Sample, Status
from rewardlab.rewards.shaping import LengthReward, RepetitionPenalty, SoftOverlongPunishment


def score_one(reward, sample):
    (score,) = reward.score([sample])
    return score


def with_tokens(count, **sample_options):
    return Sample(completion="(text)", fields={"completion_ids": [7] * count}, **sample_options)


@pytest.fixture
def bos_adding_tokenizer():
    """A real transformers fast tokenizer whose encode() prepends <s> unless told not to."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "<s>": 1, "hello": 2, "world": 3}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="[UNK]")
    assert tokenizer.encode("hello world") == [1, 2, 3]
    return tokenizer


# SoftOverlongPunishment: L_max = 100, L_cache = 20, so the soft zone is (80, 100].


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (0, 0.0),
        (80, 0.0),  # = L_max - L_cache: still free
        (81, -0.05),  # (80 - 81) / 20
        (90, -0.5),  # (80 - 90) / 20, TRL's docstring example
        (99, -0.95),  # (80 - 99) / 20
        (100, -1.0),  # (80 - 100) / 20, = L_max: the last length in the soft zone
        (101, -1.0),  # over L_max
        (5000, -1.0),
    ],
)
def test_soft_overlong_matches_dapo_eq_13(length, expected):
    score = score_one(SoftOverlongPunishment(max_length=100, cache_length=20), with_tokens(length))
    assert score.status is Status.OK
    assert score.value == pytest.approx(expected)
    assert score.details["length"] == length


def test_soft_overlong_zero_cache_is_a_hard_step():
    reward = SoftOverlongPunishment(max_length=100, cache_length=0)
    assert [s.value for s in reward.score([with_tokens(100), with_tokens(101)])] == [0.0, -1.0]


def test_soft_overlong_in_words_and_chars():
    words = SoftOverlongPunishment(max_length=4, cache_length=2, unit="words")
    # 3 words: (4 - 2 - 3) / 2 = -0.5
    assert score_one(words, Sample(completion="one two  three")).value == -0.5
    chars = SoftOverlongPunishment(max_length=10, cache_length=4, unit="chars")
    # 8 characters: (10 - 4 - 8) / 4 = -0.5; chat messages count their content only
    assert score_one(chars, Sample(completion=[{"role": "assistant", "content": "abcdefgh"}])).value == -0.5


@pytest.mark.parametrize("blank", ["\u2800", "\u3164", "\uffa0", " \u200b"])
def test_words_separated_by_a_blank_that_is_not_whitespace_still_count(blank):
    # Spaces written as U+2800 (drawn blank, not whitespace to str.split) made a long answer one
    # word and escaped the overlong penalty (red-team round 22).
    words = SoftOverlongPunishment(max_length=4, cache_length=2, unit="words")
    assert score_one(words, Sample(completion=blank.join(["one", "two", "three"]))).value == -0.5


def test_soft_overlong_without_token_ids_is_invalid_input():
    reward = SoftOverlongPunishment(max_length=100, cache_length=20)
    score = score_one(reward, Sample(completion="no ids here", id="roll-9"))
    assert score.status is Status.INVALID_INPUT and score.value is None
    assert "sample 'roll-9'" in score.reason and "fields.completion_ids" in score.reason


def test_tokenizer_counts_without_special_tokens(bos_adding_tokenizer):
    reward = SoftOverlongPunishment(max_length=3, cache_length=2, tokenizer=bos_adding_tokenizer)
    # "hello world" is 2 tokens, (3 - 2 - 2) / 2 = -0.5; with the <s> it would be 3 tokens and -1.0.
    assert score_one(reward, Sample(completion="hello world")).value == -0.5
    # Token ids from the trainer win over the tokenizer.
    ids_given = Sample(completion="hello world", fields={"completion_ids": [2]})
    assert score_one(reward, ids_given).value == 0.0


def test_plain_encode_tokenizer():
    class CharacterCodes:
        def encode(self, text):
            return [ord(c) for c in text]

    reward = SoftOverlongPunishment(max_length=4, cache_length=2, tokenizer=CharacterCodes())
    assert score_one(reward, Sample(completion="abc")).value == -0.5  # (4 - 2 - 3) / 2


@pytest.mark.parametrize(
    "options",
    [
        {"max_length": 0, "cache_length": 0},
        {"max_length": 10, "cache_length": 11},
        {"max_length": 10, "cache_length": -1},
        {"max_length": 10, "cache_length": 2, "unit": "bytes"},
        {"max_length": 10, "cache_length": 2, "unit": "chars", "tokenizer": object()},
    ],
)
def test_soft_overlong_config_errors(options):
    with pytest.raises(ValueError):
        SoftOverlongPunishment(**options)


def test_build_soft_overlong():
    reward = rewardlab.build({"type": "soft_overlong", "max_length": 100, "cache_length": 20})
    assert isinstance(reward, SoftOverlongPunishment) and reward.name == "soft_overlong"
    assert score_one(reward, with_tokens(90)).value == -0.5
    with pytest.raises(ConfigError):
        rewardlab.build({"type": "soft_overlong", "max_length": 100})


# RepetitionPenalty


@pytest.mark.parametrize(
    ("completion", "ngram_size", "max_penalty", "expected"),
    [
        # go go go go go: 4 bigrams, 1 unique -> (1 - 1/4) * -1
        ("go go go go go", 2, -1.0, -0.75),
        # the cat sat on the mat the cat sat: 7 trigrams, (the cat sat) twice -> 6 unique -> (1 - 6/7) * -1
        ("the cat sat on the mat the cat sat", 3, -1.0, -1 / 7),
        ("the cat sat on the mat the cat sat", 3, -0.5, -1 / 14),
        # words are lowercased: Go go GO -> 3 unigrams, 1 unique -> (1 - 1/3) * -1
        ("Go go GO", 1, -1.0, -2 / 3),
        ("every word here is new", 2, -1.0, 0.0),
        ("too short", 3, -1.0, 0.0),  # fewer than ngram_size words
        ("", 3, -1.0, 0.0),
    ],
)
def test_repetition_penalty_by_hand(completion, ngram_size, max_penalty, expected):
    reward = RepetitionPenalty(ngram_size=ngram_size, max_penalty=max_penalty)
    score = score_one(reward, Sample(completion=completion))
    assert score.status is Status.OK
    assert score.value == pytest.approx(expected)
    assert math.copysign(1.0, score.value) == (1.0 if expected == 0 else -1.0)  # never -0.0


def test_repetition_penalty_details():
    score = score_one(RepetitionPenalty(ngram_size=2), Sample(completion="go go go go go"))
    assert score.details == {"unit": "words", "ngram_size": 2, "total_ngrams": 4, "unique_ngrams": 1}
    assert score.reason == "3 of 4 2-grams are repeats"


def test_repetition_penalty_in_characters_for_cjk():
    reward = RepetitionPenalty(ngram_size=2, unit="chars")
    # 好好好好: 3 character bigrams, 1 unique -> -2/3; 你好世界: 3 distinct bigrams -> 0
    values = [s.value for s in reward.score([Sample(completion="好好好好"), Sample(completion="你好世界")])]
    assert values == [pytest.approx(-2 / 3), 0.0]
    # As whitespace words each text is a single word, so no bigram at all.
    assert score_one(RepetitionPenalty(ngram_size=2), Sample(completion="好好好好")).value == 0.0


def test_repetition_penalty_on_token_ids_matches_trl():
    # TRL's get_repetition_penalty_reward docstring: [[1, 2, 3, 4], [5, 5, 5, 5, 5]] -> [0.0, -0.75]
    reward = RepetitionPenalty(ngram_size=2, unit="tokens")
    samples = [
        Sample(fields={"completion_ids": [1, 2, 3, 4]}),
        Sample(fields={"completion_ids": [5, 5, 5, 5, 5]}),
    ]
    assert [s.value for s in reward.score(samples)] == [0.0, -0.75]
    missing = score_one(reward, Sample(completion="x", id="a"))
    assert missing.status is Status.INVALID_INPUT and "fields.completion_ids" in missing.reason


def test_repetition_penalty_config_errors():
    with pytest.raises(ValueError, match="max_penalty"):
        RepetitionPenalty(max_penalty=0.5)
    with pytest.raises(ValueError, match="ngram_size"):
        RepetitionPenalty(ngram_size=0)


def test_build_repetition_penalty_with_chat_completion():
    reward = rewardlab.build({"type": "repetition_penalty", "ngram_size": 2})
    chat = [{"role": "assistant", "content": "go go go go go"}]
    assert score_one(reward, Sample(completion=chat)).value == -0.75


# LengthReward, per sample


@pytest.mark.parametrize(
    ("words", "expected"),
    [(0, 0.0), (5, 0.5), (10, 1.0), (15, 0.5), (20, 0.0), (25, 0.0)],  # 1 - |n - 10| / 10, floored at 0
)
def test_linear_target(words, expected):
    reward = LengthReward(mode="linear_target", target_length=10, unit="words")
    assert score_one(reward, Sample(completion=" ".join(["w"] * words))).value == pytest.approx(expected)


def test_below_max():
    reward = LengthReward(mode="below_max", max_length=3, unit="words")
    assert [s.value for s in reward.score([Sample(completion="a b c"), Sample(completion="a b c d")])] == [
        1.0,
        0.0,
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "linear_target"},
        {"mode": "linear_target", "target_length": 0},
        {"mode": "below_max"},
        {"mode": "below_max", "max_length": 5, "target_length": 3},
        {"mode": "kimi", "max_length": 5},
        {"mode": "shortest"},
    ],
)
def test_length_config_errors(options):
    with pytest.raises(ValueError):
        LengthReward(**options)


# LengthReward, Kimi k1.5 group mode


def kimi_sample(prompt, tokens, correct, **fields):
    return Sample(
        prompt=prompt,
        completion="(text)",
        fields={"completion_ids": [0] * tokens, "correct": correct, **fields},
    )


def test_kimi_groups_by_prompt_and_group_id():
    reward = LengthReward(mode="kimi")
    samples = [
        kimi_sample("p1", 10, True),
        kimi_sample("other prompt a", 4, True, group_id="g"),
        kimi_sample("p1", 30, False),
        kimi_sample("other prompt b", 6, True, group_id="g"),
        kimi_sample("p1", 20, True),
        kimi_sample("other prompt c", 8, False, group_id="g"),
    ]
    # Group p1: lengths 10, 30, 20 -> lambda = 0.5 - (len - 10) / 20 = 0.5, -0.5, 0.0
    #   correct 10 -> 0.5, incorrect 30 -> min(0, -0.5) = -0.5, correct 20 -> 0.0
    # Group g: lengths 4, 6, 8 -> lambda = 0.5 - (len - 4) / 4 = 0.5, 0.0, -0.5
    #   correct 4 -> 0.5, correct 6 -> 0.0, incorrect 8 -> -0.5
    scores = reward.score(samples)
    assert [s.value for s in scores] == [0.5, 0.5, -0.5, 0.0, 0.0, -0.5]
    assert scores[2].details == {
        "length": 30,
        "unit": "tokens",
        "group_size": 3,
        "group_min_length": 10,
        "group_max_length": 30,
        "lambda": -0.5,
        "correct": False,
    }


def test_kimi_short_wrong_answer_is_not_rewarded():
    reward = LengthReward(mode="kimi")
    # lengths 10, 30: lambda(10) = 0.5, but incorrect -> min(0, 0.5) = 0
    scores = reward.score([kimi_sample("p", 10, 0), kimi_sample("p", 30, 1)])
    assert [s.value for s in scores] == [0.0, -0.5]


def test_kimi_equal_lengths_give_zero():
    reward = LengthReward(mode="kimi")
    assert [s.value for s in reward.score([kimi_sample("p", 5, True), kimi_sample("p", 5, False)])] == [
        0.0,
        0.0,
    ]
    assert score_one(reward, kimi_sample("alone", 9, True)).value == 0.0


def test_kimi_groups_chat_prompts_by_content():
    reward = LengthReward(mode="kimi", unit="chars")
    prompt = [{"role": "user", "content": "Say hi"}]
    samples = [
        Sample(prompt=prompt, completion="hi", fields={"correct": True}),
        Sample(prompt=[dict(m) for m in prompt], completion="hello there", fields={"correct": True}),
    ]
    # lengths 2 and 11 -> lambda 0.5 and -0.5
    assert [s.value for s in reward.score(samples)] == [0.5, -0.5]


def test_kimi_missing_correctness_fails_only_that_sample():
    reward = LengthReward(mode="kimi")
    no_label = Sample(prompt="p", completion="x", id="r2", fields={"completion_ids": [0] * 20})
    bad_label = kimi_sample("p", 15, "yes")
    labelled, missing, bad = reward.score([kimi_sample("p", 10, True), no_label, bad_label])
    # The unlabelled sample's length still sets the group's range: lambda(10) = 0.5 - 0 / 10
    assert labelled.value == 0.5
    assert missing.status is Status.INVALID_INPUT
    assert "sample 'r2'" in missing.reason and "fields.correct" in missing.reason
    assert bad.status is Status.INVALID_INPUT and "must be a bool" in bad.reason


def test_kimi_unmeasurable_length_fails_its_whole_group():
    reward = LengthReward(mode="kimi")
    unmeasurable = Sample(prompt="p", completion="x", id="no-ids", fields={"correct": True})
    scores = reward.score([kimi_sample("p", 10, True), unmeasurable, kimi_sample("q", 10, True)])
    assert [s.status for s in scores] == [Status.INVALID_INPUT, Status.INVALID_INPUT, Status.OK]
    assert "fields.completion_ids" in scores[1].reason
    assert "sample 'no-ids' has no length" in scores[0].reason


def test_kimi_mode_has_no_per_sample_check():
    with pytest.raises(RuntimeError, match="whole groups"):
        LengthReward(mode="kimi").check(kimi_sample("p", 1, True))


def test_build_length():
    reward = rewardlab.build({"type": "length", "mode": "kimi", "unit": "words", "name": "kimi_length"})
    assert isinstance(reward, LengthReward) and reward.name == "kimi_length"
    samples = [
        Sample(prompt="p", completion="a", fields={"correct": True}),
        Sample(prompt="p", completion="a b c", fields={"correct": True}),
    ]
    assert [s.value for s in reward.score(samples)] == [0.5, -0.5]
    with pytest.raises(ConfigError, match="target_length"):
        rewardlab.build({"type": "length", "mode": "linear_target"})


def test_kimi_length_reward_takes_correctness_from_a_nested_reward():
    reward = rewardlab.build(
        {
            "type": "length",
            "mode": "kimi",
            "unit": "chars",
            "correctness": {"type": "string_match", "normalize": True},
        }
    )
    group = [
        Sample(prompt="q", completion="4", reference="4"),  # shortest and correct: lambda 0.5
        Sample(prompt="q", completion="four!", reference="4"),  # longest and wrong: min(0, -0.5)
        Sample(prompt="q", completion="44", reference="4"),  # wrong, lambda 0.25 -> 0
    ]
    scores = reward.score(group)
    # lengths 1, 5, 2: lambda = 0.5 - (len - 1) / 4 -> 0.5, -0.5, 0.25
    assert [s.value for s in scores] == [0.5, -0.5, 0.0]
    assert [s.details["correct"] for s in scores] == [True, False, False]
