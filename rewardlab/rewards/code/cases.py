"""The tests a program is judged against, read from a sample's fields.

Three styles, recognised by the fields a dataset row carries:

- Assert tests (HumanEval / MBPP): ``test`` (code defining ``check(candidate)``, or bare asserts)
  with ``entry_point``, or ``test_list`` (MBPP: a list of assert lines that call the function by
  name). Each top-level assert counts as one test.
- Call tests: ``fn_name`` with ``tests`` = ``[{"input": [args...], "output": value}, ...]``, or
  APPS / TACO ``input_output`` holding ``fn_name``, ``inputs`` and ``outputs``.
- Stdin/stdout tests (APPS / CodeContests): ``tests`` = ``[{"input": str, "output": str}, ...]``
  or ``input_output`` without ``fn_name``.

``input_output`` may be a JSON string, as APPS stores it.
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewardlab.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class AssertTests:
    """Assert statements from the dataset, run outside the sandbox against a proxy function."""

    code: str
    entry_point: str
    #: True when ``code`` defines ``check(candidate)`` (HumanEval); False for bare asserts that
    #: call ``entry_point`` by name (MBPP).
    has_check: bool
    #: Trusted code run before the tests, beside them: helper functions the tests call
    #: (HumanEval's prompt defines ``encode_cyclic`` for the test of ``decode_cyclic``; MBPP's
    #: ``test_setup_code``). Helpers come from the dataset, never from the program under test,
    #: which could otherwise redefine them to suit its answer.
    setup: str = ""

    @property
    def count(self) -> int:
        return len(assert_statements(self))


@dataclass(frozen=True, slots=True)
class CallTests:
    """Inputs to a named function and the outputs it must return."""

    fn_name: str
    cases: tuple[tuple[list[Any], Any], ...]

    @property
    def count(self) -> int:
        return len(self.cases)


@dataclass(frozen=True, slots=True)
class StdioTests:
    """Standard input for the program and the standard output it must print."""

    cases: tuple[tuple[str, str], ...]

    @property
    def count(self) -> int:
        return len(self.cases)


ProgramTests = AssertTests | CallTests | StdioTests


def assert_statements(spec: AssertTests) -> list[ast.stmt]:
    """The statements that count as tests: each top-level statement of ``check`` (or of the module,
    for bare asserts) that asserts or raises (a test that expects an exception raises
    ``AssertionError`` itself when none comes) and uses the function under test. ``assert True``
    lines, which HumanEval has many of, test nothing and do not count."""
    module = ast.parse(spec.code)
    body, tested = module.body, {spec.entry_point}
    if spec.has_check:
        check = next(
            node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "check"
        )
        body = check.body
        tested |= {argument.arg for argument in check.args.args[:1]}
    return [
        statement
        for statement in body
        if any(isinstance(n, ast.Assert | ast.Raise) for n in ast.walk(statement))
        and any(isinstance(n, ast.Name) and n.id in tested for n in ast.walk(statement))
    ]


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def trusted_setup(fields: Mapping[str, Any], prompt: Any) -> str:
    """Helper definitions for assert tests: ``test_setup_code``, else a prompt that is a string of
    code (HumanEval's). They run outside the sandbox, as the tests do, so they must come from the
    dataset: never from a chat prompt, whose earlier turns may hold a model's code."""
    setup = fields.get("test_setup_code")
    if isinstance(setup, str) and setup.strip():
        return setup
    if isinstance(prompt, str) and prompt.strip() and _parses(prompt):
        return prompt
    return ""


def _parse_check_code(code: str, entry_point: str, setup: str) -> AssertTests:
    try:
        module = ast.parse(code)
    except SyntaxError as error:
        raise InvalidInput("fields.test", f"the test code does not parse: {error}") from None
    has_check = any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in module.body)
    spec = AssertTests(code, entry_point, has_check, setup)
    if not assert_statements(spec):
        raise InvalidInput("fields.test", "the test code has no assert or raise statements")
    return spec


def _called_name(assert_line: str) -> str | None:
    """The first function the assert calls that is not a built-in (``set(f(x)) == ...`` tests f)."""
    for node in ast.walk(ast.parse(assert_line)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and not hasattr(builtins, node.func.id)
        ):
            return node.func.id
    return None


def _mbpp(fields: Mapping[str, Any], setup: str) -> AssertTests:
    lines = fields["test_list"]
    if not isinstance(lines, list) or not lines or not all(isinstance(line, str) for line in lines):
        raise InvalidInput("fields.test_list", "must be a non-empty list of assert statements")
    try:
        entry_point = fields.get("entry_point") or _called_name(lines[0])
    except SyntaxError as error:
        raise InvalidInput("fields.test_list", f"an assert does not parse: {error}") from None
    if not entry_point:
        raise InvalidInput("fields.test_list", "cannot tell which function the asserts call")
    return _parse_check_code("\n".join(lines), entry_point, setup)


def _io_cases(inputs: Any, outputs: Any, field: str) -> list[tuple[Any, Any]]:
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise InvalidInput(field, "needs lists of inputs and outputs of the same length")
    if not inputs:
        raise InvalidInput(field, "has no test cases")
    return list(zip(inputs, outputs, strict=True))


def _from_cases(cases: list[tuple[Any, Any]], fn_name: str | None, field: str) -> CallTests | StdioTests:
    if fn_name:
        calls = []
        for arguments, expected in cases:
            if not isinstance(arguments, list):
                raise InvalidInput(
                    field, f"call inputs must be argument lists, got {type(arguments).__name__}"
                )
            calls.append((arguments, expected))
        return CallTests(fn_name, tuple(calls))
    stdio = []
    for given, wanted in cases:
        # Some datasets store multi-line input or output as a list of lines.
        stdin = "\n".join(map(str, given)) if isinstance(given, list) else given
        expected = "\n".join(map(str, wanted)) if isinstance(wanted, list) else wanted
        if not isinstance(stdin, str) or not isinstance(expected, str):
            raise InvalidInput(field, "stdin/stdout cases must be strings")
        stdio.append((stdin, expected))
    return StdioTests(tuple(stdio))


def _decoded(value: Any, field: str) -> Any:
    """A field that datasets store either as data or as its JSON text (APPS does the latter)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as error:
        raise InvalidInput(field, f"is not valid JSON: {error}") from None


def read_tests(fields: Mapping[str, Any], prompt: Any = "") -> ProgramTests:
    """The tests for one sample (see the module docstring), or `InvalidInput` naming the field.

    ``prompt`` is `Sample.prompt`; when it is a string of code (HumanEval) it provides the
    helpers the tests may call (see `AssertTests.setup`).
    """
    if "test" in fields and isinstance(fields["test"], str):
        entry_point = fields.get("entry_point")
        if not isinstance(entry_point, str) or not entry_point:
            raise InvalidInput("fields.entry_point", "assert tests need the name of the function they test")
        return _parse_check_code(fields["test"], entry_point, trusted_setup(fields, prompt))
    if "test_list" in fields:
        return _mbpp(fields, trusted_setup(fields, prompt))
    if "input_output" in fields:
        spec = _decoded(fields["input_output"], "fields.input_output")
        if not isinstance(spec, Mapping):
            raise InvalidInput("fields.input_output", "must be a mapping with inputs and outputs")
        cases = _io_cases(spec.get("inputs"), spec.get("outputs"), "fields.input_output")
        return _from_cases(cases, spec.get("fn_name"), "fields.input_output")
    if "tests" in fields:
        tests = _decoded(fields["tests"], "fields.tests")
        if not isinstance(tests, list) or not all(isinstance(t, Mapping) and "input" in t for t in tests):
            raise InvalidInput("fields.tests", 'must be a list of {"input": ..., "output": ...}')
        cases = _io_cases([t["input"] for t in tests], [t.get("output") for t in tests], "fields.tests")
        return _from_cases(cases, fields.get("fn_name"), "fields.tests")
    raise InvalidInput(
        "fields", "no tests found: expected test + entry_point, test_list, input_output or tests"
    )
