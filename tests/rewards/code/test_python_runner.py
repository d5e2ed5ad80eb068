import math
import time

import pytest

from rewardlab.rewards.code.python_runner import (
    MAX_DECODED_VALUES,
    DecodeTimeout,
    Unencodable,
    decode,
    encode,
)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        2**80,
        -1.5,
        math.inf,
        "é",
        [1, [2]],
        (1, (2,)),
        {1, 2},
        {"a": (1,), 2: None},
        1 + 2j,
        b"\x00x",
    ],
)
def test_plain_values_round_trip(value):
    assert decode(encode(value)) == value
    assert type(decode(encode(value))) is type(value)


def test_objects_that_bring_their_own_equality_are_refused():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    class SneakyInt(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    for value in (AlwaysEqual(), SneakyInt(3), [SneakyInt(3)], print):
        with pytest.raises(Unencodable):
            encode(value)


def test_decode_refuses_unknown_shapes():
    with pytest.raises(ValueError):
        decode({"object": "x"})
    with pytest.raises(ValueError):
        decode({"float": "1e400"})


def test_decode_refuses_malformed_values_with_a_value_error():
    for malformed in (
        {"tuple": 5},
        {"set": [[1]]},
        {"complex": ["a", 1]},
        {"dict": [[1]]},
        {"complex": [2**1100, 0]},
    ):
        with pytest.raises(ValueError):
            decode(malformed)


def test_values_built_to_share_a_hash_are_refused_quickly():
    colliding = [1 + k * (2**61 - 1) for k in range(1, 10_001)]
    assert len({hash(value) for value in colliding}) == 1
    started = time.perf_counter()
    for shape in ({"set": colliding}, colliding, {"tuple": [{"tuple": [value, 0]} for value in colliding]}):
        with pytest.raises(ValueError, match="share one hash"):
            decode(shape)
    assert time.perf_counter() - started < 1
    # values that only look alike pass: -1 and -2 share a hash, equal values are one value
    assert decode({"set": [-1, -2, *[1 + k * (2**61 - 1) for k in range(1, 7)]]})
    assert decode([colliding[0]] * 1000) == [colliding[0]] * 1000


def test_decode_stops_at_its_deadline_and_its_budget():
    with pytest.raises(DecodeTimeout):
        decode([[0.5] * 100] * 1000, deadline=time.monotonic() - 1)
    with pytest.raises(ValueError, match="too large"):
        decode([[0] * 1000] * (MAX_DECODED_VALUES // 1000 + 1))
