import math

import pytest

from rewardlab.rewards.code.python_runner import Unencodable, decode, encode


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
