"""`repetition_penalty` with ``max_repeats``: a penalty on the count of repeats, which padding
cannot dilute.

The share form, ``(1 - unique / total) * max_penalty``, falls when fresh text is appended
(`rewardlab probe`'s ``fluff_padding`` won on right math answers with it). The count form must
not: whatever is added after a space, a line break or as token ids, the penalty stays or grows.
Checked on the real completions shipped in ``examples/`` (math and chat rollouts, HH answers)
with random paddings, beside exact values worked out by hand and time bounds on 200 KB inputs.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import Sample, Status
from rewardlab.probe import Target
from rewardlab.probe.registry import exploits_named
from rewardlab.rewards.shaping import RepetitionPenalty
from rewardlab.rewards.visible_text import as_drawn
from tests.adversarial_text import CATALOGUE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _text(completion: object) -> str:
    if isinstance(completion, str):
        return completion
    return "\n".join(str(message.get("content") or "") for message in completion)  # type: ignore[union-attr]


def _real_completions() -> list[str]:
    """Every completion and preference answer shipped in examples/ (a few rows there are broken
    on purpose and skipped)."""
    texts = []
    for name in ("rollouts.jsonl", "preferences_dev.jsonl", "preferences_train.jsonl"):
        for line in (EXAMPLES / name).read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            for key in ("completion", "chosen", "rejected"):
                if key in row:
                    texts.append(_text(row[key]))
    return [text for text in texts if text.strip()]


REAL = _real_completions()
WORDS = sorted({word for text in REAL for word in text.split()})


def value(reward: RepetitionPenalty, completion: str) -> float:
    (score,) = reward.score([Sample(completion=completion)])
    assert score.status is Status.OK, score.reason
    assert score.value is not None
    return score.value


def checked(reward: RepetitionPenalty, completion: str) -> float:
    """`value` through the per-sample check that `score` runs, for the loops over many texts."""
    score = reward.check(Sample(completion=completion))
    assert score.status is Status.OK and score.value is not None, score.reason
    return score.value


def test_the_examples_hold_enough_real_text():
    assert len(REAL) > 150 and sum(len(text) for text in REAL) > 40_000


# Exact values, by hand: repeats = total n-grams - unique n-grams.


@pytest.mark.parametrize(
    ("completion", "ngram_size", "max_repeats", "max_penalty", "expected"),
    [
        # go go go go go: 4 bigrams, 1 unique -> 3 repeats; 3/10 of the way to -1
        ("go go go go go", 2, 10, -1.0, -0.3),
        # the same 3 repeats cap at max_repeats=2: the full penalty
        ("go go go go go", 2, 2, -1.0, -1.0),
        ("go go go go go", 2, 3, -0.5, -0.5),
        # the cat sat on the mat the cat sat: 7 trigrams, "the cat sat" twice -> 1 repeat; 1/4 * -0.5
        ("the cat sat on the mat the cat sat", 3, 4, -0.5, -0.125),
        # a b a b a b: bigrams ab ba ab ba ab -> 5 total, 2 unique -> 3 repeats; 3/6 * -1
        ("a b a b a b", 2, 6, -1.0, -0.5),
        # lowercased: Go go GO -> 3 unigrams, 1 unique -> 2 repeats; 2/4 * -1
        ("Go go GO", 1, 4, -1.0, -0.5),
        ("every word here is new", 2, 1, -1.0, 0.0),
        ("too short", 3, 1, -1.0, 0.0),
        ("", 3, 1, -1.0, 0.0),
    ],
)
def test_counted_repeats_by_hand(completion, ngram_size, max_repeats, max_penalty, expected):
    reward = RepetitionPenalty(ngram_size=ngram_size, max_repeats=max_repeats, max_penalty=max_penalty)
    assert value(reward, completion) == pytest.approx(expected)
    if expected == 0:
        assert str(value(reward, completion)) == "0.0"  # never -0.0


def test_counted_repeats_in_characters_and_token_ids():
    # abcabc: trigrams abc bca cab abc -> 4 total, 3 unique -> 1 repeat; 1/3 * -1
    chars = RepetitionPenalty(ngram_size=3, unit="chars", max_repeats=3)
    assert value(chars, "abcabc") == pytest.approx(-1 / 3)
    # 5 5 5 5 5: 4 bigrams, 1 unique -> 3 repeats; 3/8 * -1
    tokens = RepetitionPenalty(ngram_size=2, unit="tokens", max_repeats=8)
    (score,) = tokens.score([Sample(completion="x", fields={"completion_ids": [5, 5, 5, 5, 5]})])
    assert score.value == pytest.approx(-0.375)


def test_details_and_reason_name_the_count():
    reward = RepetitionPenalty(ngram_size=2, max_repeats=10)
    (score,) = reward.score([Sample(completion="go go go go go")])
    assert score.details == {
        "unit": "words",
        "ngram_size": 2,
        "max_repeats": 10,
        "total_ngrams": 4,
        "unique_ngrams": 1,
    }
    assert score.reason == "3 of 4 2-grams are repeats"


def test_padding_dilutes_the_share_but_not_the_count():
    loop, padded = "go go go go go", "go go go go go one two three four five six"
    share, count = RepetitionPenalty(ngram_size=2), RepetitionPenalty(ngram_size=2, max_repeats=10)
    # share: 3 of 4 bigrams -> -0.75; padded: 10 bigrams, 7 unique -> 3 of 10 -> -0.3
    assert (value(share, loop), value(share, padded)) == (pytest.approx(-0.75), pytest.approx(-0.3))
    # count: 3 repeats before and after
    assert value(count, loop) == value(count, padded) == pytest.approx(-0.3)


def test_look_alike_letters_and_zero_width_characters_still_repeat():
    reward = RepetitionPenalty(ngram_size=2, max_repeats=8)
    plain = "we add the two numbers. we add the two numbers."
    # 9 bigrams: "we add", "add the", "the two", "two numbers." twice and "numbers. we" once:
    # 5 unique -> 4 repeats; 4/8 * -1
    assert value(reward, plain) == pytest.approx(-0.5)
    disguised = "we add the two numbers. w\u0435 \u0430dd th\u200be tw\u043e numbers."
    assert value(reward, disguised) == pytest.approx(-0.5)
    full_width = "we add the two numbers. \uff57\uff45 \uff41\uff44\uff44 the two numbers."
    assert value(reward, full_width) == pytest.approx(-0.5)
    # The share form reads the text as drawn too (raw, the disguised copy would repeat nothing).
    assert value(RepetitionPenalty(ngram_size=2), disguised) == pytest.approx(-4 / 9)


# Red-team round 22b (finding 3): each copy of a 60-copy loop spelled with different look-alikes
# (Unicode's confusables for o, u, n, h, l, y, g, c, r), or its spaces written as U+1D159 (a
# musical null notehead, drawn blank), read the same to a person and must repeat the same.
LOOP = "Now, running through our long computation once, confirming our outcome holds. "
LOOK_ALIKES = {
    "o": "\u0585",  # ARMENIAN SMALL LETTER OH
    "u": "\u057d",  # ARMENIAN SMALL LETTER SEH
    "n": "\u0578",  # ARMENIAN SMALL LETTER VO
    "h": "\u0570",  # ARMENIAN SMALL LETTER HO
    "l": "\u04cf",  # CYRILLIC SMALL LETTER PALOCHKA
    "y": "\u04af",  # CYRILLIC SMALL LETTER STRAIGHT U
    "g": "\u0261",  # LATIN SMALL LETTER SCRIPT G
    "c": "\u03f2",  # GREEK LUNATE SIGMA SYMBOL
    "r": "\u0433",  # CYRILLIC SMALL LETTER GHE
}


def _disguised_loop(letters: str, copies: int = 60, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(
        "".join(LOOK_ALIKES[char] if char in letters and rng.random() < 0.5 else char for char in LOOP)
        for _ in range(copies)
    )


@pytest.mark.parametrize("letters", ["ounhl", "ounhlygcr"])  # the red team's STRICT set, and all
def test_a_loop_varied_with_look_alike_letters_still_repeats(letters):
    reward = RepetitionPenalty(ngram_size=4, max_repeats=400, max_penalty=-0.5)
    plain, disguised = LOOP * 60, _disguised_loop(letters)
    assert len(set(disguised.split())) > 3 * len(set(plain.split()))  # the copies differ raw
    # 60 copies of 11 words, 660 words: 657 4-grams; the text has period 11, so 11 distinct 4-grams
    # (one starting at each word of a copy): 646 repeats, over max_repeats=400, so the full -0.5.
    assert value(reward, plain) == value(reward, disguised) == -0.5
    (score,) = RepetitionPenalty(ngram_size=4).score([Sample(completion=disguised)])
    assert score.details["total_ngrams"] == 657 and score.details["unique_ngrams"] == 11


def test_spaces_drawn_as_a_blank_notehead_still_separate_words():
    reward = RepetitionPenalty(ngram_size=4, max_repeats=400, max_penalty=-0.5)
    for blank in ("\U0001d159", "\u2800", "\u3164"):
        assert value(reward, (LOOP * 60).replace(" ", blank)) == -0.5, hex(ord(blank))
        assert len(as_drawn(LOOP.replace(" ", blank)).split()) == 11
    overlong = rewardlab.build({"type": "length", "mode": "below_max", "max_length": 100, "unit": "words"})
    (score,) = overlong.score([Sample(completion=(LOOP * 60).replace(" ", "\U0001d159"))])
    # 60 copies of 11 words, not one long word: over max_length, so 0.0.
    assert (score.value, score.details["length"]) == (0.0, 660)


def test_every_format_character_is_dropped_as_drawn():
    format_characters = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert len(format_characters) > 150
    assert [hex(ord(c)) for c in format_characters if as_drawn(f"a{c}b") != "ab"] == []


def test_a_loop_hidden_in_a_comment_still_counts():
    reward = RepetitionPenalty(ngram_size=2, max_repeats=4)
    # <!-- go go go go go -->: 7 words, bigrams "<!-- go", "go go" x4, "go -->": 3 repeats; 3/4 * -1
    assert value(reward, "<!-- go go go go go -->") == pytest.approx(-0.75)


def test_built_from_a_config():
    reward = rewardlab.build({"type": "repetition_penalty", "ngram_size": 2, "max_repeats": 6})
    (score,) = reward.score([Sample(completion=[{"role": "assistant", "content": "a b a b a b"}])])
    assert score.value == pytest.approx(-0.5)


def test_max_repeats_must_be_positive():
    with pytest.raises(ValueError, match="max_repeats"):
        RepetitionPenalty(max_repeats=0)
    with pytest.raises(rewardlab.ConfigError, match="max_repeats"):
        rewardlab.build({"type": "repetition_penalty", "max_repeats": -3})


# Padding never lowers the count: every real completion, many paddings.

SEPARATORS = (" ", "\n", "\n\n", "\t")
REWARDS = [
    RepetitionPenalty(ngram_size=n, unit=unit, max_repeats=m, max_penalty=-0.5)
    for n, unit, m in (
        (1, "words", 50),
        (3, "words", 20),
        (4, "words", 400),
        (4, "chars", 100),
        (8, "chars", 2000),
    )
]


def _padding(rng: random.Random, completion: str) -> str:
    """Text a policy could append: fresh words, another answer, its own last paragraph again,
    unicode noise, in one to four pieces."""
    pieces = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        if kind == 0:
            pieces.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 300))))
        elif kind == 1:
            pieces.append(rng.choice(REAL))
        elif kind == 2:
            pieces.append(completion.rsplit("\n\n", 1)[-1])
        else:
            pieces.append("".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randint(1, 200))))
    return rng.choice(SEPARATORS) + rng.choice(SEPARATORS).join(pieces)


@pytest.mark.slow
def test_appending_never_lowers_the_penalty_on_real_completions():
    rng = random.Random(0)
    pairs = repetitive = diluted = 0
    share = RepetitionPenalty(ngram_size=4, max_penalty=-0.5)
    for completion in REAL:
        for _ in range(5):
            padding = _padding(rng, completion)
            for reward in REWARDS:
                assert checked(reward, completion + padding) <= checked(reward, completion), (
                    completion[:80],
                    padding[:80],
                )
                pairs += 1
            if checked(share, completion) < 0:
                repetitive += 1
                diluted += checked(share, completion + padding) > checked(share, completion)
    assert pairs == 5 * len(REAL) * len(REWARDS)
    # The same paddings dilute the share form of most answers that repeat themselves at all.
    assert repetitive > 50 and diluted > repetitive / 2, (diluted, repetitive)


@pytest.mark.slow
def test_the_probes_padding_exploits_never_lower_it():
    exploits = exploits_named(["fluff_padding", "repetition"])
    reward = RepetitionPenalty(ngram_size=4, max_repeats=400, max_penalty=-0.5)
    made = 0
    for index, completion in enumerate(REAL):
        target = Target(Sample(prompt="Q", completion=completion, id=str(index)), seed=index)
        for exploit in exploits:
            variant = exploit.make(target)
            if variant is None:
                continue
            made += 1
            assert checked(reward, variant) <= checked(reward, completion), (exploit.name, completion[:80])
    assert made > len(REAL)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(0, len(REAL) - 1),
    padding=st.text(max_size=300),
    separator=st.sampled_from(SEPARATORS),
    prepend=st.booleans(),
    reward=st.sampled_from(REWARDS),
)
def test_added_text_never_lowers_the_penalty(index, padding, separator, prepend, reward):
    completion = REAL[index]
    padded = padding + separator + completion if prepend else completion + separator + padding
    assert checked(reward, padded) <= checked(reward, completion)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(REAL) - 1), ids=st.lists(st.integers(0, 50), max_size=200))
def test_appended_token_ids_never_lower_the_penalty(index, ids):
    reward = RepetitionPenalty(ngram_size=2, unit="tokens", max_repeats=30)
    base = [ord(char) % 50 for char in REAL[index]]
    scores = reward.score(
        [Sample(fields={"completion_ids": base}), Sample(fields={"completion_ids": base + ids})]
    )
    assert scores[1].value <= scores[0].value


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(REAL) - 1), glued=st.text(alphabet="abcdefgh.,", min_size=1, max_size=50))
def test_glued_text_undoes_at_most_one_repeat_in_words(index, glued):
    # Glued onto the last word, text changes that word, and the last n-gram is the only one with it.
    reward = RepetitionPenalty(ngram_size=3, max_repeats=10, max_penalty=-1.0)
    before, after = checked(reward, REAL[index]), checked(reward, REAL[index] + glued)
    assert after <= before + 0.1 + 1e-12


# Time bounds: a reward that reads model text must stay linear on adversarial input.

SIZE = 200_000


def _time_in_child(config: dict, text: str, queue) -> None:
    reward = rewardlab.build(config)
    started = time.perf_counter()
    (score,) = reward.score([Sample(completion=text)])
    queue.put((time.perf_counter() - started, score.status.value))


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["words", "chars"])
@pytest.mark.parametrize("kind", ["prose", "long_paragraph", "mixed_unicode", "run_of_a", "one_word_loop"])
def test_200_kb_inputs_score_in_bounded_time(unit, kind):
    if kind == "run_of_a":
        text = "a" * SIZE
    elif kind == "one_word_loop":
        text = "again " * (SIZE // 6)
    else:
        text = CATALOGUE[kind](SIZE)
    assert len(text) >= SIZE * 0.9
    config = {"type": "repetition_penalty", "ngram_size": 4, "unit": unit, "max_repeats": 400}
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_time_in_child, args=(config, text, queue))
    child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
        pytest.fail(f"{kind} ({unit}): still running after 20 s")
    seconds, status = queue.get(timeout=5)
    assert status == "ok"
    assert seconds < 3.0, f"{kind} ({unit}): {seconds:.2f} s for {len(text)} characters"
