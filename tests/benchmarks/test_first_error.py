import random

import pytest

from rewardlab.benchmarks.first_error import choose_threshold, first_error_f1, predicted_first_error


def test_f1_is_the_harmonic_mean_of_the_two_halves():
    gold = [2, 0, -1, -1, -1, 1]
    predicted = [2, 1, -1, -1, 3, 1]
    # Erroneous items: 2 of 3 exact. Correct items: 2 of 3 left alone.
    result = first_error_f1(predicted, gold)
    assert result.error_accuracy == pytest.approx(2 / 3)
    assert result.correct_accuracy == pytest.approx(2 / 3)
    assert result.f1 == pytest.approx(2 / 3)
    assert result.items == 6


def test_calling_everything_right_or_everything_wrong_scores_zero():
    gold = [1, -1, 0, -1]
    assert first_error_f1([-1, -1, -1, -1], gold).f1 == 0.0
    assert first_error_f1([0, 0, 0, 0], gold).f1 == 0.0


def test_a_half_without_items_scores_zero():
    result = first_error_f1([-1, -1], [-1, -1])
    assert (result.correct_accuracy, result.error_accuracy, result.f1) == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        first_error_f1([1, 2], [1, 2, 3])


def test_the_first_step_under_the_threshold_is_the_prediction():
    assert predicted_first_error([0.9, 0.4, 0.1], 0.5) == 1
    assert predicted_first_error([0.9, 0.5], 0.5) == -1  # at the threshold is not below it
    assert predicted_first_error([], 0.5) == -1


def test_the_threshold_is_the_one_that_separates_the_validation_items():
    scores = [[0.9, 0.2, 0.1], [0.8, 0.7], [0.6, 0.3]]
    gold = [1, -1, 1]
    # A threshold in (0.3, 0.6] flags step 1 of items 0 and 2 and nothing in item 1.
    threshold = choose_threshold(scores, gold)
    assert 0.3 < threshold <= 0.6
    assert first_error_f1([predicted_first_error(s, threshold) for s in scores], gold).f1 == 1.0


def brute_force_threshold(scores, gold):
    candidates = sorted({x for item in scores for x in item})
    candidates.append(candidates[-1] + 1.0)
    f1 = [first_error_f1([predicted_first_error(s, t) for s in scores], gold).f1 for t in candidates]
    return candidates[f1.index(max(f1))]


@pytest.mark.parametrize("seed", range(20))
def test_the_sweep_chooses_what_trying_every_threshold_chooses(seed):
    rng = random.Random(seed)
    scores, gold = [], []
    for _ in range(rng.randint(1, 30)):
        steps = rng.randint(0, 6)
        scores.append([round(rng.random(), 1) for _ in range(steps)])  # ties are common
        gold.append(rng.choice([-1, *range(steps + 1)]))  # one label past the scored steps
    if not any(scores):
        scores[0] = [0.5]
    assert choose_threshold(scores, gold) == brute_force_threshold(scores, gold)
