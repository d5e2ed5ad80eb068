"""A real GRPOTrainer run on CPU (tiny model from a config, two steps) with a rewardlab Combine.

The check: what the trainer logs under the reward's name and its components equals what
rewardlab computed for the completions the trainer generated.
"""

import pytest

from rewardlab import build
from rewardlab.integrations.trl import as_reward_func
from tests.recording import Recorded

trl = pytest.importorskip("trl")


def mean(values):
    return sum(values) / len(values)


@pytest.mark.parametrize("conversational", [False, True])
def test_grpo_logs_rewardlab_components(tmp_path, tiny_causal_lm, tiny_tokenizer, conversational):
    from datasets import Dataset

    prompts = ["What is 1+1?", "What is 2+3?", "What is 10-4?", "What is 3*3?"]
    if conversational:
        prompts = [[{"role": "user", "content": p}] for p in prompts]
    dataset = Dataset.from_dict({"prompt": prompts, "answer": ["2", "5", "6", "9"]})
    combine = build(
        {
            "type": "combine",
            "name": "mix",
            "components": {
                "accuracy": {"type": "math_answer", "weight": 1.0},
                "length": {
                    "type": "length",
                    "mode": "linear_target",
                    "target_length": 8,
                    "unit": "chars",
                    "weight": 0.5,
                },
                "repetition": {
                    "type": "repetition_penalty",
                    "ngram_size": 2,
                    "unit": "chars",
                    "weight": 0.25,
                },
            },
        }
    )
    recorded = Recorded(combine)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=12,
        max_steps=2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        learning_rate=1e-3,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=tiny_causal_lm,
        processing_class=tiny_tokenizer,
        reward_funcs=[as_reward_func(recorded)],
        args=args,
        train_dataset=dataset,
    )
    trainer.train()
    combine.close()

    steps = [entry for entry in trainer.state.log_history if "rewards/mix/mean" in entry]
    assert len(steps) == 2 and len(recorded.batches) == 2
    for logged, (samples, scores) in zip(steps, recorded.batches, strict=True):
        assert len(scores) == 4
        assert all(s.reference in {"2", "5", "6", "9"} for s in samples)
        if conversational:
            assert isinstance(samples[0].completion, list) and samples[0].completion[0]["role"] == "assistant"
        assert logged["rewards/mix/mean"] == pytest.approx(mean([s.value for s in scores]), abs=1e-6)
        for component in ("accuracy", "length", "repetition"):
            expected = mean([s.breakdown[component] for s in scores])
            assert logged[f"mix/{component}"] == pytest.approx(expected, abs=1e-6), component
        assert logged["mix/failed_frac"] == 0.0
    # The length term is a real function of the generated text, not a constant.
    lengths = [s.breakdown["length"] for _, scores in recorded.batches for s in scores]
    texts = [s.completion_text for samples, _ in recorded.batches for s in samples]
    assert all(0.0 <= value <= 1.0 for value in lengths)
    assert len({len(text) for text in texts}) == 1 or len(set(lengths)) > 1


def test_rloo_accepts_a_rewardlab_reward_function(tmp_path, tiny_causal_lm, tiny_tokenizer):
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": ["What is 1+1?", "What is 2+3?"], "answer": ["2", "5"]})
    recorded = Recorded(
        build({"type": "repetition_penalty", "ngram_size": 2, "unit": "chars", "name": "rep"})
    )
    args = trl.RLOOConfig(
        output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=12, max_steps=2, logging_steps=1, report_to="none", save_strategy="no",
        learning_rate=1e-3, seed=0, beta=0.0,  # no KL term: no reference model to load
    )  # fmt: skip
    trainer = trl.RLOOTrainer(
        model=tiny_causal_lm, processing_class=tiny_tokenizer, reward_funcs=[as_reward_func(recorded)],
        args=args, train_dataset=dataset,
    )  # fmt: skip
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "rewards/rep/mean" in entry]
    assert len(steps) == 2
    for logged, (_, scores) in zip(steps, recorded.batches, strict=True):
        assert logged["rewards/rep/mean"] == pytest.approx(mean([s.value for s in scores]), abs=1e-6)
