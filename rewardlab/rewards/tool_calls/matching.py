"""Calls compared as values, following BFCL's AST checker.

Transcribed from the Berkeley Function Calling Leaderboard's
``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` (ShishirPatil/gorilla: ``simple_function_checker``,
``type_checker``, ``standardize_string``, ``list_checker``, ``dict_checker``,
``parallel_function_checker_no_order``), for Python-typed arguments:

- **Names** must be equal.
- **Arguments**: an argument the reference does not list is unexpected; one it lists without
  ``""`` among the accepted values (or one the tool's schema requires) is missing when absent.
- **Types** count: ``1`` is not ``"1"``, ``True`` is not ``1``, and ``1.0`` is not the integer
  ``1``; an integer is accepted for a float (BFCL's "Python auto conversion from int to float"),
  and for a parameter the tool declares ``float`` or ``number`` any number of equal value is.
- **Strings** are compared as BFCL's ``standardize_string`` leaves them (spaces and ``,./-_*^``
  removed, lowercase, ``'`` as ``"``), so "April 1, 2024" is "April 1 2024"; ``strings:
  exact`` compares them exactly.
- **Lists** match element by element in order; **dicts** key by key, each key's value against
  its accepted values, absent keys only when ``""`` is among them.

Where rewardlab departs from it: calls within a step are paired by a maximum bipartite matching
(`pair_calls`), where BFCL's ``parallel_function_checker_no_order`` takes, for each reference
call, the first model call that matches - which can leave a reference call unmatched when
accepted values overlap (two calls that both fit the first reference call); types come from the
accepted values themselves when the sample names no tool schema (BFCL always has one); nested
lists and dicts are compared all the way down (BFCL checks one level).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from rewardlab.rewards.details import clipped
from rewardlab.rewards.tool_calls.calls import OPTIONAL, ExpectedCall, ToolCall

StringRule = Literal["bfcl", "exact"]
#: Declared parameter types whose integers and floats compare by value.
NUMBER_TYPES = frozenset({"float", "number", "double"})
_BFCL_PUNCTUATION = re.compile(r"[ ,./\-_*^]")
_SHOWN_CHARS = 120


def standardize_string(text: str) -> str:
    """BFCL's ``standardize_string``: spaces and ``,./-_*^`` removed, lowercase, ``'`` as ``"``."""
    return _BFCL_PUNCTUATION.sub("", text).lower().replace("'", '"')


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_value(value: Any, accepted: Any, declared: str | None, strings: StringRule) -> bool:
    """Whether ``value`` (what the model passed) is the accepted value (see the module docstring)."""
    if declared in NUMBER_TYPES and _number(value) and _number(accepted):
        return float(value) == float(accepted)
    if isinstance(accepted, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(accepted, bool) and value == accepted
    if isinstance(accepted, int):
        return isinstance(value, int) and value == accepted
    if isinstance(accepted, float):
        return _number(value) and float(value) == accepted
    if isinstance(accepted, str):
        if not isinstance(value, str):
            return False
        return (
            value == accepted
            if strings == "exact"
            else standardize_string(value) == standardize_string(accepted)
        )
    if isinstance(accepted, list):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(accepted)
            and all(same_value(v, a, None, strings) for v, a in zip(value, accepted, strict=True))
        )
    if isinstance(accepted, Mapping):
        return isinstance(value, Mapping) and arguments_problem(value, accepted, {}, strings) is None
    return bool(value == accepted)


def arguments_problem(
    arguments: Mapping[str, Any],
    accepted: Mapping[str, Sequence[Any]],
    parameters: Mapping[str, Any],
    strings: StringRule,
) -> str | None:
    """Why ``arguments`` are not accepted, or None when they are. ``parameters`` is the tool's
    JSON Schema for them (``{}`` when unknown): its ``required`` list and each property's
    ``type``."""
    properties = parameters.get("properties") or {}
    for key, value in arguments.items():
        if key not in accepted:
            return f"unexpected argument {key!r}"
        declared = properties.get(key, {}).get("type") if isinstance(properties.get(key), Mapping) else None
        values = [option for option in accepted[key] if not (isinstance(option, str) and option == OPTIONAL)]
        if not any(same_value(value, option, declared, strings) for option in values):
            shown = clipped(repr(value), _SHOWN_CHARS)
            return f"argument {key!r}: {shown} is not one of {clipped(repr(values), _SHOWN_CHARS)}"
    required = parameters.get("required") or ()
    for key, options in accepted.items():
        if key not in arguments and (OPTIONAL not in options or key in required):
            return f"missing argument {key!r}"
    return None


def call_problem(
    call: ToolCall, expected: ExpectedCall, schemas: Mapping[str, Mapping[str, Any]], strings: StringRule
) -> str | None:
    """Why ``call`` is not the expected call, or None when it is."""
    if call.name != expected.name:
        return f"calls {call.name!r}, not {expected.name!r}"
    return arguments_problem(call.arguments, expected.arguments, schemas.get(expected.name, {}), strings)


def pair_calls(
    calls: Sequence[ToolCall], expected: Sequence[ExpectedCall], problem: Callable[[int, int], str | None]
) -> list[int | None]:
    """For each expected call, the index of the call paired with it (None when unpaired), in a
    maximum matching of the bipartite graph whose edges are the pairs without a problem
    (``problem(call, expected) is None``): every call is used once, and as many expected calls
    as possible are paired (Kuhn's augmenting paths, O(V·E) - calls are few)."""
    edges = [[c for c in range(len(calls)) if problem(c, e) is None] for e in range(len(expected))]
    owner: list[int | None] = [None] * len(calls)

    def augment(e: int, seen: set[int]) -> bool:
        for c in edges[e]:
            if c in seen:
                continue
            seen.add(c)
            holder = owner[c]
            if holder is None or augment(holder, seen):
                owner[c] = e
                return True
        return False

    for e in range(len(expected)):
        augment(e, set())
    paired: list[int | None] = [None] * len(expected)
    for c, taker in enumerate(owner):
        if taker is not None:
            paired[taker] = c
    return paired
