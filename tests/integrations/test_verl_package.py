"""rewardlab inside the real verl package (tested with verl 0.9.1 on CPU), called the way verl's
trainer calls its rewards: a ``RewardLoopWorker`` built from a trainer config scores a real
``DataProto`` of tokenized prompts and responses, and ``RewardLoopManager`` gathers the workers'
answers into ``rm_scores`` and ``reward_extra_info`` arrays on a local Ray cluster.

verl pins transformers below rewardlab's pin, so it is not one of rewardlab's extras: these tests
are skipped unless verl is installed (in an environment of its own; see docs/recipes/verl.md).
"""

import json

import numpy as np
import pytest

from rewardlab import Reward, Score, register

verl = pytest.importorskip("verl", reason="verl is not installed (see docs/recipes/verl.md)")
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402 - after the skip: verl brings omegaconf
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop.reward_loop import RewardLoopManager, RewardLoopWorker  # noqa: E402
from verl.trainer.ppo.reward import extract_reward  # noqa: E402
from verl.workers.reward_manager import BatchRewardManager  # noqa: E402

from rewardlab.integrations.verl import compute_score_batch  # noqa: E402

pytestmark = pytest.mark.slow  # importing verl alone takes seconds

PROMPT_LENGTH, RESPONSE_LENGTH = 24, 40


@register("verl_test_seen")
class RecordSamples(Reward):
    """Value = number of samples in the batch; records every sample it is given."""

    name = "verl_test_seen"
    seen: list = []  # noqa: RUF012 - shared on purpose: verl builds its own instance

    async def ascore(self, samples):
        RecordSamples.seen.extend(samples)
        return [Score(value=float(len(samples))) for _ in samples]


@pytest.fixture
def tokenizer_path(tiny_tokenizer, tmp_path):
    path = tmp_path / "tokenizer"
    tiny_tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture
def math_config(tmp_path):
    path = tmp_path / "math.yaml"
    path.write_text("type: math_answer\n")
    return str(path)


def rollouts(tokenizer, prompts, responses, truths, **columns):
    """A DataProto as verl's rollout leaves it: prompts left-padded, responses right-padded and
    ended by EOS, one attention mask over both."""
    count = len(prompts)
    prompt_ids = torch.full((count, PROMPT_LENGTH), tokenizer.pad_token_id)
    response_ids = torch.full((count, RESPONSE_LENGTH), tokenizer.pad_token_id)
    mask = torch.zeros(count, PROMPT_LENGTH + RESPONSE_LENGTH, dtype=torch.long)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        prompt_tokens = tokenizer(prompt)["input_ids"]
        response_tokens = [*tokenizer(response)["input_ids"], tokenizer.eos_token_id]
        prompt_ids[row, PROMPT_LENGTH - len(prompt_tokens) :] = torch.tensor(prompt_tokens)
        response_ids[row, : len(response_tokens)] = torch.tensor(response_tokens)
        mask[row, PROMPT_LENGTH - len(prompt_tokens) : PROMPT_LENGTH + len(response_tokens)] = 1
    non_tensors = {
        "data_source": np.array(["openai/gsm8k"] * count, dtype=object),
        "reward_model": np.array([{"ground_truth": t, "style": "rule"} for t in truths], dtype=object),
        "extra_info": np.array([{"index": i, "split": "test"} for i in range(count)], dtype=object),
        **{key: np.array(values, dtype=object) for key, values in columns.items()},
    }
    tensors = {
        "prompts": prompt_ids,
        "responses": response_ids,
        "attention_mask": mask,
        "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def trainer_config(tokenizer_path, **reward):
    """The keys of verl's ppo_trainer.yaml that its reward loop reads, with ``reward`` merged in."""
    base = {
        "num_workers": 1,
        "custom_reward_function": {"path": None, "name": "compute_score"},
        "reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": None}},
        "reward_model": {"enable": False, "enable_resource_pool": False, "model_path": None},
        "sandbox_fusion": None,
    }
    return OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": tokenizer_path, "tokenizer_path": None}},
        "reward": {**base, **reward},
    })  # fmt: skip


def score_on_worker(config, data):
    """What ``RewardLoopManager`` asks of each of its Ray actors, on the worker's own loop."""
    worker = RewardLoopWorker(config)
    return worker.loop.run_until_complete(worker.compute_score_batch(data))


MATH = {
    "prompts": ["2+2?", "2+2?", "Half?"],
    "responses": ["\\boxed{4}", "\\boxed{5}", "\\boxed{0.5}"],
    "truths": ["4", "4", {"inputs": [1]}],  # test cases are no reference for math_answer
}
EXPECTED_SCORES = [1.0, 0.0, -1.0]


def check_math_results(extra):
    assert list(extra["score"]) == EXPECTED_SCORES
    assert list(extra["failed"]) == [0.0, 0.0, 1.0]
    assert list(extra["status"]) == ["ok", "ok", "invalid_input"]
    assert extra["reason"][0] is None and extra["reason"][1] == "answer '5' is not equivalent to '4'"
    assert "reference" in extra["reason"][2]


@pytest.mark.parametrize("function", ["compute_score", "acompute_score"])
def test_custom_reward_function_in_the_naive_reward_loop(
    function, tokenizer_path, tiny_tokenizer, math_config
):
    custom = {
        "path": "pkg://rewardlab.integrations.verl",
        "name": function,
        "reward_kwargs": {"reward_config": math_config, "failure_value": -1.0},
    }
    results = score_on_worker(
        trainer_config(tokenizer_path, custom_reward_function=custom), rollouts(tiny_tokenizer, **MATH)
    )
    assert [r["reward_score"] for r in results] == EXPECTED_SCORES
    check_math_results(
        {key: [r["reward_extra_info"][key] for r in results] for key in results[0]["reward_extra_info"]}
    )


def rewardlab_manager(tokenizer_path, reward_config, **options):
    return trainer_config(
        tokenizer_path,
        reward_manager={
            "source": "importlib",
            "name": "RewardlabRewardManager",
            "module": {"path": "pkg://rewardlab.integrations.verl_reward_manager", "name": None},
        },
        reward_kwargs={"reward_config": reward_config, **options},
    )


def test_rewardlab_reward_manager_scores_the_batch_with_prompts_and_groups(
    tokenizer_path, tiny_tokenizer, tmp_path
):
    path = tmp_path / "seen.yaml"
    path.write_text("type: verl_test_seen\n")
    RecordSamples.seen.clear()
    chat = [[{"role": "user", "content": "Chat?"}], None, None]
    data = rollouts(
        tiny_tokenizer,
        ["Chat?", "Plain?", "Plain?"],
        ["a", "b", "c"],
        ["1", "2", "3"],
        uid=["u1", "u2", "u2"],
        raw_prompt=chat,
    )
    results = score_on_worker(rewardlab_manager(tokenizer_path, str(path)), data)
    assert [r["reward_score"] for r in results] == [3.0, 3.0, 3.0]  # one batch of three
    seen = sorted(RecordSamples.seen, key=lambda s: s.completion)
    assert [s.completion for s in seen] == ["a", "b", "c"]
    assert [s.prompt for s in seen] == [[{"role": "user", "content": "Chat?"}], "Plain?", "Plain?"]
    assert [s.fields["group_id"] for s in seen] == ["u1", "u2", "u2"]
    assert [s.reference for s in seen] == ["1", "2", "3"]


def test_rewardlab_reward_manager_on_math(tokenizer_path, tiny_tokenizer, math_config):
    config = rewardlab_manager(tokenizer_path, math_config, failure_value=-1.0)
    results = score_on_worker(config, rollouts(tiny_tokenizer, **MATH))
    assert [r["reward_score"] for r in results] == EXPECTED_SCORES
    check_math_results(
        {key: [r["reward_extra_info"][key] for r in results] for key in results[0]["reward_extra_info"]}
    )


def test_batch_signature_in_verls_batch_reward_manager(tiny_tokenizer, math_config):
    data = rollouts(tiny_tokenizer, **MATH)
    manager = BatchRewardManager(
        tiny_tokenizer, 0, compute_score_batch, reward_config=math_config, failure_value=-1.0
    )
    answer = manager(data, return_dict=True)
    # The reward sits on each response's last token (its EOS).
    last = data.batch["attention_mask"][:, PROMPT_LENGTH:].sum(dim=1) - 1
    assert answer["reward_tensor"][torch.arange(3), last].tolist() == EXPECTED_SCORES
    assert answer["reward_tensor"].sum(dim=1).tolist() == EXPECTED_SCORES
    check_math_results(answer["reward_extra_info"])


@pytest.mark.ray
@pytest.mark.parametrize(
    ("manager", "function"),
    # ``remote`` runs a plain function in Ray actors of its own (it refuses a coroutine).
    [("naive", "acompute_score"), ("remote", "compute_score")],
)
def test_reward_loop_manager_on_ray(manager, function, tokenizer_path, tiny_tokenizer, math_config):
    ray = pytest.importorskip("ray")
    custom = {
        "path": "pkg://rewardlab.integrations.verl",
        "name": function,
        "reward_kwargs": {"reward_config": math_config, "failure_value": -1.0},
    }
    registered = {"source": "register", "name": manager, "module": {"path": None, "name": None}}
    config = trainer_config(tokenizer_path, custom_reward_function=custom, reward_manager=registered)
    data = rollouts(tiny_tokenizer, **MATH)
    ray.init(num_cpus=3, include_dashboard=False)
    try:
        output = RewardLoopManager(config).compute_rm_score(data)
    finally:
        ray.shutdown()
    rm_scores, extra = extract_reward(output)
    assert rm_scores.sum(dim=1).tolist() == EXPECTED_SCORES
    assert sorted(extra) == ["failed", "reason", "score", "status"]
    check_math_results(extra)


def test_a_judge_in_the_reward_loop_keeps_its_failures(tokenizer_path, tiny_tokenizer, tmp_path):
    from rewardlab.testing import Reply, ScriptedServer

    def verdict(body):
        answer = body["messages"][-1]["content"]
        return Reply(text='{"score": 10}') if "GOOD" in answer else Reply(text="no verdict")

    with ScriptedServer(verdict) as server:
        judge = {
            "type": "pointwise_judge",
            "backend": {"type": "openai", "base_url": server.url, "model": "s"},
        }
        path = tmp_path / "judge.yaml"
        path.write_text(json.dumps(judge))
        config = rewardlab_manager(tokenizer_path, str(path), failure_value=-1.0)
        data = rollouts(tiny_tokenizer, ["Say hi."] * 2, ["GOOD hi", "hm"], [None, None])
        results = score_on_worker(config, data)
    assert [r["reward_score"] for r in results] == [1.0, -1.0]
    assert [r["reward_extra_info"]["status"] for r in results] == ["ok", "parse_error"]
    assert len(server.requests) == 2
