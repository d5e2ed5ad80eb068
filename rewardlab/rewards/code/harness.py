"""Run one program against its tests: the trusted half of code execution.

Tests never enter the sandbox. The program runs in a sandboxed runner that only ever answers
"what does your function return for these arguments" or "what do you print for this input";
the comparison with the expected output happens here, and assert-style tests (HumanEval's
``check(candidate)``) run here too, with ``candidate`` a proxy that forwards each call into the
sandbox. A program therefore cannot override ``assert``, patch the test harness, read the
expected outputs or print a fake "all tests passed": none of those are where it runs.

Programs in other languages (see `languages`) are compiled once in the sandbox, kept here by a
hash of their source (`_builds`), and run once per test as an executable on its input; their
function-call tests go through a harness that prints the return value as JSON, read here.

This module runs inside a trusted worker process (see `reward`), which bounds its total time.
"""

from __future__ import annotations

import ast
import binascii
import builtins
import contextlib
import functools
import hashlib
import json
import multiprocessing.util
import re
import time
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from rewardlab.rewards.code.cases import AssertTests, CallTests, ProgramTests, StdioTests, assert_statements
from rewardlab.rewards.code.cgroup import MemoryCgroup, memory_cgroup
from rewardlab.rewards.code.languages import BUILD, Language, overloaded_call
from rewardlab.rewards.code.outputs import call_output_matches, clipped_repr, stdout_matches
from rewardlab.rewards.code.python_runner import TAIL_CHARS, DecodeTimeout, decode, encode
from rewardlab.rewards.code.sandbox import Sandbox
from rewardlab.rewards.code.session import SandboxSession, SessionEnded

SNIPPET = 200
#: Time allowed on top of a test's own limit for the sandbox to start and the program to load.
STARTUP_ALLOWANCE_S = 5.0


@dataclass(slots=True)
class TestOutcome:
    """How one test went: ``passed``, ``failed``, ``error`` (the program raised or crashed) or
    ``timeout``."""

    index: int
    outcome: str
    reason: str | None = None
    runtime_s: float = 0.0
    #: Tails of what the program printed in this test (stdin/stdout tests, which run alone).
    stdout_tail: str | None = None
    stderr_tail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.index,
            "outcome": self.outcome,
            "reason": self.reason,
            "runtime_s": self.runtime_s,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }


@dataclass(slots=True)
class ProgramReport:
    """Everything a run found out; plain data, so it crosses process boundaries."""

    outcomes: list[TestOutcome] = field(default_factory=list)
    #: Why the program could not run at all (syntax error, exception at import, ...).
    load_error: str | None = None
    output_tail: str = ""
    #: What limited the program's memory (`SandboxSession.memory_limit`); None if it never ran.
    memory_limit: str | None = None

    @property
    def passed(self) -> int:
        return sum(outcome.outcome == "passed" for outcome in self.outcomes)


class ProgramTimeout(BaseException):
    """A call into the program ran past its limit (not catchable by the tests' ``except Exception``)."""


class BudgetSpent(BaseException):
    """The program's total time budget is spent; the remaining tests are not run."""


class ProgramFailure(Exception):
    """The program failed in a way that is not one of Python's built-in exceptions."""


def _snippet(value: Any) -> str:
    if not isinstance(value, str):
        return clipped_repr(value, SNIPPET)
    return value if len(value) <= SNIPPET else value[:SNIPPET] + "..."


def _message(error: BaseException) -> str:
    """``str(error)``, clipped. It can fail for an exception that holds a value (a KeyError or an
    assertion message of an int too long to write in decimal); the arguments are then shown."""
    try:
        return _snippet(str(error))
    except Exception:  # noqa: BLE001 - any failure to describe falls back to the arguments
        return clipped_repr(error.args, SNIPPET)


def _error_text(error: BaseException) -> str:
    message = _message(error)
    return _snippet(f"{type(error).__name__}: {message}" if message else type(error).__name__)


#: Built-in exceptions that a program's error is not raised as in the tests: outside a generator,
#: a StopIteration ends whatever iteration it passes through (``all(map(candidate, xs))`` would
#: pass on the first one), and StopAsyncIteration likewise.
_ITERATION_CONTROL = (StopIteration, StopAsyncIteration)


def program_exception(error: str) -> Exception:
    """The exception to raise in the tests for a program's error (``"Type: message"``): a
    built-in exception keeps its type, so tests that expect one (pytest.raises-style try/except)
    still work; anything else, and any type that cannot be made from a message alone, is a
    plain `ProgramFailure`."""
    name, _, message = error.partition(":")
    exception_type = getattr(builtins, name, None)
    if (
        isinstance(exception_type, type)
        and issubclass(exception_type, Exception)
        and not issubclass(exception_type, _ITERATION_CONTROL)
    ):
        try:
            return exception_type(message.strip())
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs five arguments
            pass
    return ProgramFailure(error)


#: Extra time the trusted side waits for a reply beyond the limit the runner enforces itself;
#: past it the runner is presumed stuck (stopped by the program) and the sandbox is replaced.
REPLY_MARGIN_S = 2.0

#: A sandbox serves this many programs, then a fresh one replaces it.
PROGRAMS_PER_SANDBOX = 64
_REPLY_TEXT = ("kind", "error", "output", "stdout", "stderr")
#: Fields of a reply that a program can fill at will (by patching the runner in its process) and
#: that are only shown, never compared: kept to the length the runner itself writes.
_REPLY_CLIPPED = ("kind", "error", "output")

# One live sandbox per (worker process, sandbox configuration), reused across programs: the
# runner inside resets the sandbox between programs (see `python_runner`).
_sessions: dict[Sandbox, SandboxSession] = {}
#: What a compiler built (file name -> (bytes, executable)), or its compile error, by
#: `_build_key`, least recently used first: a program's tests, and the G rollouts of a prompt
#: that wrote the same program, compile it once per worker.
_builds: OrderedDict[str, dict[str, tuple[bytes, bool]] | str] = OrderedDict()
MAX_CACHED_BUILDS = 32
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# One memory cgroup per (worker process, sandbox configuration), for its sandboxes one after
# another (see `cgroup`); None where none can be made.
_cgroups: dict[Sandbox, MemoryCgroup | None] = {}


def _close_sessions() -> None:
    for session in _sessions.values():
        session.close()
    _sessions.clear()
    for cgroup in _cgroups.values():
        if cgroup is not None:
            cgroup.remove()
    _cgroups.clear()


def _cgroup_for(sandbox: Sandbox) -> MemoryCgroup | None:
    if sandbox not in _cgroups:
        _cgroups[sandbox] = memory_cgroup(sandbox.limits.memory_bytes)
    return _cgroups[sandbox]


def _live_session(sandbox: Sandbox, starting_program: bool) -> SandboxSession:
    session = _sessions.get(sandbox)
    if (
        starting_program
        and session is not None
        and not session.closed
        and (session.programs >= PROGRAMS_PER_SANDBOX or not session.clean())
    ):
        # Cheap insurance against state a program might keep in ways the reset does not know,
        # and against anything written to us after the last reply: no program starts there.
        session.close()
    if session is None or session.closed:
        if not _sessions:
            # Pool workers end through multiprocessing's exit path, which runs these
            # finalizers but not atexit handlers.
            multiprocessing.util.Finalize(None, _close_sessions, exitpriority=10)
        session = _sessions[sandbox] = SandboxSession(sandbox, _cgroup_for(sandbox))
    return session


class ProgramUnderTest(Protocol):
    """What the test loops (`run_stdio_tests`, `run_call_tests`, `run_harness_call_tests`,
    `run_assert_tests`) ask of a program: run it on an input, call one of its functions. The
    local sandbox (`_Program`) and a remote one (`sandbox_fusion`) answer it."""

    load_error: str | None
    load_timed_out: bool
    output_tail: str
    memory_limit: str | None

    def script(self, stdin: str) -> dict[str, Any]: ...

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any: ...


class _Program:
    """The program under test, run by the worker's sandboxed runner. After a timeout or a crash
    the runner has reset it; it is loaded again for the next test, so one bad test does not fail
    the ones after it."""

    def __init__(
        self,
        source: str,
        sandbox: Sandbox,
        test_timeout_s: float,
        deadline: float,
        *,
        language: Language | None = None,
        compile_timeout_s: float = 10.0,
    ):
        self.source = source
        self.sandbox = sandbox
        self.test_timeout_s = test_timeout_s
        self.deadline = deadline
        #: None for Python; otherwise the language it is compiled and run as.
        self.language = language
        self.compile_timeout_s = compile_timeout_s
        #: The files each test runs (see `_build`), once known.
        self.files: dict[str, tuple[bytes, bool]] | None = None
        self.loaded = False
        self.load_error: str | None = None
        self.load_timed_out = False
        self.output_tail = ""
        self.memory_limit: str | None = None

    def close(self) -> None:
        """Stop the program and everything it started (the sandbox stays up for the next one)."""
        session = _sessions.get(self.sandbox)
        if session is not None and not session.closed:
            try:
                session.request({"op": "reset"}, REPLY_MARGIN_S + 5.0)
            except SessionEnded:
                session.close()

    def _limit(self, allowance: float = 0.0) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise BudgetSpent
        return min(self.test_timeout_s + allowance, remaining)

    def _ask(self, message: dict[str, Any], limit: float) -> dict[str, Any]:
        starting = message["op"] in ("program", "script", "compile", "exec")
        session = _live_session(self.sandbox, starting_program=starting)
        self.memory_limit = session.memory_limit
        if starting:
            session.programs += 1
        try:
            return _checked(session.request({**message, "timeout": limit}, limit + REPLY_MARGIN_S))
        except SessionEnded as ended:
            session.close()
            self.loaded = False
            if ended.timed_out:
                raise ProgramTimeout(str(ended)) from None
            raise ProgramFailure(str(ended)) from None

    def _load(self) -> None:
        if self.load_error is not None:
            raise ProgramFailure(self.load_error)
        if self.loaded:
            return
        reply = self._ask({"op": "program", "source": self.source}, self._limit())
        if reply.get("ok"):
            self.loaded = True
            return
        kind, error = reply.get("kind", "load_error"), reply.get("error")
        self.output_tail = reply.get("output", "")
        self.load_error = (
            f"loading the program: {error}" if kind in ("timeout", "crashed") else f"{kind}: {error}"
        )
        self.load_timed_out = kind == "timeout"
        raise (ProgramTimeout if self.load_timed_out else ProgramFailure)(self.load_error)

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The function's return value, or the exception it raised (re-raised here).

        Nothing else escapes into the tests: a reply that cannot be read is a `ProgramFailure`,
        never a built-in exception that a test expecting one would take for the program's.
        """
        self._load()
        limit = self._limit()
        deadline = time.monotonic() + limit
        reply = self._ask(
            {"op": "call", "name": name, "args": encode(list(args)), "kwargs": encode(kwargs)}, limit
        )
        if reply.get("ok"):
            try:
                return decode(reply.get("value"), deadline)
            except DecodeTimeout as late:
                raise ProgramTimeout(f"the program's return value: {late}") from None
            except ValueError as unreadable:
                raise ProgramFailure(f"the program's return value: {unreadable}") from None
        kind, error = reply.get("kind"), str(reply.get("error"))
        self.output_tail = reply.get("output", self.output_tail)
        if kind in ("timeout", "crashed"):
            self.loaded = False  # the runner reset the program; the next test loads it again
            raise (ProgramTimeout if kind == "timeout" else ProgramFailure)(error)
        raise program_exception(error) if kind == "raised" else ProgramFailure(error)

    def script(self, stdin: str) -> dict[str, Any]:
        if self.language is None:
            return self._ask({"op": "script", "source": self.source, "stdin": stdin}, self._limit())
        files = self._build()
        run = self.language.command(self.language.run, self.source)
        request = {
            "op": "exec",
            "files": files,
            "argv": run,
            "env": self.language.environment(),
            "stdin": stdin,
        }
        return self._ask(request, self._limit())

    def _build(self) -> dict[str, tuple[bytes, bool]]:
        """The files a test of a program in another language runs: its source, or what the
        compiler built from it (from `_builds`, or compiled now in the sandbox). A program that
        does not compile fails every test with the compiler's first error."""
        if self.load_error is not None:
            raise ProgramFailure(self.load_error)
        if self.files is not None:
            return self.files
        language = self.language
        assert language is not None  # only programs in another language are built
        source = {language.source_name(self.source): self.source.encode("utf-8", "replace")}
        compile_command = language.command(language.compile, self.source)
        key = _build_key(language, compile_command, self.source)
        built = _builds.get(key)
        if built is None:
            built = self._compile(source, compile_command)
            if built is None:  # ran past its time: not kept, it may have been the machine's load
                raise ProgramTimeout(self.load_error)
            _builds[key] = built
            while len(_builds) > MAX_CACHED_BUILDS:
                _builds.popitem(last=False)
        _builds.move_to_end(key)
        if isinstance(built, str):
            self.load_error = built
            raise ProgramFailure(built)
        self.files = built
        return built

    def _compile(
        self, source: dict[str, bytes], command: list[str]
    ) -> dict[str, tuple[bytes, bool]] | str | None:
        """Compile in the sandbox: the built files, the compile error, or None (and the load
        error set) when the compiler ran past its time limit."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise BudgetSpent
        limit = min(self.compile_timeout_s, remaining)
        assert self.language is not None
        request = {
            "op": "compile",
            "files": source,
            "argv": command,
            "env": self.language.environment(),
            "output": BUILD,
        }
        reply = self._ask(request, limit)
        if reply.get("timed_out"):
            # A timeout of every test, as on SandboxFusion (`sandbox_fusion._compile_failure`):
            # one status for one cause, whichever backend ran it (red-team round 24).
            self.load_error = f"compile_error: the compiler ran past its time limit ({limit:g} s)"
            self.load_timed_out = True
            return None
        if reply.get("exit_code") != 0:
            first = (
                _snippet(reply.get("stderr", "")) or f"the compiler exited with code {reply.get('exit_code')}"
            )
            if self.language.name == "cpp":
                overloaded = overloaded_call(reply.get("stderr", ""), self.source)
                first = f"{overloaded}: {first}" if overloaded else first
            return f"compile_error: {first}"
        if self.language.runs_source:
            return {name: (content, False) for name, content in source.items()}
        if reply.get("artifact_error"):
            return f"compile_error: {_snippet(reply['artifact_error'])}"
        return _artifact_files(reply.get("files"))


def _build_key(language: Language, command: list[str], source: str) -> str:
    """What a build depends on: the language, the compiler's command line and the source."""
    parts = [language.name, *command, source]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()


def _artifact_files(files: Any) -> dict[str, tuple[bytes, bool]] | str:
    """The compiler's files from a compile reply (name -> [base64, executable]), each checked to
    lie under the build directory; or a compile error when the reply holds anything else."""
    if not isinstance(files, dict) or not files:
        return "compile_error: the compiler built nothing"
    built: dict[str, tuple[bytes, bool]] = {}
    for name, entry in files.items():
        parts = name.split("/")
        if parts[0] != BUILD or any(part in ("", ".", "..") for part in parts) or len(parts) < 2:
            return f"compile_error: the compiler left a file outside {BUILD}/: {_snippet(name)}"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
            return "compile_error: unreadable compiler output"
        try:
            built[name] = (binascii.a2b_base64(entry[0]), bool(entry[1]))
        except (binascii.Error, ValueError):
            return "compile_error: unreadable compiler output"
    return built


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    """A reply with its text fields made text, and those only shown clipped: replies to calls come
    from the program's process, which can write anything there, and they end up in
    `Score.details`."""
    checked = dict(reply)
    for key in _REPLY_TEXT:
        if key in checked and not isinstance(checked[key], str):
            checked[key] = _snippet(checked[key])
    for key in _REPLY_CLIPPED:
        if key in checked:
            checked[key] = checked[key][-TAIL_CHARS:]
    return checked


def _outcome_of_error(index: int, error: BaseException, runtime: float) -> TestOutcome:
    if isinstance(error, ProgramTimeout):
        return TestOutcome(index, "timeout", str(error), runtime)
    if isinstance(error, AssertionError):
        message = _message(error)
        return TestOutcome(index, "failed", f"assertion failed{': ' + message if message else ''}", runtime)
    return TestOutcome(index, "error", _error_text(error), runtime)


#: A line that says what went wrong, in the runtimes' own words: ``TypeError: ...`` (node, Python),
#: ``Exception in thread "main" java...`` (Java), ``panic: ...`` (Go), ``thread 'main' panicked``
#: (Rust), ``terminate called after throwing ...`` (C++).
_ERROR_LINE = re.compile(
    r"^(?:Uncaught |Caused by: )?"
    r"(?:[\w.$]*(?:Error|Exception)\b|Exception in thread|panic: |thread '[^'\n]*' panicked"
    r"|terminate called)[^\n]*",
    re.MULTILINE,
)


def _stderr_excerpt(stderr: str) -> str:
    """At most `SNIPPET` characters of a failed run's stderr, from its last error line on (the
    runner keeps stderr's tail, and node and the JVM write the error line first and the stack
    after it: its first 200 characters were mid-stack, without the error, red-team round 24b);
    with no such line, its end, where the runtimes write why they stopped."""
    if len(stderr) <= SNIPPET:
        return stderr
    lines = list(_ERROR_LINE.finditer(stderr))
    if lines:
        start = lines[-1].start()
        excerpt = stderr[start : start + SNIPPET]
        return ("..." if start else "") + excerpt + ("..." if start + SNIPPET < len(stderr) else "")
    return "..." + stderr[-SNIPPET:]


def _exit_reason(reply: dict[str, Any]) -> str:
    """Why a run that exited non-zero failed: its stderr, or when that is blank the end of its
    stdout, where some runtimes write why they could not start (the JVM's "Error occurred during
    initialization of VM" under too small a memory limit was a bare ``exited with code 1: ``,
    red-team round 24)."""
    stderr = reply.get("stderr", "")
    if stderr.strip():
        return f"exited with code {reply['exit_code']}: {_stderr_excerpt(stderr)}"
    stdout = reply.get("stdout", "").strip()
    said = f"; stdout ends: {stdout[-SNIPPET:]!r}" if stdout else ""
    return f"exited with code {reply['exit_code']} with nothing on stderr{said}"


def call_stdin(arguments: list[Any]) -> str:
    """What a call harness (see `languages`) reads: the arguments as one JSON array, text as
    UTF-8 and not ``\\u`` escapes (the C++ harness's reader does not join surrogate pairs). One
    writer for the local and the SandboxFusion backend, which sent astral characters as escaped
    surrogate pairs and so failed correct C++ programs (red-team round 24)."""
    return json.dumps(arguments, ensure_ascii=False)


def run_stdio_tests(
    program: ProgramUnderTest, tests: StdioTests, tolerance: float, outcomes: list[TestOutcome]
) -> None:
    """Append each test's outcome as it is known, so a spent budget keeps the ones before it."""
    for index, (stdin, expected) in enumerate(tests.cases):
        started = time.monotonic()
        try:
            reply = program.script(stdin)
        except (ProgramTimeout, ProgramFailure) as error:
            outcomes.append(_outcome_of_error(index, error, time.monotonic() - started))
            continue
        runtime = reply.get("runtime_s", time.monotonic() - started)
        if not reply.get("ok"):
            program.load_error = f"{reply.get('kind')}: {reply.get('error')}"
            raise ProgramFailure(program.load_error)
        if reply["timed_out"]:
            outcome, reason = "timeout", "the program ran past its time limit"
        elif reply["output_truncated"]:
            outcome, reason = "failed", "output exceeded the size limit"
        elif reply["exit_code"] != 0:
            outcome, reason = "error", _exit_reason(reply)
        elif stdout_matches(reply["stdout"], expected, tolerance):
            outcome, reason = "passed", None
        else:
            outcome, reason = "failed", f"expected {_snippet(expected)!r}, got {_snippet(reply['stdout'])!r}"
        tails = {"stdout_tail": reply["stdout"][-SNIPPET:], "stderr_tail": reply["stderr"][-SNIPPET:]}
        outcomes.append(TestOutcome(index, outcome, reason, runtime, **tails))


def run_call_tests(
    program: ProgramUnderTest, tests: CallTests, tolerance: float, outcomes: list[TestOutcome]
) -> None:
    for index, (arguments, expected) in enumerate(tests.cases):
        started = time.monotonic()
        try:
            actual = program.call(tests.fn_name, arguments, {})
        except (ProgramTimeout, Exception) as error:  # noqa: BLE001 - whatever the program raised fails the test
            outcomes.append(_outcome_of_error(index, error, time.monotonic() - started))
            continue
        runtime = time.monotonic() - started
        # Judged outside the guard on purpose: judging raises for no value a program can return
        # (see `outputs`), and if it did, that would be our bug to see, not the program's failure.
        if call_output_matches(actual, expected, tolerance):
            outcomes.append(TestOutcome(index, "passed", None, runtime))
        else:
            reason = f"expected {_snippet(expected)}, got {_snippet(actual)}"
            outcomes.append(TestOutcome(index, "failed", reason, runtime))


def _printed_value(stdout: str) -> Any:
    """The value a function-call harness printed: JSON on the last line that is not blank (what
    the program printed itself comes before it). Python's JSON reader is linear in the text and
    refuses integers of more than 4,300 digits; nesting past its recursion limit is refused here."""
    lines = stdout.rstrip().rsplit("\n", 1)
    try:
        return json.loads(lines[-1])
    except (ValueError, RecursionError):
        raise ProgramFailure(f"the program printed no JSON return value: {_snippet(lines[-1])!r}") from None


def run_harness_call_tests(
    program: ProgramUnderTest, tests: CallTests, tolerance: float, outcomes: list[TestOutcome]
) -> None:
    """Call tests of a program in another language: each runs the program with the harness (see
    `languages`) on the arguments as JSON, and the printed value is judged here."""
    for index, (arguments, expected) in enumerate(tests.cases):
        started = time.monotonic()
        try:
            reply = program.script(call_stdin(arguments))
        except (ProgramTimeout, ProgramFailure) as error:
            outcomes.append(_outcome_of_error(index, error, time.monotonic() - started))
            continue
        if not reply.get("ok"):
            # The program did not build (SandboxFusion answers so): every test fails with the
            # compiler's reason, as in `run_stdio_tests`. Reading ``timed_out`` of this reply was
            # a KeyError that failed the whole sample (red-team round 24).
            program.load_error = f"{reply.get('kind')}: {reply.get('error')}"
            raise ProgramFailure(program.load_error)
        try:
            runtime = reply.get("runtime_s", time.monotonic() - started)
            if reply["timed_out"]:
                raise ProgramTimeout("the program ran past its time limit")
            if reply["exit_code"] != 0:
                raise ProgramFailure(_exit_reason(reply))
            if reply["output_truncated"]:
                raise ProgramFailure("output exceeded the size limit")
            actual = _printed_value(reply["stdout"])
        except (ProgramTimeout, ProgramFailure) as error:
            outcomes.append(_outcome_of_error(index, error, time.monotonic() - started))
            continue
        tails = {"stdout_tail": reply["stdout"][-SNIPPET:], "stderr_tail": reply["stderr"][-SNIPPET:]}
        if call_output_matches(actual, expected, tolerance):
            outcomes.append(TestOutcome(index, "passed", None, runtime, **tails))
        else:
            reason = f"expected {_snippet(expected)}, got {_snippet(actual)}"
            outcomes.append(TestOutcome(index, "failed", reason, runtime, **tails))


_WRAPPER = """
try:
    __rewardlab_begin({index})
except __rewardlab_budget:
    raise
except BaseException as __rewardlab_error:
    __rewardlab_record({index}, __rewardlab_error)
else:
    __rewardlab_record({index}, None)
"""


@functools.lru_cache(maxsize=256)
def _instrumented(tests: AssertTests) -> types.CodeType:
    """The test code, compiled, with each counted statement wrapped so its outcome is recorded on
    its own. Cached: the G rollouts of one prompt share their tests."""
    module = ast.parse(tests.code)
    counted = {ast.dump(statement) for statement in assert_statements(tests)}
    body_owner: ast.Module | ast.FunctionDef = module
    if tests.has_check:
        body_owner = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    wrapped: list[ast.stmt] = []
    index = 0
    for statement in body_owner.body:
        if ast.dump(statement) in counted:
            wrapper = ast.parse(_WRAPPER.format(index=index)).body[0]
            assert isinstance(wrapper, ast.Try)
            wrapper.body.append(statement)
            wrapped.append(wrapper)
            index += 1
        else:
            wrapped.append(statement)
    body_owner.body = wrapped
    return compile(ast.fix_missing_locations(module), "<tests>", "exec")


def run_assert_tests(program: ProgramUnderTest, tests: AssertTests) -> list[TestOutcome]:
    count = tests.count
    outcomes: dict[int, TestOutcome] = {}
    started: dict[int, float] = {}

    def begin(index: int) -> None:
        started[index] = time.monotonic()

    def record(index: int, error: BaseException | None) -> None:
        runtime = time.monotonic() - started.get(index, time.monotonic())
        outcomes[index] = (
            TestOutcome(index, "passed", None, runtime)
            if error is None
            else _outcome_of_error(index, error, runtime)
        )

    def candidate(*args: Any, **kwargs: Any) -> Any:
        return program.call(tests.entry_point, list(args), kwargs)

    namespace: dict[str, Any] = {
        "__name__": "__rewardlab_tests__",
        "__rewardlab_begin": begin,
        "__rewardlab_record": record,
        "__rewardlab_budget": BudgetSpent,
        tests.entry_point: candidate,
    }
    stopped_by: str | None = None
    if tests.setup:
        # Helpers that fail to define surface as NameErrors in the tests that need them.
        with contextlib.suppress(Exception):
            exec(compile(tests.setup, "<setup>", "exec"), namespace)
        namespace[tests.entry_point] = candidate  # the prompt's stub of the function is not the program
    try:
        exec(_instrumented(tests), namespace)
        if tests.has_check:
            namespace["check"](candidate)
    except BudgetSpent:
        stopped_by = "the program's total time budget is spent"
    except Exception as error:  # noqa: BLE001 - a test's own setup failing fails the tests after it
        stopped_by = f"test setup raised {_error_text(error)}"
    outcome = "timeout" if stopped_by and "budget" in stopped_by else "error"
    return [
        outcomes.get(index) or TestOutcome(index, outcome, stopped_by or "not run") for index in range(count)
    ]


def fail_untested(
    report: ProgramReport, tests: ProgramTests, program: ProgramUnderTest, error: BaseException
) -> None:
    """Stopped by ``error`` (the program failed, a call ran past its limit, or the total budget
    is spent), every test not yet run fails with that reason: a timeout for the last two, else
    an error. Shared by the local run (`run_program`) and the remote one
    (`sandbox_fusion.run_program_remote`), so that a stop reads the same on both backends."""
    reason = program.load_error or str(error) or "the program's total time budget is spent"
    kind = "timeout" if isinstance(error, ProgramTimeout | BudgetSpent) else "error"
    done = len(report.outcomes)
    report.outcomes += [TestOutcome(index, kind, reason) for index in range(done, tests.count)]


def finished_report(report: ProgramReport, program: ProgramUnderTest) -> ProgramReport:
    """``report`` completed with what the program left once its tests are over: its load error
    (a program that does not load fails every test for that same reason, a timeout when loading
    ran out of time), its output tail and what limited its memory. Shared by the local and the
    remote run, as `fail_untested` is."""
    if program.load_error is not None:
        report.load_error = program.load_error
        outcome = "timeout" if program.load_timed_out else "error"
        report.outcomes = [
            TestOutcome(o.index, outcome, program.load_error, o.runtime_s) for o in report.outcomes
        ]
    report.output_tail = program.output_tail
    report.memory_limit = program.memory_limit
    return report


def _unwritable_input(language: Language | None, tests: ProgramTests) -> str | None:
    """Why a test's input cannot reach a program as bytes, or None. A program reads stdin (and
    a call harness its JSON arguments) as UTF-8, and a lone surrogate (``"\\ud83d"``, which
    JSON and Python strings allow) has no UTF-8 form: no program in any language can read it,
    as no program can print it (its output is decoded with replacement, see `outputs`). The
    runner's strict write of such an input ended the sandbox and failed the test as the
    program's error (red-team round 24); the test is refused here instead, as the dataset's
    fault, naming it. Python call and assert tests pass Python values, not bytes: they keep any
    string."""
    if isinstance(tests, StdioTests):
        inputs = [stdin for stdin, _ in tests.cases]
    elif isinstance(tests, CallTests) and language is not None:
        inputs = [call_stdin(arguments) for arguments, _ in tests.cases]
    else:
        return None
    for index, text in enumerate(inputs):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            character = f"U+{ord(text[error.start]):04X}"
            return f"test {index}'s input holds a lone surrogate ({character}), which has no UTF-8 form"
    return None


def unsupported_tests(language: Language | None, tests: ProgramTests) -> str | None:
    """Why ``tests`` cannot judge a program in ``language``, or None: assert tests are Python
    code that calls the program, and call tests need the language's harness; and a test whose
    input cannot be written as UTF-8 (see `_unwritable_input`) can judge no program."""
    unwritable = _unwritable_input(language, tests)
    if unwritable is not None:
        return unwritable
    if language is None or isinstance(tests, StdioTests):
        return None
    if isinstance(tests, AssertTests):
        return f"assert tests are Python code and cannot test a {language.name} program"
    if language.call_harness is None:
        return f"function-call tests are not supported for {language.name}; use stdin/stdout tests"
    if not _IDENTIFIER.fullmatch(tests.fn_name):
        return f"fn_name {_snippet(tests.fn_name)!r} is not a {language.name} identifier"
    return None


def run_program(
    source: str,
    tests: ProgramTests,
    sandbox: Sandbox,
    *,
    test_timeout_s: float,
    total_timeout_s: float,
    tolerance: float,
    language: Language | None = None,
    compile_timeout_s: float = 10.0,
) -> ProgramReport:
    """Run ``source`` against ``tests`` and report every test's outcome; ``language`` is None
    for Python, else the language the program is compiled and run as (its tests must be stdin
    or, where it has a harness, call tests: see `unsupported_tests`)."""
    if language is not None and isinstance(tests, CallTests):
        source = language.with_call_harness(source, tests.fn_name)
    deadline = time.monotonic() + total_timeout_s
    program = _Program(
        source, sandbox, test_timeout_s, deadline, language=language, compile_timeout_s=compile_timeout_s
    )
    report = ProgramReport()
    try:
        if isinstance(tests, StdioTests):
            run_stdio_tests(program, tests, tolerance, report.outcomes)
        elif isinstance(tests, CallTests) and language is not None:
            run_harness_call_tests(program, tests, tolerance, report.outcomes)
        elif isinstance(tests, CallTests):
            run_call_tests(program, tests, tolerance, report.outcomes)
        else:
            report.outcomes = run_assert_tests(program, tests)
    except (ProgramFailure, ProgramTimeout, BudgetSpent) as error:
        fail_untested(report, tests, program, error)
    finally:
        program.close()
    return finished_report(report, program)
