"""`TextSimilarityReward`: SQuAD's exact match and F1 against the official script (re-typed
here), ROUGE-L against hand-counted subsequences and a plain dynamic programme, BLEU and chrF
against sacrebleu's own sentence functions, on the answer region, with several references, in
bounded time on long inputs."""

import collections
import random
import re
import string
import time

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rewards.text_similarity.rouge import lcs_length, rouge_l, rouge_tokens


# The official SQuAD v2.0 evaluation script (evaluate-v2.0.py), re-typed.
def squad_normalize_answer(s):
    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_get_tokens(s):
    if not s:
        return []
    return squad_normalize_answer(s).split()


def squad_compute_exact(a_gold, a_pred):
    return int(squad_normalize_answer(a_gold) == squad_normalize_answer(a_pred))


def squad_compute_f1(a_gold, a_pred):
    gold_toks = squad_get_tokens(a_gold)
    pred_toks = squad_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def value(metric, completion, reference="", more_references=None):
    """The reward's value; ``more_references`` go in ``fields["refs"]``."""
    options = {} if more_references is None else {"references_field": "refs"}
    fields = {} if more_references is None else {"refs": more_references}
    reward = build({"type": "text_similarity", "metric": metric, "execution": "inline", **options})
    [score] = reward.score([Sample(completion=completion, reference=reference, fields=fields)])
    assert score.status is Status.OK, score
    return score.value


PAIRS = [
    ("The Eiffel Tower", "eiffel tower"),
    ("the cat sat on the mat", "The cat is on the mat."),
    ("Denver Broncos", "Denver Broncos win"),
    ("a", "the"),
    ("", "Paris"),
    ("Paris, France!", "paris france"),
    ("1,000", "1000"),
    ("an apple a day", "apple apple day"),
]


@pytest.mark.parametrize(("prediction", "gold"), PAIRS)
def test_exact_match_and_f1_equal_squads_script(prediction, gold):
    reward_em = value("exact_match", f"<answer>{prediction}</answer>", gold)
    reward_f1 = value("token_f1", f"<think>Paris or Lyon</think><answer>{prediction}</answer>", gold)
    assert reward_em == squad_compute_exact(gold, prediction)
    assert reward_f1 == pytest.approx(squad_compute_f1(gold, prediction), abs=1e-12)


def test_hand_computed_f1():
    # "cat sat on mat" vs "cat is on mat": 3 shared tokens of 4 each: P = R = 0.75.
    assert value("token_f1", "the cat sat on the mat", "The cat is on the mat.") == 0.75
    # "apple day" (articles go) vs "apple apple day": 2 shared; P = 1, R = 2/3, F1 = 0.8.
    assert value("token_f1", "an apple a day", "apple apple day") == pytest.approx(0.8)


def test_several_references_take_the_best_as_squad_does():
    others = ["Denver", "the Denver Broncos"]
    assert value("token_f1", "Denver Broncos", "Broncos of Denver", others) == 1.0
    assert value("token_f1", "Broncos", "Broncos of Denver", others) == pytest.approx(2 / 3)
    assert value("exact_match", "denver", None, others) == 1.0


def test_rouge_l_hand_counted():
    # the cat sat on the mat / the cat is on the mat: LCS "the cat on the mat" = 5 of 6 each.
    assert rouge_l("The cat sat on the mat.", "the cat is on the mat") == pytest.approx(5 / 6)
    # police killed the gunman / the gunman police killed: LCS "police killed" = 2;
    # P = 2/4, R = 2/4 (rouge-score's README example scores ROUGE-L F 0.5 for similar pairs).
    assert rouge_l("police killed the gunman", "the gunman police killed") == 0.5
    assert rouge_tokens("It's 3-D_art, Ünïcode!") == ["it", "s", "3", "d", "art", "ünïcode"]
    assert rouge_l("", "x") == 0.0
    assert value(
        "rouge_l", "<think>x</think>The cat sat on the mat.", "the cat is on the mat"
    ) == pytest.approx(5 / 6)


def plain_lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def test_bit_parallel_lcs_equals_the_dynamic_programme():
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 40))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == plain_lcs(a, b)


def test_bleu_and_chrf_equal_sacrebleus_sentence_scores():
    import sacrebleu

    hypothesis = "The quick brown fox jumps over the lazy dog near the bank."
    references = [
        "A quick brown fox jumped over the lazy dog by the river bank.",
        "The fast fox leaps over a dog.",
    ]
    bleu = value("bleu", f"<answer>{hypothesis}</answer>", references[0], references[1:])
    chrf = value("chrf", f"<answer>{hypothesis}</answer>", references[0], references[1:])
    assert bleu == pytest.approx(sacrebleu.sentence_bleu(hypothesis, references).score / 100, abs=1e-12)
    assert chrf == pytest.approx(sacrebleu.sentence_chrf(hypothesis, references).score / 100, abs=1e-12)
    assert value("bleu", "the cat sat on the mat", "the cat sat on the mat") == 1.0


def test_no_answer_scores_zero_with_the_reason():
    reward = build({"type": "text_similarity", "execution": "inline"})
    [score] = reward.score([Sample(completion="<think>still thinking", reference="x")])
    assert score.value == 0.0 and "never closes" in score.reason


@pytest.mark.parametrize(
    ("sample", "field"),
    [
        (Sample(completion="x"), "reference"),
        (Sample(completion="x", reference="y", fields={"refs": "y"}), "fields.refs"),
        (Sample(completion="x", fields={"refs": []}), "fields.refs"),
    ],
)
def test_missing_references_are_invalid_input(sample, field):
    options = {} if field == "reference" else {"references_field": "refs"}
    reward = build({"type": "text_similarity", "execution": "inline", **options})
    [score] = reward.score([sample])
    assert score.status is Status.INVALID_INPUT and f"{field}:" in score.reason


@pytest.mark.parametrize("metric", ["token_f1", "exact_match", "rouge_l", "bleu", "chrf"])
def test_long_inputs_stay_fast(metric):
    rng = random.Random(1)
    words = [f"w{rng.randint(0, 300)}" for _ in range(40_000)]  # about 200 KB each
    completion, reference = " ".join(words), " ".join(reversed(words))
    started = time.perf_counter()
    result = value(metric, completion, reference)
    assert time.perf_counter() - started < 5.0
    assert 0.0 <= result <= 1.0


def test_the_docstring_example_runs():
    import doctest

    from rewardlab.rewards.text_similarity import reward

    assert doctest.testmod(reward).failed == 0
