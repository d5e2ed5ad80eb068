"""The call format a tokenizer's chat template defines: tokenizers built here from a config and a
template (never from the hub), read by marker or by transformers' response_template parser."""

import pytest

from rewardlab.rewards.tool_calls.calls import MalformedCall
from rewardlab.rewards.tool_calls.reading import CallReader, template_format


def tokenizer_folder(tmp_path, chat_template, response_template=None):
    """A word-level tokenizer built here, with a chat template (no hub)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    )
    tokenizer.chat_template = chat_template
    if response_template is not None:
        tokenizer.response_template = response_template
    tokenizer.save_pretrained(tmp_path)
    return str(tmp_path)


QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for call in m.tool_calls or [] %}\n<tool_call>\n{{ call.function | tojson }}\n</tool_call>"
    "{% endfor %}"
    "<|im_end|>\n{% endfor %}"
)
LLAMA_LIKE = (
    "{% for m in messages %}{% if m.tool_calls %}<|python_tag|>{{ m.tool_calls[0] | tojson }}{% endif %}"
    "{% endfor %}"
)
MISTRAL_LIKE = (
    "{% for m in messages %}{% if m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | tojson }}{% endif %}"
    "{% endfor %}"
)

#: A transformers response template (``tokenizer.parse_response``) for assistant text followed by
#: ``<call>{json}</call>`` tool calls: a format no marker of the built-in readers knows.
CALL_TAG_RESPONSE = {
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "content": {"content": "text"},
        "tool_calls": {"open": "<call>", "close": "</call>", "content": "json", "repeats": True},
    },
}


@pytest.mark.parametrize(
    ("template", "expected"), [(QWEN_LIKE, "hermes"), (LLAMA_LIKE, "llama3"), (MISTRAL_LIKE, "mistral")]
)
def test_the_format_comes_from_the_chat_template(tmp_path, template, expected):
    assert template_format(tokenizer_folder(tmp_path, template)) == (expected, None)


def test_a_response_template_is_parsed_by_transformers(tmp_path):
    name, template = template_format(tokenizer_folder(tmp_path, "{{ messages }}", CALL_TAG_RESPONSE))
    assert name == "response_template"
    reader = CallReader(name, template)
    steps, _ = reader.steps('Sure. <call>{"name": "f", "arguments": {"a": [1]}}</call>')
    assert [(c.name, c.arguments) for c in steps[0]] == [("f", {"a": [1]})]
    with pytest.raises(MalformedCall, match="response_template"):
        reader.steps('<call>{"name": </call>')


def test_a_chat_template_without_calls_is_refused(tmp_path):
    with pytest.raises(ValueError, match="none of the call markers"):
        template_format(tokenizer_folder(tmp_path, "{% for m in messages %}{{ m.content }}{% endfor %}"))


def test_the_reward_reads_a_response_template_in_its_workers(tmp_path):
    from rewardlab import Sample, build

    folder = tokenizer_folder(tmp_path, "{{ messages }}", CALL_TAG_RESPONSE)
    reward = build({"type": "tool_call", "call_format": "template", "tokenizer": folder})
    reference = '[{"f": {"a": [[1]]}}]'
    scores = reward.score(
        [
            Sample(completion='<call>{"name": "f", "arguments": {"a": [1]}}</call>', reference=reference),
            Sample(completion='<call>{"name": "f", "arguments": {"a": [2]}}</call>', reference=reference),
        ]
    )
    reward.close()
    assert [(s.status.value, s.value) for s in scores] == [("ok", 1.0), ("ok", 0.0)]


def trl_chat_template(name):
    """A real model's chat template, as TRL ships it (``trl/chat_templates/``)."""
    from importlib.resources import files

    return files("trl").joinpath("chat_templates", f"{name}.jinja").read_text()


@pytest.mark.parametrize(
    ("template", "completion", "expected"),
    [
        (
            "qwen3",
            "<think>\nThe user wants 3 x 4.\n</think>\n\n"
            '<tool_call>\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>\n<tool_call>\n'
            '{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>',
            [("multiply", {"a": 3, "b": 4}), ("add", {"a": 1, "b": 2})],
        ),
        (
            "llama3_1",
            '{"name": "multiply", "parameters": {"a": 3, "b": 4}}<|eot_id|>',
            [("multiply", {"a": 3, "b": 4})],
        ),
    ],
)
def test_real_chat_templates_get_trls_response_template(tmp_path, template, completion, expected):
    name, response_template = template_format(tokenizer_folder(tmp_path, trl_chat_template(template)))
    assert name == "response_template" and response_template is not None
    steps, problem = CallReader(name, response_template).steps(completion)
    assert problem is None
    assert [(call.name, call.arguments) for call in steps[0]] == expected


def test_a_response_template_reads_a_bounded_text(tmp_path):
    import time

    from rewardlab.rewards.tool_calls.reading import MAX_TEMPLATE_CHARS

    name, response_template = template_format(tokenizer_folder(tmp_path, trl_chat_template("qwen3")))
    reader = CallReader(name, response_template)
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
    fits = call * (MAX_TEMPLATE_CHARS // len(call))
    started = time.perf_counter()
    steps, _ = reader.steps(fits)
    assert len(steps[0]) == MAX_TEMPLATE_CHARS // len(call)
    assert time.perf_counter() - started < 2.0
    with pytest.raises(MalformedCall, match=f"over the {MAX_TEMPLATE_CHARS}"):
        reader.steps(fits + call)
