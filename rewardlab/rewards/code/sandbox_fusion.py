"""A remote backend for `CodeExecutionReward`: SandboxFusion's HTTP API, for users who run it.

SandboxFusion (bytedance/SandboxFusion) serves a code sandbox over HTTP. Its ``POST /run_code``
(``sandbox/server/sandbox_api.py``, ``RunCodeRequest``) takes ``{code, language,
compile_timeout, run_timeout, memory_limit_MB, stdin, files, fetch_files}`` and answers
``{status, message, compile_result, run_result, files}``: ``status`` is ``Success``, ``Failed``
(compiling or running timed out or exited non-zero) or ``SandboxError`` (a command could not be
run at all; ``parse_run_status``), and each result is a ``CommandRunResult`` ``{status: Finished
| Error | TimeLimitExceeded, execution_time, return_code, stdout, stderr}``
(``sandbox/runners/types.py``). Servers older than ``memory_limit_MB`` ignore it (pydantic drops
unknown fields).

What this keeps of rewardlab's guarantee (see `harness`): the tests stay on the trusted side.
Only the program and one test's stdin are sent, never an expected output; the stdout comes back
and is judged here by the local harness's own code (`harness.run_stdio_tests`, so the comparison is
`outputs.stdout_matches` exactly as for local runs). A Python function call is a file of its own
(the driver in `sandbox_fusion_call`) that prints the encoded return value, decoded and judged
here; in C++ and JavaScript it is the program with the language's call harness (`languages`),
run on the arguments as JSON, as locally. Assert tests (HumanEval, MBPP) run here, each call of
``candidate`` one request. What the API
forces us to trust: the remote side reports status, exit code and timing, and the program runs
in the driver's process, so it can print a forged reply - never a right answer it could not
compute, since expected outputs are never sent. SandboxFusion's ``/submit``, which takes a
dataset's tests (``provided_data``) and judges them remotely, is deliberately not used.

Failures, after verl's client (``verl/utils/reward_score/sandbox_fusion/utils.py``:
``call_sandbox_api`` posts ``/run_code`` with a request timeout of compile + run timeout + 10 s
and retries a 504 up to 3 times; ``_process_single_case`` maps a failed compile to -4, a run
``TimeLimitExceeded`` to -3, a non-zero exit to -2 and API or sandbox errors to -1), with these
departures:

- 429, every 5xx, connection errors, request timeouts and ``SandboxError`` are retried, with
  full-jitter exponential backoff, at most ``retries`` times and never past the program's time
  budget; a 4xx or an unreadable answer is not (retrying cannot fix it).
- What is the program's doing is a test result: a failed or timed-out compile fails every test
  with the compiler's message, a run past ``run_timeout`` is that test's ``timeout``, an answer
  larger than ``max_reply_bytes`` (a program that floods stdout) fails that test. What is the
  backend's doing fails the whole sample: ``backend_error`` (or ``timeout`` when it never
  answered) with the URL in the reason - never a 0 the program did not earn. A program that makes
  the sandbox itself fail (``SandboxError`` on every retry) thus gets no score rather than 0: a
  rising ``backend_error`` rate in training is worth a look.
- Stdout is compared judge-style (`outputs`), not ``rstrip("\\n")``-equal; call arguments and
  return values use `python_runner`'s tagged codec (tuples, sets, huge ints and ``inf`` survive),
  not one JSON value per line and ``str()``.
- Concurrency: verl shares a ``threading.Semaphore`` across test cases. Here each pool worker
  runs one program (``workers`` of `CodeExecutionReward`) with at most ``requests_per_program``
  requests in flight (stdin/stdout tests and harness calls; Python calls and asserts go one at a
  time, in order); a program's first request goes alone, so a program that does not compile
  costs one request, not one per test.

Runs in a pool worker, like the local `harness`: the worker bounds the job's time, and assert
tests, which are trusted code, run there as they do locally.
"""

from __future__ import annotations

import functools
import http.client
import inspect
import json
import random
import secrets
import threading
import time
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rewardlab.errors import ConfigError
from rewardlab.rewards.code import python_runner
from rewardlab.rewards.code.cases import CallTests, ProgramTests, StdioTests
from rewardlab.rewards.code.extract import job_program
from rewardlab.rewards.code.harness import (
    BudgetSpent,
    ProgramFailure,
    ProgramReport,
    ProgramTimeout,
    call_stdin,
    fail_untested,
    finished_report,
    program_exception,
    run_assert_tests,
    run_call_tests,
    run_harness_call_tests,
    run_stdio_tests,
    unsupported_tests,
)
from rewardlab.rewards.code.languages import LANGUAGES
from rewardlab.rewards.contract import Status

#: Every ``language`` SandboxFusion's ``/run_code`` accepts (``Language`` in
#: ``sandbox/runners/types.py``; verl's ``SUPPORTED_LANGUAGES`` is the same list).
SANDBOX_FUSION_LANGUAGES = frozenset({
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript",
    "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit",
    "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket",
})  # fmt: skip
#: rewardlab's names for languages that SandboxFusion names otherwise.
LANGUAGE_ALIASES = {"c++": "cpp", "javascript": "nodejs", "js": "nodejs"}
#: Characters of a program's stderr or compiler output kept in a reason.
SNIPPET = 200
_CHUNK = 1 << 16
_DRIVER = Path(__file__).with_name("sandbox_fusion_call.py")


def sandbox_fusion_language(language: str) -> str:
    """SandboxFusion's name for ``language``, or `ConfigError` listing the names it accepts."""
    name = LANGUAGE_ALIASES.get(language, language)
    if name not in SANDBOX_FUSION_LANGUAGES:
        accepted = ", ".join(sorted(SANDBOX_FUSION_LANGUAGES | set(LANGUAGE_ALIASES)))
        raise ConfigError("language", f"SandboxFusion does not run {language!r}; it runs {accepted}")
    return name


class SandboxFusionOptions(BaseModel):
    """Where SandboxFusion runs and how to talk to it (``sandbox_fusion`` of `CodeExecutionReward`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    url: str
    """The server (``http://host:8080``), or its ``/run_code`` endpoint as verl's config names it."""
    retries: int = Field(default=3, ge=0)
    """Further attempts after the first, for connection errors, timeouts, 429, 5xx and
    ``SandboxError``."""
    backoff_s: float = Field(default=0.5, ge=0)
    """The first retry waits up to this long, each later one up to twice as long (full jitter)."""
    backoff_max_s: float = Field(default=8.0, ge=0)
    """Cap on one wait."""
    requests_per_program: int = Field(default=4, ge=1)
    """Requests in flight at once for one program (its tests); ``workers`` programs run at once."""
    request_margin_s: float = Field(default=10.0, ge=0)
    """Time a request may take beyond compile and run timeouts (queueing, start-up, transfer)."""
    max_reply_bytes: int = Field(default=16 << 20, ge=1024)
    """Largest answer read; a larger one fails its test (the program printed too much)."""


@dataclass(frozen=True, slots=True)
class RemoteFailure:
    """The job's answer when the sample cannot be scored: the backend failed, or the tests need
    what the backend cannot do. ``status`` is a `Status` value."""

    status: str
    reason: str


def remote_backend(
    backend: str,
    options: SandboxFusionOptions | Mapping[str, Any] | None,
    language: str,
    memory_bytes: int,
    compile_timeout_s: float,
) -> SandboxFusion | None:
    """The SandboxFusion server `CodeExecutionReward` sends programs to, or None for ``backend:
    local``; `ConfigError` naming the option when they do not fit together."""
    if backend == "local":
        if options is not None:
            raise ConfigError("sandbox_fusion", "is only used with backend: sandbox_fusion")
        return None
    if backend != "sandbox_fusion":
        raise ConfigError("backend", f"must be local or sandbox_fusion, got {backend!r}")
    if options is None:
        raise ConfigError(
            "sandbox_fusion", "backend: sandbox_fusion needs the server's url (sandbox_fusion: {url: ...})"
        )
    if isinstance(options, Mapping):
        options = SandboxFusionOptions(**options)
    return SandboxFusion.connect(options, language, memory_bytes, compile_timeout_s)


class BackendFailed(BaseException):
    """The backend did not answer usably after the retries. A BaseException, like the harness's
    `ProgramTimeout`, so no test's ``except Exception`` takes it for the program's failure."""

    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status = status


class _Oversized(Exception):
    """An answer larger than the limit."""


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not."""

    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True, slots=True)
class SandboxFusion:
    """A SandboxFusion server as one program's tests see it; plain data, sent to pool workers."""

    url: str
    #: SandboxFusion's name of the language (``nodejs``), and rewardlab's (``javascript``).
    language: str
    program_language: str
    memory_limit_mb: int
    compile_timeout_s: float
    options: SandboxFusionOptions

    @classmethod
    def connect(
        cls, options: SandboxFusionOptions, language: str, memory_bytes: int, compile_timeout_s: float = 10.0
    ) -> SandboxFusion:
        """The backend for ``options`` and programs in ``language`` (rewardlab's name), with
        ``memory_bytes`` sent as ``memory_limit_MB``; `ConfigError` for an address it cannot post
        to or a language SandboxFusion does not run."""
        parts = urllib.parse.urlsplit(options.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("sandbox_fusion.url", f"must be an http(s) address, got {options.url!r}")
        path = parts.path.rstrip("/")
        path = path if path.endswith("/run_code") else path + "/run_code"
        url = urllib.parse.urlunsplit(parts._replace(path=path))
        remote_language = sandbox_fusion_language(language)
        return cls(url, remote_language, language, max(1, memory_bytes >> 20), compile_timeout_s, options)

    def run(self, code: str, stdin: str, run_timeout_s: float, deadline: float) -> dict[str, Any]:
        """SandboxFusion's answer for one run, after retries; ``{"oversized": True}`` for an
        answer past ``max_reply_bytes``; `BackendFailed` when there is none to use, or when
        ``deadline`` (monotonic) comes first."""
        body = json.dumps({
            "code": code,
            "language": self.language,
            "stdin": stdin,
            "compile_timeout": self.compile_timeout_s,
            "run_timeout": run_timeout_s,
            "memory_limit_MB": self.memory_limit_mb,
            "files": {},
            "fetch_files": [],
        }).encode()  # fmt: skip
        wanted = self.compile_timeout_s + run_timeout_s + self.options.request_margin_s
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BackendFailed(Status.TIMEOUT, f"POST {self.url}: the program's time budget ran out")
            try:
                return self._post(body, min(wanted, remaining))
            except _Retryable as failure:
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                if attempt > self.options.retries:
                    raise BackendFailed(failure.status, f"POST {self.url}: {failure}{tries}") from None
                delay = random.uniform(
                    0, min(self.options.backoff_max_s, self.options.backoff_s * 2 ** (attempt - 1))
                )
                if time.monotonic() + delay >= deadline:
                    raise BackendFailed(failure.status, f"POST {self.url}: {failure}{tries}") from None
                time.sleep(delay)

    def _post(self, body: bytes, timeout_s: float) -> dict[str, Any]:
        parts = urllib.parse.urlsplit(self.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(parts.netloc, timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        status = 0
        try:
            connection.request("POST", parts.path, body=body, headers={"content-type": "application/json"})
            sock = connection.sock
            reply = connection.getresponse()
            status = reply.status
            payload = _read_bounded(reply, sock, self.options.max_reply_bytes, deadline)
        except TimeoutError:
            raise _Retryable(Status.TIMEOUT, f"no answer within {timeout_s:.3g} s") from None
        except _Oversized:
            if status != 200:
                raise BackendFailed(
                    Status.BACKEND_ERROR, f"POST {self.url}: HTTP {status}, a huge answer"
                ) from None
            return {"oversized": True}
        except (OSError, http.client.HTTPException) as error:
            raise _Retryable(
                Status.BACKEND_ERROR, f"connection failed: {error or type(error).__name__}"
            ) from None
        finally:
            connection.close()
        if status == 429 or status >= 500:
            raise _Retryable(Status.BACKEND_ERROR, f"HTTP {status}: {_start(payload)}")
        if status != 200:
            raise BackendFailed(Status.BACKEND_ERROR, f"POST {self.url}: HTTP {status}: {_start(payload)}")
        # JSONDecodeError and UnicodeDecodeError are ValueErrors; nesting past the parser's depth
        # is a RecursionError.
        try:
            answer = json.loads(payload)
        except (ValueError, RecursionError) as error:
            raise BackendFailed(Status.BACKEND_ERROR, f"POST {self.url}: not JSON ({error})") from None
        if not isinstance(answer, dict) or answer.get("status") not in ("Success", "Failed", "SandboxError"):
            raise BackendFailed(
                Status.BACKEND_ERROR, f"POST {self.url}: not a run_code answer: {_start(payload)}"
            )
        if answer["status"] == "SandboxError":
            raise _Retryable(Status.BACKEND_ERROR, f"SandboxError: {_clip(answer.get('message'))}")
        return answer


def _read_bounded(reply: http.client.HTTPResponse, sock: Any, limit: int, deadline: float) -> bytes:
    """The body, read in chunks so that neither its size nor a slow trickle is unbounded: each
    read may take only what is left of the request's time."""
    length = reply.getheader("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _Oversized
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        if sock is not None:
            sock.settimeout(remaining)
        chunk = reply.read1(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _Oversized
        chunks.append(chunk)


def _text(value: Any) -> str:
    """A field of the answer that should be text; anything else is no text."""
    return value if isinstance(value, str) else ""


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "..."


def _start(payload: bytes) -> str:
    return _clip(payload[: SNIPPET * 4].decode(errors="replace"))


def _codec_source() -> str:
    """`python_runner`'s value codec as source, so both ends of a call use the same one."""
    constants = {
        "MAX_DEPTH": python_runner.MAX_DEPTH,
        "MAX_DECODED_VALUES": python_runner.MAX_DECODED_VALUES,
        "MAX_SAME_HASH": python_runner.MAX_SAME_HASH,
    }
    pieces = ["import math\nimport sys\nimport time\n"]
    pieces += [f"{name} = {value!r}\n" for name, value in constants.items()]
    pieces.append("_HASH_MODULUS = sys.hash_info.modulus\n_EXACT_FLOATS = 2.0**52\n")
    for item in (python_runner.Unencodable, python_runner.DecodeTimeout, python_runner.encode):
        pieces.append(inspect.getsource(item))
    pieces += [inspect.getsource(python_runner._Decoder), inspect.getsource(python_runner.decode)]
    return "\n\n".join(pieces)


@functools.cache
def _call_prefix() -> str:
    return _codec_source() + "\n\n" + _DRIVER.read_text()


def call_code(source: str, name: str, marker: str) -> str:
    """The file sent for one function call: the codec, the driver, and the line that runs it."""
    return f"{_call_prefix()}\n\n_serve({source!r}, {name!r}, {marker!r}, encode, decode)\n"


def _compile_failure(answer: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, message)`` when the answer says compiling failed, else None."""
    compiled = answer.get("compile_result")
    if not isinstance(compiled, dict):
        return None
    if compiled.get("status") == "TimeLimitExceeded":
        return "compile_timeout", "compiling ran past its time limit"
    if compiled.get("return_code") not in (0, None):
        message = (
            compiled.get("stderr") or compiled.get("stdout") or f"exit code {compiled.get('return_code')}"
        )
        return "compile_error", _clip(message)
    return None


class _RemoteProgram:
    """What the local harness's test loops call (`harness.ProgramUnderTest`), answered by
    SandboxFusion: ``script`` for a stdin/stdout test, ``call`` for a function call."""

    def __init__(self, source: str, remote: SandboxFusion, test_timeout_s: float, total_timeout_s: float):
        self.source = source
        self.remote = remote
        self.test_timeout_s = test_timeout_s
        self.total_timeout_s = total_timeout_s
        self.deadline = time.monotonic() + total_timeout_s
        self.load_error: str | None = None
        self.load_timed_out = False
        self.output_tail = ""
        self.memory_limit: str | None = f"sandbox_fusion ({remote.memory_limit_mb} MB)"
        #: Seconds the remote side says the program ran, summed: whether a spent budget is the
        #: program's doing or the backend's.
        self.program_time_s = 0.0
        self._lock = threading.Lock()
        self.backend_failure: BackendFailed | None = None
        self._replies: list[dict[str, Any] | BaseException] = []

    def _run(self, code: str, stdin: str) -> dict[str, Any]:
        """SandboxFusion's answer. A failed backend is remembered and raised again for every later
        test: the assert harness records whatever a test raises as that test's outcome, and an
        outage must fail the sample (`run_program_remote` raises it), never its tests."""
        if self.backend_failure is not None:
            raise self.backend_failure
        try:
            if time.monotonic() >= self.deadline:
                raise self._spent()
            try:
                answer = self.remote.run(code, stdin, self.test_timeout_s, self.deadline)
            except BackendFailed:
                if time.monotonic() >= self.deadline:
                    raise self._spent() from None
                raise
        except BackendFailed as failed:
            self.backend_failure = failed
            raise
        for part in ("compile_result", "run_result"):
            result = answer.get(part)
            if isinstance(result, dict) and isinstance(result.get("execution_time"), int | float):
                with self._lock:
                    self.program_time_s += max(0.0, float(result["execution_time"]))
        return answer

    def _spent(self) -> BaseException:
        """The budget ran out: the program's fault when its own runs took it, else the backend's."""
        if self.program_time_s >= self.total_timeout_s:
            return BudgetSpent()
        return BackendFailed(
            Status.TIMEOUT,
            f"POST {self.remote.url}: the program's {self.total_timeout_s:g} s budget ran out, "
            f"{self.program_time_s:.3g} s of it running the program",
        )

    def _without_run_result(self) -> BackendFailed:
        self.backend_failure = BackendFailed(
            Status.BACKEND_ERROR, f"POST {self.remote.url}: an answer without run_result"
        )
        return self.backend_failure

    def prefetch(self, stdins: list[str]) -> None:
        """Run every stdin/stdout test now, up to ``requests_per_program`` at once, the first
        alone (a program that does not compile fails it, and the rest are not sent)."""
        if not stdins:
            return
        first = self._script_reply(stdins[0])
        self._replies = [first]
        if isinstance(first, BaseException) or not first.get("ok"):
            return
        with ThreadPoolExecutor(self.remote.options.requests_per_program) as pool:
            self._replies += list(pool.map(self._script_reply, stdins[1:]))

    def _script_reply(self, stdin: str) -> dict[str, Any] | BaseException:
        started = time.monotonic()
        try:
            answer = self._run(self.source, stdin)
        except (BudgetSpent, BackendFailed) as stop:
            return stop
        if answer.get("oversized"):
            return _script_result(exit_code=0, stdout="", stderr="", truncated=True, started=started)
        failure = _compile_failure(answer)
        if failure is not None:
            kind, message = failure
            self.load_timed_out = kind == "compile_timeout"
            return {"ok": False, "kind": kind, "error": message}
        run = answer.get("run_result")
        if not isinstance(run, dict):
            return self._without_run_result()
        timed_out = run.get("status") == "TimeLimitExceeded"
        exit_code = run.get("return_code")
        return _script_result(
            exit_code=exit_code if isinstance(exit_code, int) else (0 if timed_out else -1),
            stdout=_text(run.get("stdout")),
            stderr=_text(run.get("stderr")),
            timed_out=timed_out,
            runtime_s=run.get("execution_time"),
            started=started,
        )

    def script(self, stdin: str) -> dict[str, Any]:
        reply = self._replies.pop(0) if self._replies else self._script_reply(stdin)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The function's return value, or the exception it raised, as `harness.ProgramUnderTest.call`."""
        if self.load_error is not None:
            raise ProgramFailure(self.load_error)
        marker = secrets.token_hex(16)
        try:
            stdin = json.dumps(
                {"args": python_runner.encode(list(args)), "kwargs": python_runner.encode(kwargs)}
            )
        except python_runner.Unencodable as error:
            raise ProgramFailure(f"the test's arguments cannot be sent: {error}") from None
        answer = self._run(call_code(self.source, name, marker), stdin)
        if answer.get("oversized"):
            raise ProgramFailure(f"the answer was larger than {self.remote.options.max_reply_bytes} bytes")
        run = answer.get("run_result")
        if not isinstance(run, dict):
            raise self._without_run_result()
        if run.get("status") == "TimeLimitExceeded":
            raise ProgramTimeout(f"the call ran past its time limit of {self.test_timeout_s:g} s")
        reply = _marked_reply(run.get("stdout"), marker)
        if reply is None:
            stderr, code = _text(run.get("stderr")), run.get("return_code")
            raise ProgramFailure(
                f"the program ended without answering (exit code {code}): {_clip(stderr[-SNIPPET:])}"
            )
        if isinstance(reply.get("output"), str):
            self.output_tail = reply["output"][-python_runner.TAIL_CHARS :]
        if reply.get("ok") is True:
            try:
                return python_runner.decode(reply.get("value"), time.monotonic() + self.test_timeout_s)
            except python_runner.DecodeTimeout as late:
                raise ProgramTimeout(f"the program's return value: {late}") from None
            except ValueError as unreadable:
                raise ProgramFailure(f"the program's return value: {unreadable}") from None
        kind, message = reply.get("kind"), _clip(reply.get("error"))
        if kind == "load_error":
            self.load_error = f"load_error: {message}"
            raise ProgramFailure(self.load_error)
        raise program_exception(message) if kind == "raised" else ProgramFailure(message)

    def close(self) -> None:
        """Nothing to stop: every run ended with its request."""


def _script_result(
    *,
    exit_code: int,
    stdout: str,
    stderr: str,
    started: float,
    truncated: bool = False,
    timed_out: bool = False,
    runtime_s: Any = None,
) -> dict[str, Any]:
    """A reply shaped like `python_runner`'s to ``script``, which `harness.run_stdio_tests` judges."""
    runtime = float(runtime_s) if isinstance(runtime_s, int | float) else time.monotonic() - started
    return {
        "ok": True,
        "timed_out": timed_out,
        "output_truncated": truncated,
        "exit_code": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "runtime_s": runtime,
    }


def _marked_reply(stdout: Any, marker: str) -> dict[str, Any] | None:
    """The driver's reply: the last line that starts with the marker, read as JSON."""
    if not isinstance(stdout, str):
        return None
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker + " "):
            try:
                reply = json.loads(line[len(marker) + 1 :])
            except (ValueError, RecursionError):  # a forged line nested past the parser's depth
                return None
            return reply if isinstance(reply, dict) else None
    return None


def run_program_remote(
    source: str,
    tests: ProgramTests,
    remote: SandboxFusion,
    *,
    test_timeout_s: float,
    total_timeout_s: float,
    tolerance: float,
) -> ProgramReport:
    """Run ``source`` against ``tests`` on SandboxFusion and report every test's outcome, judged
    here by the local harness's code (`harness.run_program`'s remote twin). `BackendFailed` when
    the backend cannot be used."""
    program = _RemoteProgram(source, remote, test_timeout_s, total_timeout_s)
    report = ProgramReport()
    try:
        if isinstance(tests, StdioTests):
            program.prefetch([stdin for stdin, _ in tests.cases])
            run_stdio_tests(program, tests, tolerance, report.outcomes)
        elif isinstance(tests, CallTests) and remote.program_language != "python":
            # The language's harness is in the source (`execute_remote`): each call is a run on
            # the arguments as JSON, as local runs do it.
            # `call_stdin`, as locally: UTF-8 text, not \u escapes the C++ harness cannot join.
            program.prefetch([call_stdin(arguments) for arguments, _ in tests.cases])
            run_harness_call_tests(program, tests, tolerance, report.outcomes)
        elif isinstance(tests, CallTests):
            run_call_tests(program, tests, tolerance, report.outcomes)
        else:
            report.outcomes = run_assert_tests(program, tests)
        if program.backend_failure is not None:
            raise program.backend_failure
    except (ProgramFailure, ProgramTimeout, BudgetSpent) as error:
        fail_untested(report, tests, program, error)
    return finished_report(report, program)


def execute_remote(
    text: str,
    extraction: Mapping[str, Any],
    tests: ProgramTests,
    remote: SandboxFusion,
    limits: tuple[float, float, float],
) -> tuple[str, ProgramReport | RemoteFailure | None]:
    """One sample's job in a pool worker (`reward.execute`'s remote twin): find the program in
    ``text`` and run it on SandboxFusion. Returns how the program was found and its report, a
    `RemoteFailure` when the sample cannot be scored, or None when there is no program."""
    found = job_program(text, extraction)
    if found.source is None:
        return found.method, None
    source, method = found.source, found.method
    runtime = LANGUAGES.get(remote.program_language)
    if runtime is None and remote.program_language != "python" and not isinstance(tests, StdioTests):
        reason = f"fields: only stdin/stdout tests can judge a {remote.program_language} program"
        return method, RemoteFailure(Status.INVALID_INPUT.value, reason)
    unsupported = unsupported_tests(runtime, tests)
    if unsupported is not None:
        return method, RemoteFailure(Status.INVALID_INPUT.value, f"fields: {unsupported}")
    if runtime is not None and isinstance(tests, CallTests):
        source = runtime.with_call_harness(source, tests.fn_name)
    test_timeout_s, total_timeout_s, tolerance = limits
    try:
        return method, run_program_remote(
            source,
            tests,
            remote,
            test_timeout_s=test_timeout_s,
            total_timeout_s=total_timeout_s,
            tolerance=tolerance,
        )
    except BackendFailed as failed:
        return method, RemoteFailure(failed.status.value, str(failed))


__all__ = [
    "BackendFailed",
    "RemoteFailure",
    "SandboxFusion",
    "SandboxFusionOptions",
    "call_code",
    "execute_remote",
    "remote_backend",
    "run_program_remote",
    "sandbox_fusion_language",
]
