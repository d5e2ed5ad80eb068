import asyncio
import pickle

import pytest

from rewardlab import Combine, Reward, RuleReward, Score, Status
from rewardlab.errors import RewardFailed
from rewardlab.integrations.trl import AsyncRewardFunc, RewardFunc, as_reward_func


class EchoReference(RuleReward):
    """Value = float(reference); a status when the completion names one."""

    name = "echo"

    def check(self, sample):
        if sample.completion_text in {s.value for s in Status} - {"ok"}:
            return Score.failure(sample.completion_text, f"asked for {sample.completion_text}")
        return Score(
            value=float(sample.reference),
            breakdown={"double": 2 * float(sample.reference)},
            details={"fields": sorted(sample.fields), "id": sample.id},
        )


class Remote(Reward):
    name = "remote"
    io_bound = True

    async def ascore(self, samples):
        await asyncio.sleep(0)
        return [Score(value=1.0) for _ in samples]


def test_name_and_kind_follow_trls_rules():
    from trl.trainer.utils import get_callable_name, is_async_callable

    sync_func, async_func = as_reward_func(EchoReference()), as_reward_func(Remote())
    assert isinstance(sync_func, RewardFunc) and isinstance(async_func, AsyncRewardFunc)
    assert get_callable_name(sync_func) == "echo" and get_callable_name(async_func) == "remote"
    assert not is_async_callable(sync_func) and is_async_callable(async_func)


def test_columns_become_fields_and_the_answer_column_the_reference():
    func = as_reward_func(EchoReference())
    values = func(
        prompts=["p1", "p2"],
        completions=["c1", "c2"],
        completion_ids=[[1], [2, 3]],
        answer=[3, "4.5"],
        id=["a", "b"],
        difficulty=["easy", "hard"],
        trainer_state=object(),
    )
    assert values == [3.0, 4.5]
    samples = func.samples(["p"], ["c"], [[7]], {"answer": ["1"], "solution": ["2"]})
    assert samples[0].reference == "1"  # "answer" comes before "solution"
    assert samples[0].fields["completion_ids"] == [7]


def test_explicit_reference_column_must_exist():
    func = as_reward_func(EchoReference(), reference_column="gold_answer")
    with pytest.raises(KeyError, match="gold_answer"):
        func(prompts=["p"], completions=["c"], answer=["1"])


@pytest.mark.parametrize(
    ("on_error", "expected"),
    [("none", [1.0, None, None]), ("value", [1.0, -1.0, None])],
)
def test_failures_and_not_applicable(on_error, expected):
    func = as_reward_func(EchoReference(), on_error=on_error, error_value=-1.0)
    values = func(
        prompts=["p"] * 3, completions=["fine", "timeout", "not_applicable"], answer=["1", "1", "1"]
    )
    assert values == expected


def test_raise_mode_names_the_failures():
    func = as_reward_func(EchoReference(), on_error="raise")
    with pytest.raises(RewardFailed, match=r"1 of 2 samples failed.*backend_error"):
        func(prompts=["p", "p"], completions=["fine", "backend_error"], answer=["1", "1"])


def test_components_reach_log_metric_and_reasons_reach_log_extra():
    metrics, extra = {}, {}
    combine = Combine({"a": EchoReference(), "b": EchoReference()}, name="both")
    func = as_reward_func(combine)
    values = func(
        prompts=["p"] * 3,
        completions=["x", "y", "timeout"],
        answer=["1", "3", "5"],
        log_metric=metrics.__setitem__,
        log_extra=extra.__setitem__,
    )
    assert values == [2.0, 6.0, None]
    # Means over the samples that have the component: (1 + 3) / 2 and (2 + 6) / 2.
    assert metrics == {
        "both/a": 2.0,
        "both/a/double": 4.0,
        "both/b": 2.0,
        "both/b/double": 4.0,
        "both/failed_frac": pytest.approx(1 / 3),
    }
    assert extra["both/status"] == ["ok", "ok", "timeout"]
    assert extra["both/reason"][:2] == [None, None] and "timeout" in extra["both/reason"][2]


def test_async_form_is_awaitable():
    func = as_reward_func(Remote())
    assert asyncio.run(func(prompts=["p", "q"], completions=["c", "d"])) == [1.0, 1.0]


def test_chat_format_completions():
    func = as_reward_func(EchoReference())
    prompts = [[{"role": "user", "content": "2?"}]]
    completions = [[{"role": "assistant", "content": "fine"}]]
    assert func(prompts=prompts, completions=completions, reference=["2"]) == [2.0]


def test_pickles_with_its_name():
    func = pickle.loads(pickle.dumps(as_reward_func(EchoReference(), on_error="value")))
    assert func.__name__ == "echo" and func.on_error == "value"
    assert func(prompts=["p"], completions=["c"], answer=["7"]) == [7.0]
