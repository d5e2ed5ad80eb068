"""A sample as a learned reward model reads it: the token ids of the whole conversation (a
sequence classifier), or of the prompt and of the completion (a DPO model's log-probabilities),
and what happens when they are longer than the model reads.

Both follow the tokenization of the TRL trainer that trains such a model, so that a model is
scored on the inputs it was trained on:

- `RewardTrainer` (trl/trainer/reward_trainer.py, ``_prepare_dataset``): a conversation is
  rendered with the tokenizer's chat template and tokenized without adding special tokens (the
  template writes its own); plain text is ``prompt + completion``, ended with the EOS token when
  it does not end with it already, and tokenized with the tokenizer's special tokens.
- `DPOTrainer` (trl/trainer/dpo_trainer.py, ``tokenize_fn``): the prompt alone (with the
  template's generation prompt, for a conversation) and prompt + completion are tokenized the
  same way; the completion is what follows the tokens the two share (`shared_opening`:
  a chat template may render the prompt alone differently, and tokens may merge across the
  boundary).

A rendered conversation is never tokenized with special tokens added: templates that write
their own BOS token would get a second one (reward-bench issue #164, fixed in its PR #166).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rewardlab.errors import InvalidInput
from rewardlab.prm.logprobs import shared_opening
from rewardlab.rewards.contract import Sample, message_text

Truncation = Literal["refuse", "left", "right"]


def conversation(sample: Sample) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The prompt and the completion as chat messages: a text prompt is one user message (none
    when it is empty), a text completion one assistant message. `InvalidInput` names a field
    that is neither text nor chat messages."""
    message_text(sample.prompt, roles=(), field_name="prompt")  # checks the shape, naming the field
    message_text(sample.completion)
    prompt = (
        ([{"role": "user", "content": sample.prompt}] if sample.prompt else [])
        if isinstance(sample.prompt, str)
        else [dict(message) for message in sample.prompt]
    )
    completion = (
        [{"role": "assistant", "content": sample.completion}]
        if isinstance(sample.completion, str)
        else [dict(message) for message in sample.completion]
    )
    return prompt, completion


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], field: str, *, add_generation_prompt: bool = False
) -> str:
    """``messages`` rendered with the tokenizer's chat template; `InvalidInput` naming ``field``
    when there is no template or the template refuses them."""
    if not has_chat_template(tokenizer):
        raise InvalidInput(
            field, "chat messages need a tokenizer with a chat template, and this one has none"
        )
    from jinja2 import TemplateError

    try:
        return str(
            tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
            )
        )
    except (TemplateError, TypeError, KeyError, ValueError) as error:  # a template's own checks
        raise InvalidInput(field, f"the chat template cannot render it: {error}") from None


def with_eos(text: str, tokenizer: Any) -> str:
    """``text`` ended with the tokenizer's EOS token, as TRL's trainers end plain-text data."""
    eos = tokenizer.eos_token
    return text if not eos or text.endswith(eos) else text + eos


def conversation_ids(sample: Sample, tokenizer: Any, *, chat_template: bool, append_eos: bool) -> list[int]:
    """The tokens a sequence classifier reads for ``sample``: the whole conversation through the
    chat template (``chat_template``), or ``prompt + completion`` as plain text (with the EOS
    token when ``append_eos``); chat messages without a template are `InvalidInput`."""
    prompt, completion = conversation(sample)
    if chat_template:
        text = render(tokenizer, [*prompt, *completion], "completion")
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not isinstance(sample.prompt, str) or not isinstance(sample.completion, str):
        field = "prompt" if not isinstance(sample.prompt, str) else "completion"
        raise InvalidInput(
            field, "chat messages need a tokenizer with a chat template, and this one has none"
        )
    text = sample.prompt + sample.completion
    return list(tokenizer(with_eos(text, tokenizer) if append_eos else text)["input_ids"])


def prompt_and_completion_ids(
    sample: Sample, tokenizer: Any, *, chat_template: bool, append_eos: bool
) -> tuple[list[int], list[int]]:
    """The prompt's and the completion's tokens for log-probabilities of the completion, as
    TRL's DPO trainer makes them (see the module docstring). A conversation - or a text prompt,
    with ``chat_template`` - goes through the chat template; plain text gets the tokenizer's
    special tokens and, with ``append_eos``, the EOS token after the completion."""
    templated = chat_template or not isinstance(sample.prompt, str) or not isinstance(sample.completion, str)
    if templated:
        prompt, completion = conversation(sample)
        prompt_text = render(tokenizer, prompt, "prompt", add_generation_prompt=True) if prompt else ""
        full_text = render(tokenizer, [*prompt, *completion], "completion")
        prompt_ids = (
            list(tokenizer(prompt_text, add_special_tokens=False)["input_ids"]) if prompt_text else []
        )
        full_ids = list(tokenizer(full_text, add_special_tokens=False)["input_ids"])
    else:
        conversation(sample)  # checks the shape, naming the field
        assert isinstance(sample.prompt, str) and isinstance(sample.completion, str)
        completion_text = with_eos(sample.completion, tokenizer) if append_eos else sample.completion
        prompt_ids = list(tokenizer(sample.prompt)["input_ids"]) if sample.prompt else []
        full_ids = list(tokenizer(sample.prompt + completion_text)["input_ids"])
    shared = shared_opening(prompt_ids, full_ids)
    prompt_ids, completion_ids = full_ids[:shared], full_ids[shared:]
    if not prompt_ids:
        if tokenizer.bos_token_id is None:
            raise InvalidInput(
                "prompt", "empty, and the tokenizer has no beginning-of-text token to stand for it"
            )
        prompt_ids = [tokenizer.bos_token_id]
    if not completion_ids:
        raise InvalidInput("completion", "no tokens to score")
    return prompt_ids, completion_ids


@dataclass(frozen=True, slots=True)
class Cut:
    """How a sequence was fitted into ``max_length`` tokens: the tokens it had and those read."""

    total: int
    read: int
    side: Truncation

    @property
    def truncated(self) -> bool:
        return self.read < self.total

    def details(self) -> dict[str, Any]:
        """What a score's details say about it: ``truncated``, and when it was, how."""
        if not self.truncated:
            return {"truncated": False}
        return {"truncated": True, "truncation": self.side, "total_tokens": self.total}


def too_long(who: str, total: int, limit: int, what: str = "prompt and completion") -> str:
    """The reason of a sample refused for its length."""
    return (
        f"{who}: {what}: {total} tokens, more than the {limit} the model reads "
        "(truncation: refuse; set truncation: left or right to score a cut)"
    )
