"""A real GRPOTrainer run (tiny model from a config, two steps) rewarded by two async judges on
the real local server: a pointwise judge and a group-aware pairwise judge.

The check: TRL logs, for each judge, exactly the mean of what the judge returned for the
completions the trainer generated, and the pairwise judge saw whole groups.
"""

import pytest

from rewardlab import build
from rewardlab.integrations.trl import AsyncRewardFunc, as_reward_func
from tests.recording import Recorded, two_step_grpo_config

trl = pytest.importorskip("trl")


def mean(values):
    return sum(values) / len(values)


def test_grpo_with_async_judges(tmp_path, tiny_causal_lm, tiny_tokenizer, local_server):
    from datasets import Dataset

    backend = {"type": "openai", "base_url": local_server, "model": "smollm2", "guided_choice": True}
    judges = [
        Recorded(
            build({"type": "pointwise_judge", "scale": [1, 5], "backend": backend, "client": {"cache": None}})
        ),
        Recorded(build({"type": "pairwise_judge", "backend": backend, "client": {"cache": None}})),
    ]
    functions = [as_reward_func(judge) for judge in judges]
    assert all(isinstance(f, AsyncRewardFunc) for f in functions)
    dataset = Dataset.from_dict({"prompt": ["Say something kind.", "Name a colour."]})
    args = two_step_grpo_config(tmp_path)
    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm, processing_class=tiny_tokenizer, reward_funcs=functions, args=args,
        train_dataset=dataset,
    )  # fmt: skip
    trainer.train()

    for judge in judges:
        logged = [entry for entry in trainer.state.log_history if f"rewards/{judge.name}/mean" in entry]
        assert len(logged) == 2 and len(judge.batches) == 2
        for entry, (_, scores) in zip(logged, judge.batches, strict=True):
            assert len(scores) == 4 and all(s.ok for s in scores), scores
            assert entry[f"rewards/{judge.name}/mean"] == pytest.approx(
                mean([s.value for s in scores]), abs=1e-6
            )
    for samples, scores in judges[1].batches:
        assert len({s.prompt_text for s in samples}) == 1  # one whole group per step
        assert all(len(s.details["comparisons"]) == 3 for s in scores)
    consistency = [
        e["pairwise_judge/position_consistency"]
        for e in trainer.state.log_history
        if "pairwise_judge/position_consistency" in e
    ]
    expected = [
        mean([s.breakdown["position_consistency"] for s in scores]) for _, scores in judges[1].batches
    ]
    assert consistency == pytest.approx(expected, abs=1e-6)
