import asyncio

import pytest

from rewardlab import Combine, ConfigError, Reward, Route, RuleReward, Sample, Score, Status, build


class Fixed(RuleReward):
    """Returns a value looked up in the sample's fields, or a status when the value is a string."""

    def __init__(self, key, name=None):
        self.key = key
        self.name = name or key

    def check(self, sample):
        value = sample.fields.get(self.key)
        if isinstance(value, str):
            return Score.failure(value, f"{self.key} said {value}")
        return Score(value=value, breakdown={"raw": value * 10}, details={"seen": self.key})


def sample(**fields):
    return Sample(completion="c", fields=fields)


def test_weighted_sum_keeps_every_component_and_nested_breakdowns():
    reward = Combine({"a": Fixed("a"), "b": Fixed("b")}, weights={"a": 2.0, "b": 0.5})
    [score] = reward.score([sample(a=1.0, b=0.4)])
    assert score.value == pytest.approx(2.0 * 1.0 + 0.5 * 0.4)
    assert score.breakdown == {"a": 1.0, "a/raw": 10.0, "b": 0.4, "b/raw": 4.0}
    assert score.details == {"a": {"seen": "a"}, "b": {"seen": "b"}}


def test_min_mode_takes_the_worst_component():
    [score] = Combine({"a": Fixed("a"), "b": Fixed("b")}, mode="min").score([sample(a=0.7, b=0.2)])
    assert score.value == 0.2


def test_gate_zeroes_the_value_when_closed_and_reports_it():
    reward = Combine({"a": Fixed("a")}, gate=Fixed("fmt"), gate_fail_value=-1.0)
    opened, closed = reward.score([sample(a=0.8, fmt=1.0), sample(a=0.8, fmt=0.0)])
    assert opened.value == 0.8 and opened.breakdown["gate/fmt"] == 1.0
    assert closed.value == -1.0 and closed.breakdown["a"] == 0.8 and closed.details["gate_closed"]


def test_a_failed_component_fails_the_combination_by_default():
    [score] = Combine({"a": Fixed("a"), "b": Fixed("b")}).score([sample(a=1.0, b="timeout")])
    assert score.status is Status.TIMEOUT
    assert score.value is None
    assert "'b'" in score.reason and score.breakdown == {"a": 1.0, "a/raw": 10.0}


def test_skip_policy_combines_the_rest_and_lists_what_was_skipped():
    reward = Combine({"a": Fixed("a"), "b": Fixed("b")}, on_component_failure="skip")
    [score] = reward.score([sample(a=1.0, b="backend_error")])
    assert score.value == 1.0 and score.details["skipped"] == {"b": "backend_error"}


def test_not_applicable_components_are_left_out_and_all_missing_is_not_applicable():
    reward = Combine({"a": Fixed("a"), "b": Fixed("b")})
    partial, none = reward.score(
        [sample(a=0.5, b="not_applicable"), sample(a="not_applicable", b="not_applicable")]
    )
    assert partial.value == 0.5 and partial.ok
    assert none.status is Status.NOT_APPLICABLE


def test_combine_rejects_inconsistent_configuration():
    with pytest.raises(ConfigError, match=r"Combine.weights: name unknown components: \['z'\]"):
        Combine({"a": Fixed("a")}, weights={"z": 1.0})
    with pytest.raises(ConfigError, match=r"Combine\.mode: min takes no weights"):
        Combine({"a": Fixed("a")}, mode="min", weights={"a": 2.0})
    inner = {"type": "length", "mode": "below_max", "max_length": 1, "weight": 2}
    nested = {"type": "combine", "mode": "min", "components": {"a": inner}}
    with pytest.raises(ConfigError, match=r"components\.b\.mode: min takes no weights"):
        build({"type": "combine", "components": {"b": nested}})


class Recorder(Reward):
    """Records the batches it receives, to check that Route sends each sample to one reward."""

    def __init__(self, value):
        self.value = value
        self.name = f"recorder{value}"
        self.batches = []

    async def ascore(self, samples):
        self.batches.append([s.id for s in samples])
        await asyncio.sleep(0)
        return [Score(value=self.value) for _ in samples]


def test_route_dispatches_by_field_and_restores_order():
    math_reward, code_reward = Recorder(1.0), Recorder(2.0)
    route = Route({"math": math_reward, "code": code_reward}, by="task")
    samples = [
        Sample(id=str(i), fields={"task": task}) for i, task in enumerate(["math", "code", "math", "poetry"])
    ]
    scores = route.score(samples)
    assert [s.value for s in scores[:3]] == [1.0, 2.0, 1.0]
    assert scores[3].status is Status.NOT_APPLICABLE and "poetry" in scores[3].reason
    assert math_reward.batches == [["0", "2"]] and code_reward.batches == [["1"]]
    assert scores[0].breakdown == {"math": 1.0} and scores[1].details["route"] == "code"


def test_route_default_and_missing_field():
    route = Route({"math": Recorder(1.0)}, by="task", default=Recorder(5.0))
    scores = route.score([Sample(fields={"task": "other"}), Sample(fields={})])
    assert [s.value for s in scores] == [5.0, 5.0]
    [missing] = Route({"math": Recorder(1.0)}, by="task").score([Sample(id="q7")])
    assert (
        missing.status is Status.INVALID_INPUT and "fields.task" in missing.reason and "q7" in missing.reason
    )


class Miscounting(Reward):
    name = "miscounting"

    async def ascore(self, samples):
        return []


def test_a_reward_that_breaks_the_one_score_per_sample_rule_fails_its_scores():
    [score] = Combine({"m": Miscounting(), "ok": Fixed("a")}).score([sample(a=1.0)])
    assert score.status is Status.ERROR
    assert "returned 0 scores for 1 samples" in score.reason and score.breakdown["ok"] == 1.0


class Raising(Reward):
    name = "raising"

    async def ascore(self, samples):
        raise KeyError("bug")


def test_a_component_that_raises_fails_its_scores_not_the_batch():
    combine = Combine({"bad": Raising(), "good": Fixed("a")}, on_component_failure="skip")
    [score] = combine.score([sample(a=0.5)])
    assert score.value == 0.5 and score.details["skipped"] == {"bad": "error"}
    [routed] = Route({"x": Raising()}, by="task").score([Sample(fields={"task": "x"})])
    assert routed.status is Status.ERROR and "KeyError" in routed.reason


def test_a_gate_that_cannot_score_is_closed_and_one_that_does_not_apply_is_open():
    reward = Combine({"a": Fixed("a")}, gate=Fixed("fmt"), on_component_failure="skip")
    broken, inapplicable = reward.score([sample(a=0.8, fmt="error"), sample(a=0.8, fmt="not_applicable")])
    assert broken.value == 0.0 and broken.details["gate_closed"]
    assert inapplicable.value == 0.8
