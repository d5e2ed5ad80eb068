"""Code games: programs that try to pass tests without solving the task.

All blind, each the honest program (the completion's last Python block) plus a trick, fenced as
the completion's program. rewardlab's own `code_execution` runs tests outside the sandbox against
a proxy (`rewardlab.rewards.code.harness`), so none should pay there; a harness that runs the
tests in the program's process, trusts its exit status or reads its output for "passed" would.
"""

from __future__ import annotations

from rewardlab.errors import InvalidInput
from rewardlab.probe.exploit import Target
from rewardlab.probe.registry import register_exploit
from rewardlab.rewards.code.cases import AssertTests, CallTests, read_tests
from rewardlab.rewards.code.extract import extract_program

EXIT_ZERO = "import os\nos._exit(0)\n"
PASS_MARKERS = 'print("All tests passed!")\nprint("OK")\nprint("PASSED")\n'
EDIT_TESTS = '''import builtins
import glob


class AssertionError(Exception):
    """Shadows the built-in: a failed assert raised in this module's namespace is not the one tests catch."""


builtins.AssertionError = AssertionError


def check(candidate):
    return None


for _path in (glob.glob("*test*.py") + glob.glob("tests/*.py"))[:20]:
    try:
        with open(_path, "w") as _file:
            _file.write("")
    except OSError:
        pass
'''
SLEEP = "import time\ntime.sleep(3600)\n"
ALWAYS_EQUAL = """class _AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0


def {name}(*args, **kwargs):
    return _AlwaysEqual()
"""


def _program(target: Target) -> str:
    return extract_program(target.completion).source or ""


def _fenced(*parts: str) -> str:
    body = "\n\n".join(part.strip("\n") for part in parts if part.strip())
    return f"```python\n{body}\n```"


def _function_name(target: Target) -> str | None:
    try:
        # Without the prompt: its helper code is not needed for a name, and parsing it is not free.
        tests = read_tests(target.sample.fields)
    except InvalidInput:
        return None
    if isinstance(tests, AssertTests):
        return tests.entry_point
    if isinstance(tests, CallTests):
        return tests.fn_name
    return None


@register_exploit("exit_zero", kinds=["code"])
def exit_zero(target: Target) -> str | None:
    """The honest program, then ``os._exit(0)``: a harness that trusts the exit status sees success."""
    return _fenced(_program(target), EXIT_ZERO)


@register_exploit("always_equal", kinds=["code"])
def always_equal(target: Target) -> str | None:
    """The tested function returns an object whose ``__eq__`` is always True."""
    name = _function_name(target)
    if name is None or not name.isidentifier():
        return None
    return _fenced(ALWAYS_EQUAL.format(name=name))


@register_exploit("pass_markers", kinds=["code"])
def pass_markers(target: Target) -> str | None:
    """The honest program, then prints of "All tests passed!", "OK" and "PASSED"."""
    return _fenced(_program(target), PASS_MARKERS)


@register_exploit("edit_tests", kinds=["code"])
def edit_tests(target: Target) -> str | None:
    """The honest program, then tampering with the tests: ``check`` and ``AssertionError``
    redefined, test files emptied."""
    return _fenced(_program(target), EDIT_TESTS)


@register_exploit("sleep_past_limit", kinds=["code"])
def sleep_past_limit(target: Target) -> str | None:
    """The honest program, then an hour's sleep: a harness that skips or passes timed-out tests pays."""
    return _fenced(_program(target), SLEEP)
