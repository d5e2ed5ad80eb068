import asyncio
import math

import pytest

from rewardlab import InvalidInput, RuleReward, Sample, Score, Status, Usage


class WordCount(RuleReward):
    name = "word_count"

    def check(self, sample):
        if sample.completion_text == "boom":
            raise RuntimeError("exploded")
        if "needed" in sample.fields and sample.fields["needed"] is None:
            raise InvalidInput("fields.needed", "must not be null")
        return Score(value=len(sample.completion_text.split()))


def test_ok_score_requires_a_finite_value():
    with pytest.raises(ValueError, match="finite"):
        Score(value=None)
    with pytest.raises(ValueError, match="finite"):
        Score(value=math.nan)
    with pytest.raises(ValueError, match="must have value None"):
        Score(value=1.0, status=Status.TIMEOUT)


def test_failure_carries_status_and_reason_without_value():
    score = Score.failure("timeout", "took too long")
    assert score.status is Status.TIMEOUT
    assert score.value is None
    assert not score.ok
    assert score.to_dict()["status"] == "timeout"


def test_to_dict_has_every_field():
    score = Score(
        value=0.5,
        steps=[0.1, 0.9],
        breakdown={"a": 1.0},
        reason="r",
        usage=Usage(prompt_tokens=3, calls=2, cached_calls=2),
        details={"x": [1]},
    )
    assert score.to_dict() == {
        "value": 0.5,
        "status": "ok",
        "steps": [0.1, 0.9],
        "breakdown": {"a": 1.0},
        "reason": "r",
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 0,
            "cost_usd": 0.0,
            "latency_s": 0.0,
            "calls": 2,
            "cached_calls": 2,
            "cache_hit": True,
        },
        "details": {"x": [1]},
    }


def test_usage_adds_up_and_cache_hit_needs_every_call_cached():
    cached = Usage(1, 2, 0.5, 1.0, calls=1, cached_calls=1)
    total = cached + Usage(10, 20, 0.25, 2.0, calls=2, cached_calls=0)
    assert (total.prompt_tokens, total.completion_tokens, total.cost_usd, total.latency_s) == (
        11,
        22,
        0.75,
        3.0,
    )
    assert (total.calls, total.cached_calls) == (3, 1)
    assert cached.cache_hit is True
    assert total.cache_hit is False
    assert Usage().cache_hit is False


def test_completion_text_from_chat_messages():
    sample = Sample(
        prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        completion=[
            {"role": "assistant", "content": "Hello"},
            {"role": "tool", "content": "ignored"},
            {"role": "assistant", "content": [{"type": "text", "text": "there"}]},
        ],
    )
    assert sample.completion_text == "Hello\n\nthere"
    assert sample.prompt_text == "Be brief.\n\nHi"


def test_rule_reward_keeps_one_bad_sample_from_sinking_the_batch():
    samples = [
        Sample(completion="a b c"),
        Sample(completion="boom", id="s-2"),
        Sample(completion="x", fields={"needed": None}),
    ]
    scores = WordCount().score(samples)
    assert [s.status for s in scores] == [Status.OK, Status.ERROR, Status.INVALID_INPUT]
    assert scores[0].value == 3
    assert "sample 's-2'" in scores[1].reason and "exploded" in scores[1].reason
    assert "sample #2" in scores[2].reason and "fields.needed" in scores[2].reason


def test_sync_score_works_inside_a_running_event_loop():
    async def inside_loop():
        return WordCount().score([Sample(completion="one two")])

    assert asyncio.run(inside_loop())[0].value == 2
