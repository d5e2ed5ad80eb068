"""The reference calls of a sample, in one of two forms.

**BFCL's ground truth** (``possible_answer/*.json`` of the Berkeley Function Calling
Leaderboard): a list of calls, each ``{"function_name": {"argument": [accepted values]}}``. Every
argument lists the values accepted; ``""`` among them marks the argument optional; a dict-typed
argument's accepted value is a dict whose keys list accepted values in turn::

    [{"get_weather": {"city": ["Paris", "Paris, France"], "unit": ["", "celsius"]}}]

**OpenAI-style calls**: ``{"name": ..., "arguments": {...}}`` or ``{"type": "function",
"function": {"name": ..., "arguments": "<JSON text>"}}``; each argument then accepts exactly its
value and is required.

The two can be mixed in one list. An empty list expects no call (BFCL's ``irrelevance``
category). A list of lists is a multi-step sequence: one list of calls per step, in order.

The reference is ``sample.reference`` as JSON text (or a Python literal: the TRL adapter passes a
dataset column of lists as ``str(value)``), or ``sample.fields[reference_field]`` as the list
itself or its text.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.errors import InvalidInput
from rewardlab.rewards.tool_calls.calls import ExpectedCall, MalformedCall, call_from_mapping


def as_accepted(value: Any) -> Any:
    """A literal value in the accepted-values form: a dict's values become one-value lists, all
    the way down (what an OpenAI-style reference means: exactly this value)."""
    if isinstance(value, Mapping):
        return {key: (as_accepted(item),) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [as_accepted(item) for item in value]
    return value


def _bfcl_value(value: Any) -> Any:
    """An accepted value of BFCL's form: dicts map keys to lists of accepted values."""
    if isinstance(value, Mapping):
        return {
            key: tuple(_bfcl_value(v) for v in item) if isinstance(item, list) else (_bfcl_value(item),)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_bfcl_value(item) for item in value]
    return value


def expected_call(value: Any, where: str) -> ExpectedCall:
    """One reference call, in either form (see the module docstring)."""
    if not isinstance(value, Mapping):
        raise InvalidInput(where, f"a reference call must be an object, got {type(value).__name__}")
    openai_style = isinstance(value.get("function"), Mapping) or isinstance(value.get("name"), str)
    if openai_style:
        try:
            call = call_from_mapping(value, where)
        except MalformedCall as error:
            raise InvalidInput(error.where, str(error).removeprefix(f"{error.where}: ")) from None
        return ExpectedCall(call.name, {key: (as_accepted(item),) for key, item in call.arguments.items()})
    if len(value) != 1:
        raise InvalidInput(where, f"a BFCL call has one key, the function name; got {len(value)} keys")
    [(name, arguments)] = value.items()
    if not isinstance(arguments, Mapping):
        raise InvalidInput(f"{where}.{name}", "must map each argument to its list of accepted values")
    accepted = {}
    for argument, values in arguments.items():
        if not isinstance(values, list):
            raise InvalidInput(f"{where}.{name}.{argument}", "must be a list of accepted values")
        accepted[argument] = tuple(_bfcl_value(item) for item in values)
    return ExpectedCall(str(name), accepted)


def _decoded(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InvalidInput(where, "is neither JSON nor a Python literal of reference calls") from None


def expected_steps(value: Any, where: str) -> tuple[list[list[ExpectedCall]], bool]:
    """The reference calls by step, and whether the reference gave steps (a list of lists) rather
    than one list of calls."""
    if isinstance(value, str):
        value = _decoded(value, where)
    if not isinstance(value, list | tuple):
        raise InvalidInput(where, f"must be a list of calls (or of steps), got {type(value).__name__}")
    if value and all(isinstance(step, list | tuple) for step in value):
        steps = [
            [expected_call(c, f"{where}[{s}][{i}]") for i, c in enumerate(step)]
            for s, step in enumerate(value)
        ]
        return steps, True
    return [[expected_call(call, f"{where}[{i}]") for i, call in enumerate(value)]], False


def tool_schemas(value: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """Declared parameters by function name, from a list of tools in OpenAI's form
    (``{"type": "function", "function": {"name", "parameters"}}``) or BFCL's (``{"name",
    "parameters"}``), or its JSON text. Only the names, the parameters' ``type`` and
    ``required`` are used."""
    if isinstance(value, str):
        value = _decoded(value, where)
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidInput(where, f"must be a list of tool definitions, got {type(value).__name__}")
    schemas = {}
    for index, tool in enumerate(value):
        function = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidInput(f"{where}[{index}]", "a tool definition needs a 'name'")
        parameters = function.get("parameters") or {}
        if not isinstance(parameters, Mapping):
            raise InvalidInput(f"{where}[{index}].parameters", "must be an object (a JSON Schema)")
        schemas[function["name"]] = parameters
    return schemas
