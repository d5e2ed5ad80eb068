"""The calls a completion makes, read from chat messages or from the text a model wrote.

A completion given as chat messages is read as OpenAI's Chat Completions API returns it: each
assistant message's ``tool_calls`` (``{"function": {"name", "arguments"}}``, the arguments as JSON
text), and calls written in its content in a text format. Each assistant message that calls is
one step of a multi-step sequence; tool messages (the results) are not calls.

A completion given as text is read in one of these formats (``auto`` finds them by their
markers; the first marker in the text decides):

- ``hermes`` - Hermes 2 Pro, Qwen 2.5/3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  one block per call; a block left open at the end runs to the end of the text, as vLLM's
  ``hermes`` parser reads it.
- ``llama3`` - Llama 3.1/3.2 JSON tool calling: ``<|python_tag|>`` then
  ``{"name": ..., "parameters": {...}}`` objects separated by ``;`` (vLLM's ``llama3_json``
  parser); ``llama3`` also reads a text that starts with such an object without the tag.
- ``mistral`` - ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (tokenizer v3) and
  ``[TOOL_CALLS]name[ARGS]{...}`` (v11 and later, with an optional ``[CALL_ID]``).
- ``harmony`` - gpt-oss: ``to=functions.name`` in a message header, the arguments in its
  ``<|message|>`` body up to ``<|call|>``.
- ``pythonic`` - BFCL's prompt format and Llama 3.2's pythonic calls: ``[f(a=1), g(b="x")]``,
  read with Python's ``ast`` (never evaluated): literal arguments become values, anything else
  its source text (BFCL's ``resolve_ast_by_type`` does the same). Never found by ``auto``.
- ``template`` - the format a tokenizer's chat template defines (`template_format`): its
  ``response_template`` (its own, or the one TRL's ``add_response_schema`` has for its chat
  template) parsed by transformers' ``parse_response``, else the known format whose marker the
  chat template writes.

Reasoning blocks are left out first (`rewardlab.rewards.answer_region`, without answer blocks or
Harmony's final channel, since calls sit outside both): a ``<tool_call>`` inside ``<think>`` is a
thought, not a call.

Every parser finds markers with `str.find` and decodes JSON with `json.JSONDecoder.raw_decode`,
so the work is linear in the text; a pythonic text longer than `MAX_PYTHONIC_CHARS` is refused
rather than handed to Python's parser, and a text longer than `MAX_TEMPLATE_CHARS` rather than
handed to transformers' response-template parser, which is not linear.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rewardlab.errors import InvalidInput
from rewardlab.optional import require
from rewardlab.rewards.answer_region import AnswerRegion
from rewardlab.rewards.tool_calls.calls import MalformedCall, ToolCall, call_from_mapping, json_problem

TextFormat = Literal["auto", "hermes", "llama3", "mistral", "harmony", "pythonic", "template"]
#: How long a pythonic text may be: Python's parser holds the whole tree in memory.
MAX_PYTHONIC_CHARS = 100_000
#: How long a text transformers' response-template parser may read: it is not linear (200 kB of
#: Hermes calls took 2.7 s through Qwen 3's template, 14x the time of 50 kB), and this bounds it
#: to about 0.2 s.
MAX_TEMPLATE_CHARS = 50_000
#: Where calls are read: reasoning left out, and nothing else (calls sit outside answer blocks
#: and outside Harmony's final channel).
CALL_REGION = AnswerRegion(answers=(), harmony=False)

_DECODER = json.JSONDecoder()
_HERMES = ("<tool_call>", "</tool_call>")
_PYTHON_TAG = "<|python_tag|>"
_LLAMA_ENDS = ("<|eom_id|>", "<|eot_id|>")
_MISTRAL = "[TOOL_CALLS]"
_HARMONY_RECIPIENT = "to=functions."
_HARMONY_ENDS = ("<|call|>", "<|end|>", "<|return|>", "<|start|>")
#: Markers that ``auto`` finds a format by.
_AUTO_MARKERS = {
    "hermes": _HERMES[0],
    "mistral": _MISTRAL,
    "llama3": _PYTHON_TAG,
    "harmony": _HARMONY_RECIPIENT,
}
#: What a chat template writes when it formats calls in each known way, checked in this order.
TEMPLATE_MARKERS = (
    ("<tool_call>", "hermes"),
    ("[TOOL_CALLS]", "mistral"),
    ("<|python_tag|>", "llama3"),
    ("to=functions.", "harmony"),
)
_CALL_START = re.compile(r"\[?\s*[A-Za-z_][\w.]*\s*\(")


def _json_at(text: str, index: int, where: str) -> tuple[Any, int]:
    """The JSON value that starts at ``index`` (after whitespace), and where it ends."""
    while index < len(text) and text[index].isspace():
        index += 1
    try:
        return _DECODER.raw_decode(text, index)
    except (ValueError, RecursionError) as error:
        raise MalformedCall(where, f"not JSON: {json_problem(error)}") from None


def _hermes(text: str, where: str) -> list[ToolCall]:
    opening, closing = _HERMES
    calls: list[ToolCall] = []
    start = text.find(opening)
    while start != -1:
        body_start = start + len(opening)
        end = text.find(closing, body_start)
        body = text[body_start:] if end == -1 else text[body_start:end]
        place = f"{where}: <tool_call> #{len(calls) + 1}"
        value, stop = _json_at(body, 0, place)
        if body[stop:].strip():
            raise MalformedCall(place, f"text after the call's JSON: {body[stop:].strip()[:40]!r}")
        calls.append(call_from_mapping(value, place))
        if end == -1:
            break
        start = text.find(opening, end + len(closing))
    return calls


def _llama3(text: str, where: str) -> list[ToolCall]:
    tag = text.find(_PYTHON_TAG)
    body = text[tag + len(_PYTHON_TAG) :] if tag != -1 else text.lstrip()
    if tag == -1 and not body.startswith("{"):
        return []
    for end in _LLAMA_ENDS:
        body = body.replace(end, "")
    calls: list[ToolCall] = []
    index = 0
    while True:
        while index < len(body) and (body[index].isspace() or body[index] == ";"):
            index += 1
        if index == len(body) or (calls and body[index] != "{"):
            return calls
        place = f"{where}: call #{len(calls) + 1}"
        value, index = _json_at(body, index, place)
        calls.append(call_from_mapping(value, place))


def _mistral(text: str, where: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for number, chunk in enumerate(text.split(_MISTRAL)[1:], start=1):
        place = f"{where}: [TOOL_CALLS] #{number}"
        body = chunk.lstrip()
        if body.startswith("["):
            value, _ = _json_at(body, 0, place)
            if not isinstance(value, list):
                raise MalformedCall(place, "expected a JSON array of calls")
            calls.extend(call_from_mapping(item, f"{place}[{i}]") for i, item in enumerate(value))
            continue
        arguments_at = body.find("[ARGS]")
        if arguments_at == -1:
            raise MalformedCall(place, "neither a JSON array of calls nor name[ARGS]{...}")
        name = body[:arguments_at].split("[CALL_ID]")[0].strip()
        arguments, _ = _json_at(body, arguments_at + len("[ARGS]"), f"{place} [ARGS]")
        calls.append(call_from_mapping({"name": name, "arguments": arguments}, place))
    return calls


def _harmony(text: str, where: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    # Where each end marker next occurs, searched again only once passed: finding every marker
    # afresh after each call would rescan to the end for a marker the text never has.
    next_end = dict.fromkeys(_HARMONY_ENDS, -1)
    start = text.find(_HARMONY_RECIPIENT)
    while start != -1:
        name_start = start + len(_HARMONY_RECIPIENT)
        name_end = name_start
        while name_end < len(text) and not text[name_end].isspace() and text[name_end] != "<":
            name_end += 1
        place = f"{where}: to=functions. #{len(calls) + 1}"
        message = text.find("<|message|>", name_end)
        if message == -1:
            raise MalformedCall(place, "the call has no <|message|> body")
        body_start = message + len("<|message|>")
        for marker, at in next_end.items():
            if at != len(text) and at < body_start:
                found = text.find(marker, body_start)
                next_end[marker] = len(text) if found == -1 else found
        body_end = min(next_end.values())
        arguments, stop = _json_at(text, body_start, place)
        if stop > body_end or text[stop:body_end].strip():
            raise MalformedCall(place, "text after the arguments' JSON")
        calls.append(call_from_mapping({"name": text[name_start:name_end], "arguments": arguments}, place))
        start = text.find(_HARMONY_RECIPIENT, body_end)
    return calls


def _dotted_name(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        # A variable or an expression: BFCL's resolve_ast_by_type keeps its source text.
        return ast.unparse(node)


def _pythonic(text: str, where: str) -> list[ToolCall]:
    body = text.strip().removeprefix(_PYTHON_TAG).strip()
    if not _CALL_START.match(body):
        return []  # prose, not an attempt at a call
    if len(body) > MAX_PYTHONIC_CHARS:
        raise MalformedCall(where, f"{len(body)} characters of calls, over the {MAX_PYTHONIC_CHARS} read")
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise MalformedCall(where, f"not Python calls: {type(error).__name__}: {error}") from None
    nodes = tree.body.elts if isinstance(tree.body, ast.List | ast.Tuple) else [tree.body]
    calls = []
    for number, node in enumerate(nodes, start=1):
        place = f"{where}: call #{number}"
        name = _dotted_name(node.func) if isinstance(node, ast.Call) else None
        if not isinstance(node, ast.Call) or name is None:
            raise MalformedCall(place, "not a call of a named function")
        if node.args or any(keyword.arg is None for keyword in node.keywords):
            raise MalformedCall(place, "arguments must be passed by name (a=1), not by position")
        arguments = {keyword.arg: _literal(keyword.value) for keyword in node.keywords if keyword.arg}
        calls.append(ToolCall(name, arguments, place))
    return calls


_PARSERS: dict[str, Callable[[str, str], list[ToolCall]]] = {
    "hermes": _hermes,
    "llama3": _llama3,
    "mistral": _mistral,
    "harmony": _harmony,
    "pythonic": _pythonic,
}


def _trl_response_template(tokenizer: Any) -> Mapping[str, Any] | None:
    """The response template TRL's ``add_response_schema`` (``trl/chat_template_utils.py``) knows
    for the tokenizer's chat template (Qwen 2.5/3, Llama 3.1/3.2, gpt-oss, GLM-4, Gemma 4, ...:
    TRL matches the template's exact text), or None without TRL or for a template it does not
    know. Most tokenizers ship no response template yet; TRL's table is how its GRPO trainer
    parses their tool calls."""
    try:
        from trl.chat_template_utils import add_response_schema
    except ImportError:
        return None
    try:
        add_response_schema(tokenizer)
    except ValueError:
        return None
    template = getattr(tokenizer, "response_template", None)
    return template if isinstance(template, Mapping) else None


def template_format(tokenizer: str) -> tuple[str, dict[str, Any] | None]:
    """The call format a local tokenizer's chat template defines: ``("response_template",
    template)`` when the tokenizer has a transformers ``response_template`` or TRL knows one for
    its chat template, else the known format whose marker its chat template writes
    (`TEMPLATE_MARKERS`). Raises ValueError when it defines none. Loads nothing from the hub."""
    transformers = require("transformers", "reading tool calls with a tokenizer's chat template")
    try:
        loaded = transformers.AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    except OSError as error:
        raise ValueError(f"cannot load the tokenizer {tokenizer!r}: {error}") from None
    response_template = getattr(loaded, "response_template", None)
    if not isinstance(response_template, Mapping):
        response_template = _trl_response_template(loaded)
    if isinstance(response_template, Mapping):
        return "response_template", dict(response_template)
    template = loaded.chat_template
    text = " ".join(template.values()) if isinstance(template, Mapping) else template or ""
    for marker, name in TEMPLATE_MARKERS:
        if marker in text:
            return name, None
    raise ValueError(
        f"the tokenizer {tokenizer!r} has no response_template, and its chat template writes none of "
        f"the call markers rewardlab reads ({', '.join(marker for marker, _ in TEMPLATE_MARKERS)})"
    )


@dataclass(frozen=True, slots=True)
class CallReader:
    """Reads the calls of a completion (see the module docstring).

    Attributes:
        text_format: How calls written as text are read; never ``template`` (`template_format`
            resolves it).
        response_template: A transformers ``response_template``, when ``text_format`` is
            ``response_template``.
        region: Where in a text calls are read (reasoning left out).
    """

    text_format: str = "auto"
    response_template: dict[str, Any] | None = None
    region: AnswerRegion = field(default=CALL_REGION)

    def steps(self, completion: Any) -> tuple[list[list[ToolCall]], str | None]:
        """The completion's calls by step, and why there are none to read (reasoning that never
        closes) or None. Raises `MalformedCall` for a call that cannot be read and
        `InvalidInput` for a completion that is neither text nor chat messages."""
        if isinstance(completion, str):
            calls, problem = self._text_calls(completion, "completion")
            return ([calls] if calls else []), problem
        if not isinstance(completion, Sequence):
            raise InvalidInput(
                "completion", f"must be text or chat messages, got {type(completion).__name__}"
            )
        steps: list[list[ToolCall]] = []
        for index, message in enumerate(completion):
            if not isinstance(message, Mapping):
                raise InvalidInput(f"completion[{index}]", f"must be a message, got {type(message).__name__}")
            if message.get("role") != "assistant":
                continue
            calls = self._structured(message.get("tool_calls"), f"completion[{index}].tool_calls")
            text, problem = self._text_calls(_content(message, index), f"completion[{index}].content")
            if problem is not None:
                return steps, problem
            if calls or text:
                steps.append([*calls, *text])
        return steps, None

    def _structured(self, value: Any, where: str) -> list[ToolCall]:
        if value is None:
            return []
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise MalformedCall(where, f"must be a list of calls, got {type(value).__name__}")
        return [call_from_mapping(item, f"{where}[{i}]") for i, item in enumerate(value)]

    def _text_calls(self, text: str, where: str) -> tuple[list[ToolCall], str | None]:
        region = self.region.read(text)
        if region.text is None:
            return [], region.reason
        return self.read_text(region.text, where), None

    def read_text(self, text: str, where: str) -> list[ToolCall]:
        """The calls written in ``text`` (already its call region)."""
        if self.text_format == "response_template":
            return self._by_response_template(text, where)
        if self.text_format != "auto":
            return _PARSERS[self.text_format](text, where)
        found = [(at, name) for name, marker in _AUTO_MARKERS.items() if (at := text.find(marker)) != -1]
        return _PARSERS[min(found)[1]](text, where) if found else []

    def _by_response_template(self, text: str, where: str) -> list[ToolCall]:
        if len(text) > MAX_TEMPLATE_CHARS:
            raise MalformedCall(
                where,
                f"{len(text)} characters, over the {MAX_TEMPLATE_CHARS} the response_template parser reads",
            )
        parsing = require("transformers.utils.chat_parsing", "reading tool calls with a response_template")
        try:
            message = parsing.parse_response(text, self.response_template, prefix="")
        except Exception as error:  # noqa: BLE001 - whatever the template's parser raises is a parse failure
            raise MalformedCall(
                where, f"the tokenizer's response_template: {type(error).__name__}: {error}"
            ) from None
        return self._structured(message.get("tool_calls"), f"{where} (response_template) tool_calls")


def _content(message: Mapping[str, Any], index: int) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    raise InvalidInput(f"completion[{index}].content", f"must be text, got {type(content).__name__}")
