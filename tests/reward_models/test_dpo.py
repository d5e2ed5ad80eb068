"""`dpo_implicit` on two tiny causal Llamas saved to folders (different seeds, one tokenizer).
Expected values come from each model's log-probabilities of the completion's tokens, computed
here by a plain forward pass over prompt + completion written out by hand."""

import math
import pickle

import pytest
import torch

from rewardlab import ConfigError, Sample, Status, as_reward_func, build
from rewardlab.reward_models import DPOImplicitReward
from tests.reward_models.tiny_models import save_causal_lm

PROMPT, COMPLETION = "Q: 2+2?\n", "A: 4"


def token_logprobs(model, prompt_ids, completion_ids):
    ids = list(prompt_ids) + list(completion_ids)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    return [logprobs[i - 1, ids[i]].item() for i in range(len(prompt_ids), len(ids))]


def ids_of(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.fixture
def pair(tokenizer, tmp_path):
    policy = save_causal_lm(tmp_path / "policy", tokenizer, seed=1)
    reference = save_causal_lm(tmp_path / "reference", tokenizer, seed=2)
    return {"policy": str(tmp_path / "policy"), "reference": str(tmp_path / "reference")}, policy, reference


def reward_of(folders, **options):
    return build({"type": "dpo_implicit", **folders, **options})


@pytest.mark.parametrize("aggregate", ["sum", "mean"])
def test_beta_times_the_log_ratio_of_the_completion_and_eos(pair, tokenizer, aggregate):
    folders, policy, reference = pair
    prompt_ids, completion_ids = ids_of(tokenizer, PROMPT), ids_of(tokenizer, COMPLETION + "<eos>")
    assert completion_ids[-1] == tokenizer.eos_token_id
    mine = token_logprobs(policy, prompt_ids, completion_ids)
    theirs = token_logprobs(reference, prompt_ids, completion_ids)
    ratio = sum(mine) - sum(theirs)
    expected = 0.1 * (ratio if aggregate == "sum" else ratio / len(completion_ids))
    (score,) = reward_of(folders, beta=0.1, aggregate=aggregate).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )
    assert score.status is Status.OK
    assert score.value == pytest.approx(expected, abs=1e-6)
    assert score.details["policy_logprob"] == pytest.approx(sum(mine), abs=1e-5)
    assert score.details["reference_logprob"] == pytest.approx(sum(theirs), abs=1e-5)
    assert score.details["tokens"] == len(completion_ids) == len(COMPLETION) + 1
    assert score.details["prompt_tokens"] == len(prompt_ids)
    assert score.details["truncated"] is False


@pytest.mark.parametrize("aggregate", ["sum", "mean", "norm"])
def test_reference_free(pair, tokenizer, aggregate):
    folders, policy, _ = pair
    mine = token_logprobs(policy, ids_of(tokenizer, PROMPT), ids_of(tokenizer, COMPLETION + "<eos>"))
    expected = {
        "sum": sum(mine),
        "mean": sum(mine) / len(mine),
        "norm": -math.sqrt(sum(value * value for value in mine)),
    }[aggregate]
    reward = reward_of({"policy": folders["policy"], "reference": None}, beta=2.0, aggregate=aggregate)
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.value == pytest.approx(2.0 * expected, abs=1e-5)
    assert "reference_logprob" not in score.details


def test_append_eos_false_scores_the_completion_alone(pair, tokenizer):
    folders, policy, reference = pair
    prompt_ids, completion_ids = ids_of(tokenizer, PROMPT), ids_of(tokenizer, COMPLETION)
    expected = sum(token_logprobs(policy, prompt_ids, completion_ids)) - sum(
        token_logprobs(reference, prompt_ids, completion_ids)
    )
    (score,) = reward_of(folders, append_eos=False).score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.value == pytest.approx(expected, abs=1e-5)
    assert score.details["tokens"] == len(COMPLETION)


def test_a_conversation_is_tokenized_as_trls_dpo_trainer_does(pair, tokenizer):
    """The prompt with the generation prompt, then what the whole conversation adds to it."""
    folders, policy, reference = pair
    prompt_ids = ids_of(tokenizer, f"user: {PROMPT}\nassistant: ")
    completion_ids = ids_of(tokenizer, f"{COMPLETION}\n")
    expected = sum(token_logprobs(policy, prompt_ids, completion_ids)) - sum(
        token_logprobs(reference, prompt_ids, completion_ids)
    )
    user, assistant = [{"role": "user", "content": PROMPT}], [{"role": "assistant", "content": COMPLETION}]
    conversational = reward_of(folders).score([
        Sample(prompt=user, completion=assistant),
        Sample(prompt=user, completion=COMPLETION),
        Sample(prompt=PROMPT, completion=assistant),
    ])  # fmt: skip
    (templated,) = reward_of(folders, chat_template=True).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )
    for score in [*conversational, templated]:
        assert score.value == pytest.approx(expected, abs=1e-5)
        assert score.details["tokens"] == len(completion_ids)


def test_completions_of_one_prompt_together_equal_one_by_one(pair):
    folders, _, _ = pair
    completions = ["A: 4", "A: four", "4", "It is 4 because 2+2=4.", "A: 4"]
    samples = [Sample(prompt=PROMPT, completion=c) for c in completions] + [
        Sample(prompt="Hi\n", completion="Hey")
    ]
    for options in ({}, {"batch_tokens": 64, "max_padding": 0.9, "chunk_tokens": 5}):
        reward = reward_of(folders, **options)
        together = reward.score(samples)
        alone = [reward.score([sample])[0] for sample in samples]
        assert [s.value for s in together] == pytest.approx([s.value for s in alone], abs=1e-5)
        assert together[0].value == together[4].value


@pytest.mark.parametrize("truncation", ["refuse", "left", "right"])
def test_an_input_past_max_length_is_refused_or_cut_and_says_so(pair, tokenizer, truncation):
    folders, policy, reference = pair
    prompt_ids, completion_ids = ids_of(tokenizer, PROMPT), ids_of(tokenizer, COMPLETION + "<eos>")
    total = len(prompt_ids) + len(completion_ids)
    limit = total - 3
    reward = reward_of(folders, max_length=limit, truncation=truncation)
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    if truncation == "refuse":
        assert score.status is Status.INVALID_INPUT
        assert f"{total} tokens, more than the {limit} the model reads" in score.reason
        return
    if truncation == "left":
        prompt_ids = prompt_ids[3:]
    else:
        completion_ids = completion_ids[:-3]
    expected = sum(token_logprobs(policy, prompt_ids, completion_ids)) - sum(
        token_logprobs(reference, prompt_ids, completion_ids)
    )
    assert score.value == pytest.approx(expected, abs=1e-5)
    assert score.details["truncated"] is True and score.details["total_tokens"] == total
    assert score.reason == f"truncated ({truncation}): read {limit} of {total} tokens"


def test_a_cut_that_leaves_no_context_or_no_completion_is_refused(pair):
    folders, _, _ = pair
    left = reward_of(folders, max_length=len(COMPLETION) + 1, truncation="left")
    right = reward_of(folders, max_length=len(PROMPT), truncation="right")
    for reward in (left, right):
        (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
        assert score.status is Status.INVALID_INPUT


def test_inputs_the_reward_cannot_read_fail_alone(pair):
    folders, _, _ = pair
    scores = reward_of(folders).score([
        Sample(prompt="", completion=COMPLETION),  # no prompt, and this tokenizer has no BOS token
        Sample(prompt=PROMPT, completion=5),
        Sample(prompt=PROMPT, completion=[{"role": "assistant", "content": 5}]),
        Sample(prompt=PROMPT, completion=COMPLETION),
    ])  # fmt: skip
    assert [s.status for s in scores] == [Status.INVALID_INPUT] * 3 + [Status.OK]
    assert "no beginning-of-text token" in scores[0].reason


def test_models_with_different_tokenizers_are_refused(pair, tokenizer, tmp_path):
    folders, _, _ = pair
    tokenizer.add_tokens(["<extra>"])
    save_causal_lm(tmp_path / "other", tokenizer, seed=3)
    with pytest.raises(ValueError, match="different tokenizers"):
        reward_of({"policy": folders["policy"], "reference": str(tmp_path / "other")}).score(
            [Sample(prompt=PROMPT, completion=COMPLETION)]
        )


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({"aggregate": "norm"}, "aggregate", "norm is for the reference-free reward"),
        ({"aggregate": "product"}, "aggregate", "Input should be 'sum', 'mean' or 'norm'"),
        ({"truncation": "middle"}, "truncation", "Input should be 'refuse', 'left' or 'right'"),
        ({"beta": 0}, "beta", "Input should be greater than 0"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(options, path, message):
    with pytest.raises(ConfigError, match=f"^{path}: {message}"):
        build({"type": "dpo_implicit", "policy": "/p", "reference": "/r", **options})
    with pytest.raises(ConfigError, match=r"^reference: Field required"):
        build({"type": "dpo_implicit", "policy": "/p"})


def test_through_the_trl_adapter_and_pickled(pair, tokenizer):
    folders, policy, reference = pair
    reward = DPOImplicitReward(**folders, beta=0.5)
    reward_func = as_reward_func(reward)
    assert reward_func.__name__ == "dpo_implicit"
    prompt_ids = ids_of(tokenizer, PROMPT)
    expected = []
    for completion in (COMPLETION, "5"):
        completion_ids = ids_of(tokenizer, completion + "<eos>")
        ratio = sum(token_logprobs(policy, prompt_ids, completion_ids)) - sum(
            token_logprobs(reference, prompt_ids, completion_ids)
        )
        expected.append(0.5 * ratio)
    assert reward_func(prompts=[PROMPT, PROMPT], completions=[COMPLETION, "5"]) == pytest.approx(
        expected, abs=1e-5
    )
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.score([Sample(prompt=PROMPT, completion=COMPLETION)])[0].value == pytest.approx(
        expected[0], abs=1e-6
    )
