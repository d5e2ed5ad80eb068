import pytest

from rewardlab.benchmarks.best_of_n import BestOfN
from rewardlab.benchmarks.items import Item, calibration_pairs, candidate_id, split_candidate_id
from rewardlab.rewards.contract import Score


def test_calibration_pairs_only_for_probabilities():
    assert calibration_pairs([0.9, 1.0], [0.0]) == [(0.9, True), (1.0, True), (0.0, False)]
    assert calibration_pairs([0.9], [1.5]) == []
    assert calibration_pairs([-0.1], []) == []


def test_best_of_n_reports_calibration_when_its_scores_are_probabilities():
    item = Item(id="q", subset="s", prompt="p", candidates=("a", "b"), gold={"correct": [True, False]})
    as_probabilities = BestOfN().evaluate([item], {"q": [Score(value=0.8), Score(value=0.3)]})
    assert sorted(as_probabilities.calibration) == [(0.3, False), (0.8, True)]
    as_logits = BestOfN().evaluate([item], {"q": [Score(value=2.5), Score(value=-1.0)]})
    assert as_logits.calibration == []


def test_candidate_ids_round_trip_and_bad_ones_are_refused():
    assert split_candidate_id(candidate_id("math/7#b", 3)) == ("math/7#b", 3)
    for bad in ("q", "#3", "q#x"):
        with pytest.raises(ValueError, match="not a candidate id"):
            split_candidate_id(bad)


def test_candidate_fields_must_match_the_candidates():
    with pytest.raises(ValueError, match="item 'q': 1 candidate_fields for 2 candidates"):
        Item(id="q", subset="s", prompt="p", candidates=("a", "b"), candidate_fields=({},))
    item = Item(
        id="q",
        subset="s",
        prompt="p",
        candidates=("a", "b"),
        fields={"k": 1},
        candidate_fields=({"k": 2}, {}),
    )
    assert [sample.fields["k"] for sample in item.samples()] == [2, 1]
