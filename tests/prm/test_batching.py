from rewardlab.prm.batching import length_batches


def test_batches_are_longest_first_under_the_token_budget():
    lengths = {0: 10, 1: 10, 2: 10, 3: 10}
    assert length_batches(lengths, batch_tokens=20, max_padding=0.5) == [[0, 1], [2, 3]]


def test_padding_keeps_a_short_sequence_out_of_a_long_batch():
    lengths = {"short": 2, "long": 10, "near": 9}
    # With "near", 1 of 20 tokens is padding; with "short" too, 9 of 30 would be.
    assert length_batches(lengths, batch_tokens=100, max_padding=0.1) == [["long", "near"], ["short"]]
    assert length_batches(lengths, batch_tokens=100, max_padding=0.5) == [["long", "near", "short"]]


def test_a_sequence_over_the_budget_is_a_batch_of_its_own():
    assert length_batches({0: 50, 1: 3}, batch_tokens=10, max_padding=0.9) == [[0], [1]]
