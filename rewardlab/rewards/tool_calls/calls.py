"""What a tool call is, on both sides of the comparison, and the error of one that cannot be read.

A call the model made is a name and the argument values it passed (`ToolCall`); a call the
reference expects is a name and, for each argument, the values accepted (`ExpectedCall`), as in
BFCL's ``possible_answer`` files: ``""`` among the accepted values marks an optional argument.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Marks an optional argument among an expected argument's accepted values (BFCL's convention).
OPTIONAL = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model made.

    Attributes:
        name: The function's name.
        arguments: The argument values, as decoded (JSON or Python literals).
        where: Where the call was read, for reasons (``completion[1].tool_calls[0]``,
            ``completion: <tool_call> #2``).
    """

    name: str
    arguments: Mapping[str, Any]
    where: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments), "where": self.where}


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """A call the reference expects.

    Attributes:
        name: The function's name.
        arguments: For each argument, the accepted values; `OPTIONAL` among them makes the
            argument optional. A dict among the accepted values maps its keys to accepted values
            in turn (BFCL's form for dict-typed arguments).
    """

    name: str
    arguments: Mapping[str, tuple[Any, ...]]


class MalformedCall(ValueError):
    """A call the model wrote that cannot be read: JSON that does not parse, a call without a
    name, arguments that are not an object. ``where`` names the field."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"{where}: {message}")


def call_from_mapping(value: Any, where: str) -> ToolCall:
    """A `ToolCall` from a decoded call object: ``{"name", "arguments"}`` (Hermes, Mistral,
    OpenAI), ``{"name", "parameters"}`` (Llama 3.1), or OpenAI's ``{"function": {...}}``; the
    arguments may be an object or its JSON text (OpenAI sends text)."""
    if not isinstance(value, Mapping):
        raise MalformedCall(where, f"a call must be a JSON object, got {type(value).__name__}")
    if isinstance(value.get("function"), Mapping):
        value, where = value["function"], f"{where}.function"
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedCall(where, "the call has no function name ('name')")
    key = "arguments" if "arguments" in value else "parameters" if "parameters" in value else None
    arguments = {} if key is None else value[key]
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as error:
            raise MalformedCall(f"{where}.{key}", f"not JSON: {json_problem(error)}") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise MalformedCall(f"{where}.{key}", f"must be an object, got {type(arguments).__name__}")
    return ToolCall(name, dict(arguments), where)


def json_problem(error: ValueError | RecursionError) -> str:
    """What is wrong with a JSON text, for a reason."""
    return str(error) if isinstance(error, ValueError) else "nested too deeply to read"
