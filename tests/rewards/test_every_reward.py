"""Properties every built-in reward must have: it pickles (TRL ships reward functions to other
processes), a malformed sample fails alone with a status, and threads can share it."""

import functools
import os
import pickle
import tempfile
import threading

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rewards.registry import BUILTIN_REWARDS

CONFIGS = {
    "math_answer": {},
    "think_answer_format": {},
    "regex_match": {"pattern": "a+"},
    "string_match": {},
    "json_schema": {"schema": {"type": "object"}},
    "tool_call": {},
    "text_similarity": {"metric": "rouge_l"},
    "soft_overlong": {"max_length": 20, "cache_length": 5, "unit": "chars"},
    "repetition_penalty": {},
    "length": {"mode": "linear_target", "target_length": 10, "unit": "chars"},
    "instruction_following": {},
    "code_execution": {},
    "combine": {
        "components": {"a": {"type": "length", "mode": "below_max", "max_length": 50, "unit": "chars"}}
    },
    "route": {
        "routes": {"x": {"type": "repetition_penalty"}},
        "default": {"type": "regex_match", "pattern": "b"},
    },
    "ensemble": {"members": {"a": {"type": "string_match"}, "b": {"type": "regex_match", "pattern": "2"}}},
    "length_controlled": {"reward": {"type": "repetition_penalty"}, "fit": "batch"},
    "final_answer": {"reward": {"type": "math_answer"}},
    "per_turn": {"reward": {"type": "string_match"}},
    "environment_state": {},
    "fallback": {
        "rewards": [
            {"type": "route", "routes": {"y": {"type": "string_match"}}},
            {"type": "regex_match", "pattern": "a+"},
        ]
    },
    # Judges on the embedded model, in process; no cache, so every call reaches the model.
    "pointwise_judge": {"scale": [1, 5], "client": {"cache": None}},
    "pairwise_judge": {"client": {"cache": None}},
    "listwise_judge": {"mode": "best", "client": {"cache": None}},
    "reference_scaffolded_judge": {"scaffold": "reference", "client": {"cache": None}},
    "rubric": {"rubric": [{"text": "Gives the answer 2", "weight": 1}], "client": {"cache": None}},
    "self_proposed_rubric": {"verify": "math", "client": {"cache": None}},
    # Step rewards on the embedded model (two instances of it, for the log-ratio rewards) and on
    # a tiny PRM saved to a folder (see tiny_prm_folder).
    "progress_advantage": {"policy": "embedded"},
    "implicit_prm": {"policy": "embedded", "form": "cumulative"},
    "prm": {"family": "token_classification"},
    # A tiny sequence classifier saved to a folder (see tiny_reward_model_folder); the DPO reward
    # on the embedded model, reference-free.
    "reward_model": {},
    "dpo_implicit": {"policy": "embedded", "reference": None},
    "monte_carlo_steps": {"verifier": {"type": "math_answer"}, "n": 1, "continuer": {"max_tokens": 4}},
    "step_judge": {"client": {"cache": None}},
    "turn_judge": {"client": {"cache": None}},
    # Two sampled votes of a judge on the embedded model; the seeds make them repeatable.
    "vote": {
        "judge": {"type": "pointwise_judge", "scale": [1, 5], "temperature": 0.7, "client": {"cache": None}},
        "n": 2,
    },
    # A rule reward behind a real `rewardlab serve` app on a free loopback port (see served_url).
    "remote": {"retries": 0},
    # A scripted vLLM pooling server on a free loopback port (see pooling_url).
    "served_reward_model": {"client": {"max_attempts": 1}},
}
JUDGES = {kind for kind in CONFIGS if kind.endswith(("_judge", "rubric"))} | {
    "progress_advantage", "implicit_prm", "monte_carlo_steps", "dpo_implicit", "vote"
}  # fmt: skip
SAMPLE = Sample(
    prompt="p",
    completion="<think>aa</think><answer>\\boxed{2}</answer> ```python\ndef f():\n    return 1\n```",
    reference="2",
    fields={
        "instruction_id_list": ["punctuation:no_comma"],
        "kwargs": [{}],
        "tests": [{"input": [], "output": 1}],
        "fn_name": "f",
        "data_source": "x",
    },
)
MALFORMED = [
    Sample(completion=["not a message"], reference="2", fields=SAMPLE.fields),
    Sample(completion=5, reference="2", fields=SAMPLE.fields),
    Sample(completion=[{"role": "assistant", "content": 5}], reference="2", fields=SAMPLE.fields),
]


def test_every_builtin_has_a_config_here():
    assert set(CONFIGS) == set(BUILTIN_REWARDS)


def build_for_test(kind):
    if kind in JUDGES or kind in ("prm", "reward_model"):
        from rewardlab.errors import MissingDependency
        from rewardlab.llm.default_model import default_model_path

        try:
            default_model_path()
        except MissingDependency as error:
            if not os.environ.get("CI"):
                pytest.skip(str(error))
            raise
    if kind == "prm":
        return build({"type": kind, "model": tiny_prm_folder(), **CONFIGS[kind]})
    if kind == "reward_model":
        return build({"type": kind, "model": tiny_reward_model_folder(), **CONFIGS[kind]})
    if kind == "remote":
        return build({"type": kind, "url": served_url(), **CONFIGS[kind]})
    if kind == "served_reward_model":
        return build({"type": kind, "url": pooling_url(), **CONFIGS[kind]})
    return build({"type": kind, **CONFIGS[kind]})


@functools.cache
def served_url():
    """A reward server (math_answer) for the session, on a daemon thread."""
    from rewardlab.serving.serve import start_server

    return start_server(build({"type": "math_answer"}), port=0).url


@functools.cache
def pooling_url():
    """A scripted vLLM pooling server for the session, on a daemon thread."""
    from rewardlab.testing import ScriptedPoolingServer

    return ScriptedPoolingServer("vllm").start()


@functools.cache
def tiny_prm_folder():
    """A token-classification PRM built from a config, saved once per session."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForTokenClassification

    from rewardlab.llm.default_model import default_model_path
    from rewardlab.llm.gguf_conversion import converted_folder

    tokenizer = AutoTokenizer.from_pretrained(converted_folder(default_model_path()))
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, num_labels=2,
    )  # fmt: skip
    folder = tempfile.mkdtemp(prefix="rewardlab-tiny-prm-")
    Qwen2ForTokenClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@functools.cache
def tiny_reward_model_folder():
    """A one-label sequence classifier built from a config, saved once per session."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

    from rewardlab.llm.default_model import default_model_path
    from rewardlab.llm.gguf_conversion import converted_folder

    tokenizer = AutoTokenizer.from_pretrained(converted_folder(default_model_path()))
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, num_labels=1, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    folder = tempfile.mkdtemp(prefix="rewardlab-tiny-rm-")
    Qwen2ForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_pickles_and_scores_the_same_after(kind):
    reward = build_for_test(kind)
    copy = pickle.loads(pickle.dumps(reward))
    before, after = reward.score([SAMPLE])[0], copy.score([SAMPLE])[0]
    reward.close()
    copy.close()
    assert (before.status, before.value) == (after.status, after.value)


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_malformed_samples_fail_alone(kind):
    reward = build_for_test(kind)
    scores = reward.score([*MALFORMED, SAMPLE])
    reward.close()
    assert len(scores) == 4
    for score in scores[:3]:
        assert score.status in (Status.INVALID_INPUT, Status.NOT_APPLICABLE), (kind, score)
        assert score.value is None
    assert scores[3].status is not Status.ERROR, scores[3]


def test_threads_share_one_worker_pool():
    reward = build({"type": "math_answer"})
    pools = []
    barrier = threading.Barrier(6)

    def use():
        barrier.wait()
        pools.append(reward.pool)

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reward.close()
    assert len({id(pool) for pool in pools}) == 1
