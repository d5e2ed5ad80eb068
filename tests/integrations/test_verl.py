"""rewardlab as verl's custom reward function, called the way verl calls it, without verl itself.

verl 0.9.1 calls a custom reward function with keywords (``data_source=``, ``solution_str=``,
``ground_truth=``, ``extra_info=``, plus ``reward_kwargs`` merged in; ``verl/trainer/ppo/reward.py``
and ``verl/experimental/reward_loop/reward_manager/naive.py``), its ``BatchRewardManager`` with
lists (``data_sources=``, ``solution_strs=``, ``ground_truths=``, ``extra_infos=``;
``verl/workers/reward_manager/batch.py``), and older managers positionally. The same calls
against the real verl package are in test_verl_package.py.
"""

import asyncio
import json

import numpy as np
import pytest

from rewardlab import Reward, Sample, Score, register
from rewardlab.errors import ConfigError
from rewardlab.integrations.verl import (
    CONFIG_ENV,
    acompute_score,
    compute_score,
    compute_score_batch,
    reward_for,
    verl_sample,
)
from rewardlab.testing import Reply, ScriptedServer

KEYS = ["score", "failed", "status", "reason"]
#: math_answer starts its CAS workers (seconds on 2 cores); the judge its scripted server.
SLOW = pytest.mark.slow


@register("verl_test_batches")
class RecordBatches(Reward):
    """Value = len(completion); a completion naming a status fails with it. Records batch sizes."""

    name = "verl_test_batches"
    batches: list[int] = []  # noqa: RUF012 - shared on purpose: the entry points build their own instance

    async def ascore(self, samples):
        RecordBatches.batches.append(len(samples))
        await asyncio.sleep(0)
        return [
            Score.failure(s.completion, f"{s.completion} for {s.fields['data_source']}")
            if s.completion in ("timeout", "backend_error")
            else Score(value=float(len(s.completion)))
            for s in samples
        ]


@pytest.fixture
def math_config(tmp_path):
    path = tmp_path / "math.yaml"
    path.write_text("type: math_answer\n")
    return str(path)


@pytest.fixture
def batches_config(tmp_path):
    path = tmp_path / "batches.yaml"
    path.write_text("type: verl_test_batches\n")
    RecordBatches.batches.clear()
    return str(path)


@SLOW
def test_keyword_call_as_verls_reward_loop_makes_it(math_config):
    # NaiveRewardManager.run_single: keywords, reward_kwargs merged in, and verl's own extras.
    call = {"data_source": "openai/gsm8k", "extra_info": {"index": 0, "question": "2+2?"}}
    right = compute_score(solution_str="So \\boxed{4}.", ground_truth="4", reward_config=math_config, **call)
    wrong = compute_score(
        solution_str="So \\boxed{5}.",
        ground_truth="4",
        reward_config=math_config,
        reward_router_address=None,
        reward_model_tokenizer=None,
        **call,
    )
    assert right == {"score": 1.0, "failed": 0.0, "status": "ok", "reason": None}
    assert wrong == {
        "score": 0.0,
        "failed": 0.0,
        "status": "ok",
        "reason": "answer '5' is not equivalent to '4'",
    }


@SLOW
def test_positional_call_and_numeric_ground_truths(math_config):
    # Older managers call compute_score(data_source, solution_str, ground_truth, extra_info).
    half = compute_score("math", "\\boxed{\\frac{1}{2}}", 0.5, None, reward_config=math_config)
    two = compute_score("math", "\\boxed{2}", 2.0, {}, reward_config=math_config)
    assert (half["score"], two["score"]) == (1.0, 1.0)


@SLOW
def test_a_failure_gets_the_failure_value_and_says_why(math_config):
    # Test cases or answer lists as ground truth are no reference for math_answer: not a silent 0.
    result = compute_score(
        "math", "\\boxed{4}", {"cases": [1]}, None, reward_config=math_config, failure_value=-1
    )
    assert list(result) == KEYS
    assert result["score"] == -1.0 and result["failed"] == 1.0
    assert result["status"] == "invalid_input"
    assert "reference" in result["reason"]


def test_batch_signature_scores_the_batch_in_one_call(batches_config):
    results = compute_score_batch(
        data_sources=np.array(["a", "b", "c"], dtype=object),
        solution_strs=["xy", "timeout", "xyz"],
        ground_truths=["1", "2", "3"],
        extra_infos=[{"index": i} for i in range(3)],
        reward_config=batches_config,
        failure_value=-5.0,
    )
    assert RecordBatches.batches == [3]
    assert [r["score"] for r in results] == [2.0, -5.0, 3.0]
    assert [r["failed"] for r in results] == [0.0, 1.0, 0.0]
    assert [r["status"] for r in results] == ["ok", "timeout", "ok"]
    assert results[1]["reason"] == "timeout for b"
    assert all(list(r) == KEYS for r in results)  # verl builds one array per key of the first sample


def test_batch_signature_refuses_lists_of_different_lengths(batches_config):
    with pytest.raises(ValueError, match=r"differ in length: \[2, 1, 2, 2\]"):
        compute_score_batch(["a", "b"], ["x"], ["1", "2"], [{}, {}], reward_config=batches_config)


def test_async_entry_gathers_concurrent_calls_into_batches(batches_config):
    # verl's reward loop starts every sample of a worker's chunk at once and awaits a coroutine
    # function on its own loop.
    async def rollouts(count, **options):
        return await asyncio.gather(*(
            acompute_score(
                data_source="d",
                solution_str="x" * (i + 1),
                ground_truth=None,
                extra_info={},
                reward_config=batches_config,
                **options,
            )
            for i in range(count)
        ))  # fmt: skip

    results = asyncio.run(rollouts(20))
    assert RecordBatches.batches == [20]
    assert [r["score"] for r in results] == [float(i + 1) for i in range(20)]
    RecordBatches.batches.clear()
    asyncio.run(rollouts(20, max_batch_size=8))
    assert RecordBatches.batches == [8, 8, 4]


def test_async_entry_hands_a_reward_error_to_every_waiting_call(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("type: verl_test_batches\n")
    reward = reward_for(str(path))

    async def broken(samples):
        raise RuntimeError("reward crashed")

    reward.ascore = broken  # type: ignore[method-assign]

    async def both():
        calls = [acompute_score("d", "x", None, {}, reward_config=str(path)) for _ in range(2)]
        return await asyncio.gather(*calls, return_exceptions=True)

    errors = asyncio.run(both())
    assert [str(e) for e in errors] == ["reward crashed", "reward crashed"]


@SLOW
def test_scripted_judge_values_and_failures(tmp_path):
    def verdict(body):
        text = json.dumps(body["messages"])
        if "GOOD" in text:
            return Reply(text='{"score": 10}')
        if "MEH" in text:
            return Reply(text='{"score": 4}')
        if "BROKEN" in text:
            return Reply(status=400)
        return Reply(text="no verdict here")

    with ScriptedServer(verdict) as server:
        path = tmp_path / "judge.yaml"
        backend = {"type": "openai", "base_url": server.url, "model": "scripted"}
        judge = {"type": "pointwise_judge", "backend": backend, "client": {"max_attempts": 1}}
        path.write_text(json.dumps(judge))
        options = {"reward_config": str(path), "failure_value": -1.0}
        one = compute_score("chat", "GOOD", None, {"question": "Say something."}, **options)
        batch = compute_score_batch(
            ["chat"] * 3, ["MEH", "BROKEN", "unreadable"], [None] * 3, [{"question": "q"}] * 3, **options
        )

        async def concurrently():
            calls = [
                acompute_score("chat", text, None, {"question": "q"}, **options) for text in ["GOOD", "MEH"]
            ]
            return await asyncio.gather(*calls)

        concurrent = asyncio.run(concurrently())
    # The 1-10 scale maps to [0, 1]: (10 - 1) / 9 and (4 - 1) / 9.
    assert one == {"score": 1.0, "failed": 0.0, "status": "ok", "reason": None}
    assert [r["score"] for r in concurrent] == [1.0, pytest.approx(3 / 9)]
    assert batch[0]["score"] == pytest.approx(3 / 9) and batch[0]["status"] == "ok"
    assert [r["status"] for r in batch[1:]] == ["backend_error", "parse_error"]
    assert [r["score"] for r in batch[1:]] == [-1.0, -1.0] and [r["failed"] for r in batch[1:]] == [1.0, 1.0]
    assert "400" in batch[1]["reason"] and "verdict" in batch[2]["reason"]


@SLOW
def test_the_reward_is_built_once_per_process(math_config, monkeypatch):
    built = []
    compute_score("m", "\\boxed{1}", "1", None, reward_config=math_config)
    first = reward_for(math_config)
    monkeypatch.setattr("rewardlab.rewards.registry.build", lambda *a, **k: built.append(a))
    compute_score("m", "\\boxed{1}", "1", None, reward_config=math_config)
    assert reward_for(math_config) is first and built == []


@SLOW
def test_config_from_the_environment_and_errors_that_name_the_option(math_config, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"reward_kwargs.reward_config: .*{CONFIG_ENV}"):
        compute_score("m", "\\boxed{1}", "1")
    monkeypatch.setenv(CONFIG_ENV, math_config)
    assert compute_score("m", "\\boxed{1}", "1")["score"] == 1.0
    with pytest.raises(
        ConfigError, match=r"reward_kwargs\.failure_valu: unknown option; accepted .*failure_value"
    ):
        compute_score("m", "\\boxed{1}", "1", failure_valu=-1)
    with pytest.raises(ConfigError, match=r"reward_kwargs\.failure_value: .*finite"):
        compute_score("m", "\\boxed{1}", "1", failure_value=float("nan"))


def test_verl_arguments_become_a_sample():
    extra = {"index": np.int64(3), "question": "Add.", "tests": np.array([1, 2])}
    sample = verl_sample("lighteval/MATH", "\\boxed{7}", np.array(["7", "seven"], dtype=object), extra)
    assert sample == Sample(
        prompt="Add.",
        completion="\\boxed{7}",
        reference=None,
        fields={
            "index": 3,
            "question": "Add.",
            "tests": [1, 2],
            "data_source": "lighteval/MATH",
            "ground_truth": ["7", "seven"],
        },
    )
    assert type(sample.fields["index"]) is int
    assert verl_sample("d", "s", 3, {"prompt": [{"role": "user", "content": "hi"}]}).prompt == [
        {"role": "user", "content": "hi"}
    ]
    assert [verl_sample("d", "s", truth).reference for truth in (3, 2.0, 0.25, "x", True)] == [
        "3",
        "2",
        "0.25",
        "x",
        None,
    ]
