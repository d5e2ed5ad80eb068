"""A real GRPOTrainer run on CPU (tiny model from a config, two steps) with ``tool_call`` and
``text_similarity`` in one Combine: what TRL logs for each equals what rewardlab computed for the
completions the trainer generated, with references from dataset columns."""

import json

import pytest

from rewardlab import build
from rewardlab.integrations.trl import as_reward_func
from tests.recording import Recorded, two_step_grpo_config

trl = pytest.importorskip("trl")


def test_grpo_with_tool_call_and_text_similarity(tmp_path, tiny_causal_lm, tiny_tokenizer):
    from datasets import Dataset

    # BFCL-style references as JSON text (a column of nested lists of dicts would become Arrow
    # structs, whose missing keys come back as None); "[]" expects no call (irrelevance).
    dataset = Dataset.from_dict(
        {
            "prompt": ["Weather in Paris?", "Say hi."],
            "calls": [json.dumps([{"get_weather": {"city": ["Paris"]}}]), "[]"],
            "answer": ["sunny in Paris", "hi"],
        }
    )
    reward = build(
        {
            "type": "combine",
            "name": "agent",
            "components": {
                "calls": {"type": "tool_call", "reference_field": "calls", "weight": 1.0},
                "f1": {"type": "text_similarity", "metric": "token_f1", "weight": 0.5},
            },
        }
    )
    recorded = Recorded(reward)
    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm,
        processing_class=tiny_tokenizer,
        reward_funcs=[as_reward_func(recorded)],
        args=two_step_grpo_config(tmp_path),
        train_dataset=dataset,
    )
    trainer.train()
    reward.close()
    steps = [entry for entry in trainer.state.log_history if "rewards/agent/mean" in entry]
    assert len(steps) == 2 and len(recorded.batches) == 2
    for logged, (samples, scores) in zip(steps, recorded.batches, strict=True):
        assert all(score.status.value == "ok" for score in scores)
        assert {s.reference for s in samples} <= {"sunny in Paris", "hi"}
        for component in ("calls", "f1"):
            expected = sum(s.breakdown[component] for s in scores) / len(scores)
            assert logged[f"agent/{component}"] == pytest.approx(expected, abs=1e-6), component
        # A tiny random model makes no call: right exactly for the irrelevance prompt.
        for sample, score in zip(samples, scores, strict=True):
            assert score.breakdown["calls"] == (1.0 if sample.fields["calls"] == "[]" else 0.0)
