"""The embedded SmolLM2 in process: generation with log-probabilities, guided choice, stop
strings and context limits - checked against the model itself, computed another way."""

import asyncio
import pickle

import pytest

from rewardlab.errors import BackendError
from rewardlab.llm.backend import ChatRequest
from rewardlab.llm.local_backend import LocalBackend

QUESTION = [{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}]


@pytest.fixture(scope="module")
def backend(model_available):
    return LocalBackend()


def complete(backend, **options):
    return asyncio.run(backend.complete(ChatRequest.of(QUESTION, **options)))


def test_greedy_generation_with_logprobs_is_self_consistent(backend):
    response = complete(backend, max_tokens=12, top_logprobs=5)
    assert response.text and response.finish_reason in ("stop", "length")
    assert "".join(t.token for t in response.logprobs) == response.text
    for token in response.logprobs:
        values = [v for _, v in token.top]
        assert values == sorted(values, reverse=True) and len(values) == 5
        # Greedy decoding picks the most likely token, so it heads its own alternatives.
        assert token.top[0] == (token.token, pytest.approx(token.logprob))
        assert token.logprob <= 0
    assert response.usage.prompt_tokens > 10 and response.usage.completion_tokens >= len(response.logprobs)


def test_guided_choice_agrees_with_full_sequence_scoring(backend):
    import torch

    model = backend.loaded()
    choices = ["Yes", "No", "Maybe not"]
    response = complete(backend, choices=choices, top_logprobs=3)
    prompt = model.tokenizer.apply_chat_template(
        QUESTION, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    prompt_ids = prompt["input_ids"]
    scores = {}
    with torch.inference_mode():
        for choice in choices:
            ids = model.tokenizer(choice, add_special_tokens=False)["input_ids"] + [
                model.tokenizer.eos_token_id
            ]
            full = torch.cat([prompt_ids, torch.tensor([ids])], dim=1)
            log_probs = torch.log_softmax(model.model(input_ids=full).logits[0].float(), dim=-1)
            start = prompt_ids.shape[1] - 1
            scores[choice] = sum(log_probs[start + j, token].item() for j, token in enumerate(ids))
    assert response.text == max(scores, key=scores.get)
    # The returned log-probability of the first token is the model's, at the answer's start.
    first = model.tokenizer(response.text, add_special_tokens=False)["input_ids"][0]
    with torch.inference_mode():
        start = torch.log_softmax(model.model(input_ids=prompt_ids).logits[0, -1].float(), dim=-1)
    assert response.logprobs[0].logprob == pytest.approx(start[first].item(), abs=1e-4)


def test_stop_strings_end_the_answer_and_are_not_included(backend):
    free = complete(backend, max_tokens=20)
    stop = free.text.strip().split()[1] if len(free.text.split()) > 1 else free.text[-1]
    cut = complete(backend, max_tokens=20, stop=[stop], top_logprobs=1)
    assert stop not in cut.text and free.text.startswith(cut.text)
    assert cut.finish_reason == "stop"


def test_sampling_with_a_seed_is_reproducible(backend):
    first = complete(backend, max_tokens=10, temperature=1.0, seed=11)
    second = complete(backend, max_tokens=10, temperature=1.0, seed=11)
    assert first.text == second.text


def test_a_prompt_beyond_the_context_is_a_clear_error(backend):
    context = backend.loaded().context_length
    long = [{"role": "user", "content": "word " * (context + 10)}]
    with pytest.raises(BackendError, match="context of") as raised:
        asyncio.run(backend.complete(ChatRequest.of(long, max_tokens=4)))
    assert not raised.value.retryable


def test_pickles_without_the_model_and_shares_it_after(backend):
    backend.loaded()
    copy = pickle.loads(pickle.dumps(backend))
    assert copy._model is None
    assert copy.loaded() is backend.loaded()  # one model per process


def test_usage_counts_are_real_token_counts(backend):
    response = complete(backend, choices=["Yes", "No"])
    tokenizer = backend.loaded().tokenizer
    expected = len(
        tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True, return_dict=True)[
            "input_ids"
        ]
    )
    assert response.usage.prompt_tokens == expected
    assert response.usage.completion_tokens == len(
        tokenizer(response.text, add_special_tokens=False)["input_ids"]
    )


def test_a_continued_assistant_message_is_left_open(backend):
    prefix = "The capital of France is"
    messages = [*QUESTION, {"role": "assistant", "content": prefix}]
    model = backend.loaded()
    continued = model.tokenizer.decode(model._prompt_ids(ChatRequest.of(messages, continue_final=True))[0])
    assert continued.endswith(prefix)  # no end-of-turn after it, no new assistant header
    answered = model.tokenizer.decode(model._prompt_ids(ChatRequest.of(messages))[0])
    assert not answered.endswith(prefix) and answered.startswith(continued)
    response = complete(backend, max_tokens=3)
    assert response.text  # the ordinary path still answers
    with pytest.raises(ValueError, match="last message to be the assistant's"):
        ChatRequest.of(QUESTION, continue_final=True)
