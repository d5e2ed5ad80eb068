"""A sample as a model reads it for step scoring: the prompt's token ids, the completion's token
ids, and which step each completion token belongs to.

The prompt and the completion are tokenized separately (the completion without special tokens)
and concatenated, the way trainers build their inputs - so every completion of a prompt shares
the prompt's tokens exactly, and a step's tokens come from the completion's own offsets.

- A text prompt is used as it is; a conversation goes through the tokenizer's chat template
  with the generation prompt (``chat_template=True`` does this for a text prompt too).
- A text completion's steps are found as its reward's `StepOptions` say: split, or placed by
  a list of step texts in the sample's ``steps.field``.
- A conversation completion (an agent trajectory) is rendered after the prompt with the chat
  template, one step per assistant message (tool calls included; tool results are context).
  A lone assistant message without tool calls (what TRL passes for a conversational dataset)
  is rendered the same way, but its steps are found in its text, as in a text completion.

In a text completion, tokens between steps (blank lines, a list's numbering) count for the step
before them (the first step, before any): ending a step is the step's own choice, and this way
the steps' token sets cover the whole completion, so per-step sums add up to the whole
completion's (in a lone message, the text between its first and last step is covered this way).
In a trajectory, tokens outside the assistant's messages (tool results, the template's turn
headers) belong to no step: the policy did not write them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rewardlab.errors import InvalidInput, StepSplitError
from rewardlab.rewards.contract import Sample, message_text
from rewardlab.rewards.step_splitting import message_spans, token_steps
from rewardlab.rewards.steps import StepOptions, step_spans


@dataclass(frozen=True, slots=True)
class TokenizedTrajectory:
    """Token ids of the prompt and completion; each completion token's step; the step spans."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    owners: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]
    completion_text: str


def tokenize_sample(
    sample: Sample, tokenizer: Any, options: StepOptions, *, chat_template: bool = False
) -> TokenizedTrajectory:
    """``sample`` for a model with ``tokenizer``; `InvalidInput` names the field at fault.
    ``chat_template`` renders a text prompt as a user message with the tokenizer's chat template."""
    prompt_text = _prompt_text(sample.prompt, tokenizer, chat_template)
    templated = chat_template or not isinstance(sample.prompt, str)
    if isinstance(sample.completion, str):
        completion_text = sample.completion
        spans = text_step_spans(sample, options)
    elif isinstance(sample.completion, Sequence):
        prompt_text, completion_text, spans = _trajectory(sample, tokenizer)
        templated = True
        lone = lone_message_text(sample.completion)
        if lone is not None:
            spans = _steps_within(
                completion_text, spans, lone, text_step_spans(replace(sample, completion=lone), options)
            )
    else:
        raise InvalidInput(
            "completion", f"must be text or a list of chat messages, got {type(sample.completion).__name__}"
        )
    if not spans:
        raise InvalidInput("completion", "no steps: the completion is empty")
    # A chat template writes its own beginning-of-text token; raw text gets the tokenizer's.
    prompt_ids = tokenizer(prompt_text, add_special_tokens=not templated)["input_ids"] if prompt_text else []
    if not prompt_ids and tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id]
    if not prompt_ids:
        raise InvalidInput(
            "prompt", "empty, and the tokenizer has no beginning-of-text token to stand for it"
        )
    encoded = tokenizer(completion_text, add_special_tokens=False, return_offsets_mapping=True)
    owners = token_steps(encoded["offset_mapping"], spans)
    if isinstance(sample.completion, str):
        owners = _fill_gaps(owners)
    elif lone_message_text(sample.completion) is not None:
        owners = _fill_gaps(owners, edges=False)  # the template's turn header and end are no step's
    # In a longer trajectory, text between steps is context (tool results): no step's.
    return TokenizedTrajectory(
        tuple(prompt_ids), tuple(encoded["input_ids"]), tuple(owners), tuple(spans), completion_text
    )


def _prompt_text(prompt: Any, tokenizer: Any, chat_template: bool) -> str:
    if isinstance(prompt, str) and not chat_template:
        return prompt
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    return _render(tokenizer, messages, "prompt", add_generation_prompt=True)


def text_step_spans(sample: Sample, options: StepOptions) -> list[tuple[int, int]]:
    """The character spans of a text completion's steps (`step_spans`): given in the field
    ``options.field``, or split. Given steps are kept as given, whatever ``max_steps`` says:
    their indices are what a dataset's labels (a ProcessBench first error) refer to;
    ``max_steps`` bounds splitting only."""
    assert isinstance(sample.completion, str)
    return step_spans(sample.completion, sample.fields, options)


def _trajectory(sample: Sample, tokenizer: Any) -> tuple[str, str, list[tuple[int, int]]]:
    prompt = (
        [{"role": "user", "content": sample.prompt}]
        if isinstance(sample.prompt, str)
        else list(sample.prompt or [])
    )
    message_text(sample.completion)  # checks the messages' shape, naming the field
    head = _render(tokenizer, prompt, "prompt") if prompt else ""
    try:
        text, spans = message_spans(
            [*prompt, *sample.completion], lambda messages: _render(tokenizer, messages, "completion")
        )
    except StepSplitError as error:
        raise InvalidInput("completion", str(error)) from None
    if not text.startswith(head):
        raise InvalidInput(
            "completion", "the chat template renders the prompt differently once the trajectory follows"
        )
    return head, text[len(head) :], [(start - len(head), end - len(head)) for start, end in spans]


def _render(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], field: str, add_generation_prompt: bool = False
) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise InvalidInput(
            field, "chat messages need a tokenizer with a chat template, and this one has none"
        )
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
        )
    except (TemplateError, TypeError, KeyError, ValueError) as error:  # a template's own checks
        raise InvalidInput(field, f"the chat template cannot render it: {error}") from None


def lone_message_text(completion: Any) -> str | None:
    """The text of a completion that is one assistant message without tool calls - what TRL
    passes for a conversational dataset - whose steps are in its text and are found as in a text
    completion; None for text and for a trajectory of several messages (one step per action)."""
    if (
        isinstance(completion, Sequence)
        and not isinstance(completion, str)
        and len(completion) == 1
        and isinstance(completion[0], Mapping)
        and completion[0].get("role") == "assistant"
        and not completion[0].get("tool_calls")
    ):
        return message_text(completion)
    return None


def _steps_within(
    text: str, spans: list[tuple[int, int]], content: str, inner: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The steps found in a lone message's ``content``, moved to where the chat template put it
    in ``text``; the message as one step if the template rewrote its content."""
    offset = text.find(content, spans[0][0]) if spans and content else -1
    return [(offset + start, offset + end) for start, end in inner] if offset >= 0 else spans


def _fill_gaps(owners: list[int], *, edges: bool = True) -> list[int]:
    """Unowned tokens between steps go to the step before them; with ``edges``, those before
    the first step go to it and those after the last to the last."""
    owned = [index for index, owner in enumerate(owners) if owner >= 0]
    if not owned:
        return [0] * len(owners) if edges else list(owners)
    first, last = (0, len(owners) - 1) if edges else (owned[0], owned[-1])
    filled, current = list(owners), owners[owned[0]]
    for index in range(first, last + 1):
        current = owners[index] if owners[index] >= 0 else current
        filled[index] = current
    return filled


def step_texts(sample: Sample, options: StepOptions) -> list[str]:
    """The texts of a sample's steps, for models that take steps as text: the split (or given)
    steps of a text completion or of a lone assistant message, or the assistant messages of a
    longer conversation."""
    lone = lone_message_text(sample.completion)
    if lone is not None:
        sample = replace(sample, completion=lone)
    if isinstance(sample.completion, str):
        steps = [sample.completion[start:end] for start, end in text_step_spans(sample, options)]
    elif isinstance(sample.completion, Sequence):
        steps = [
            text
            for message in sample.completion
            if isinstance(message, Mapping) and message.get("role") == "assistant"
            for text in [message_text([message])]
            if text.strip()
        ]
        message_text(sample.completion)  # checks the messages' shape, naming the field
    else:
        raise InvalidInput(
            "completion", f"must be text or a list of chat messages, got {type(sample.completion).__name__}"
        )
    if not steps:
        raise InvalidInput("completion", "no steps: the completion is empty")
    return steps
