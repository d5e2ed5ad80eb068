import pytest

from rewardlab import Score, Status
from rewardlab.prm.applications import auroc, best_of_n, decisive_step, mcnemar_exact


def test_best_of_n_skips_failures_and_takes_the_first_of_equals():
    scores = [Score(value=0.2), Score.failure(Status.TIMEOUT, "slow"), Score(value=0.9), Score(value=0.9)]
    assert best_of_n(scores) == 2
    assert best_of_n([Score.failure(Status.ERROR, "x")]) is None


def test_auroc_by_hand():
    # Successes 0.9, 0.4; failures 0.4, 0.1: pairs (0.9>0.4) (0.9>0.1) (0.4=0.4 half) (0.4>0.1) -> 3.5/4.
    assert auroc([0.9, 0.4, 0.4, 0.1], [True, True, False, False]) == pytest.approx(3.5 / 4)
    assert auroc([0.1, 0.9], [True, False]) == 0.0
    with pytest.raises(ValueError, match="at least one success and one failure"):
        auroc([0.1, 0.2], [True, True])


def test_decisive_step():
    score = Score(value=0.1, steps=[0.9, 0.2, 0.1, 0.1])
    assert decisive_step(score) == 2
    assert decisive_step(score, threshold=0.5) == 1
    assert decisive_step(Score(value=1.0, steps=[0.9]), threshold=0.5) is None
    assert decisive_step(Score(value=1.0)) is None


def test_mcnemar_exact_by_hand():
    # 18 : 2 -> 2 * (C(20,0) + C(20,1) + C(20,2)) / 2^20 = 2 * 211 / 1048576.
    assert mcnemar_exact(18, 2) == pytest.approx(422 / 1048576)
    assert mcnemar_exact(2, 18) == mcnemar_exact(18, 2)
    # 5 : 3 -> 2 * (1 + 8 + 28 + 56) / 256.
    assert mcnemar_exact(5, 3) == pytest.approx(186 / 256)
    assert mcnemar_exact(3, 3) == 1.0  # the doubled tail passes 1
    assert mcnemar_exact(0, 0) == 1.0  # no discordant set: no evidence either way
    with pytest.raises(ValueError, match="must not be negative"):
        mcnemar_exact(-1, 2)
