"""`CodeExecutionReward`: the fraction of tests a completion's program passes, run in a sandbox.

Each sample becomes one job in a pool of trusted worker processes. A job starts a sandboxed
runner (see `sandbox`), loads the program once, and runs every test of that program through it
(stdin/stdout tests in a forked child each, call and assert tests as calls into the loaded
program), so a program with many tests pays for one sandbox and one interpreter start.

Programs in C++, Java, JavaScript, Go and Rust (``language``, see `languages`) go through the
same sandbox and runner: compiled there once, then run per test as an executable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import InvalidInput
from rewardlab.rewards.answer_region import AnswerRegion
from rewardlab.rewards.code.cases import ProgramTests, read_tests
from rewardlab.rewards.code.extract import BlockChoice, job_program
from rewardlab.rewards.code.harness import STARTUP_ALLOWANCE_S, ProgramReport, run_program, unsupported_tests
from rewardlab.rewards.code.languages import LANGUAGES, Language
from rewardlab.rewards.code.sandbox import Isolation, Sandbox, SandboxLimits
from rewardlab.rewards.code.sandbox_fusion import (
    RemoteFailure,
    SandboxFusionOptions,
    execute_remote,
    remote_backend,
)
from rewardlab.rewards.code.session import adopt_orphans, reap_orphans
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import AnswerRegionOption, RewardOptions, takes_options
from rewardlab.rewards.process_pool import (
    KillableProcessPool,
    LazyPool,
    TaskFailed,
    TaskTimeout,
    WorkerCrashed,
)

WORKER_MEMORY_BYTES = 4 << 30
ProgramLanguage = Literal["python", "cpp", "java", "javascript", "go", "rust"]
MAX_DETAILED_TESTS = 50


@dataclass(frozen=True, slots=True)
class LocalRunner:
    """Where a sample's program runs here: the sandbox, and for a language other than Python how
    it is built and run (see `languages`) and the time its compiler may take."""

    sandbox: Sandbox
    language: Language | None = None
    compile_timeout_s: float = 10.0


def execute(
    text: str,
    extraction: Mapping[str, Any],
    tests: ProgramTests,
    runner: LocalRunner,
    limits: tuple[float, float, float],
) -> tuple[str, ProgramReport | None]:
    """One sample's job, run in a pool worker (a process that does nothing else): find the
    program in ``text`` (here, under the job's budget, since finding it reads model text) and
    run it. Returns how the program was found and its report, or None when there is none.

    ``extraction`` holds `extract_program`'s options, or ``{"whole": True}`` for a text that is
    the program; ``limits`` is (test timeout, total timeout, float tolerance).
    """
    found = job_program(text, extraction)
    if found.source is None:
        return found.method, None
    source, method = found.source, found.method
    test_timeout_s, total_timeout_s, tolerance = limits
    adopt_orphans()
    try:
        return method, run_program(
            source,
            tests,
            runner.sandbox,
            test_timeout_s=test_timeout_s,
            total_timeout_s=total_timeout_s,
            tolerance=tolerance,
            language=runner.language,
            compile_timeout_s=runner.compile_timeout_s,
        )
    finally:
        reap_orphans()


_LIMITS = SandboxLimits()


class SandboxLimitsOptions(BaseModel):
    """Resource limits of one sandboxed run (`SandboxLimits`); limits not given keep the
    language's own (`languages.Language.limits`: the defaults below, but more memory and
    processes for Java and more processes for Go)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    memory_bytes: int = Field(default=_LIMITS.memory_bytes, ge=1)
    """Address-space limit (``RLIMIT_AS``) of each process, and the memory limit of the whole
    sandbox where a memory cgroup can be made."""
    cpu_seconds: int = Field(default=_LIMITS.cpu_seconds, ge=1)
    """CPU-time limit (``RLIMIT_CPU``) per process, a backstop behind the wall-clock limits."""
    processes: int = Field(default=_LIMITS.processes, ge=1)
    """Processes the sandbox user may have (``RLIMIT_NPROC``); bounds fork bombs."""
    file_bytes: int = Field(default=_LIMITS.file_bytes, ge=1)
    """Largest file a program may write (``RLIMIT_FSIZE``); also the largest stdin a test can
    have."""
    open_files: int = Field(default=_LIMITS.open_files, ge=1)
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    tmp_bytes: int = Field(default=_LIMITS.tmp_bytes, ge=1)
    """Size of the private ``/tmp``."""


class CodeExecutionOptions(RewardOptions):
    """Options of `CodeExecutionReward`."""

    language: ProgramLanguage = "python"
    """The program's language: ``python``, ``cpp`` (g++, C++17), ``java``, ``javascript``
    (node), ``go`` or ``rust`` (see `rewardlab.rewards.code.languages`)."""
    compile_timeout_s: float = Field(default=10.0, gt=0)
    """Wall-clock limit of compiling a program (not Python), within ``total_timeout_s``. A
    program past it fails every test as a compile error."""
    block: BlockChoice = "last"
    """Which fenced block is the program when there are several: ``last``, ``first``,
    ``longest``, or ``all`` joined in order."""
    block_name: str | None = None
    """Prefer the block whose info string names this file."""
    allow_unfenced: bool = False
    """With no fenced block, run the whole answer region."""
    completion_continues_prompt: bool = False
    """The completion continues code in the prompt (HumanEval with a base model): the program is
    prompt + completion, unfenced."""
    aggregate: Literal["fraction", "all_or_nothing"] = "fraction"
    """``fraction`` of tests passed, or ``all_or_nothing`` (1.0 only if every test passes)."""
    test_timeout_s: float = Field(default=3.0, gt=0)
    """Wall-clock limit of one test. A test that exceeds it fails as ``timeout``: a slow program
    is a wrong program, not a missing score."""
    total_timeout_s: float = Field(default=30.0, gt=0)
    """Wall-clock limit of one program over all its tests."""
    float_tolerance: float = Field(default=1e-6, ge=0)
    """Relative and absolute tolerance for numbers in outputs."""
    isolation: Isolation = "bwrap"
    """``bwrap`` (a bubblewrap sandbox), or ``unsafe_local`` (no isolation; trusted code only)."""
    limits: SandboxLimitsOptions | SkipJsonSchema[InstanceOf[SandboxLimits]] | None = None
    """Resource limits of a run; those not given keep the language's own."""
    workers: int | None = Field(default=None, ge=1)
    """Programs run at once (default: the number of CPUs)."""
    answer_region: AnswerRegionOption = None
    """Where the program is looked for: ``default`` (outside reasoning blocks, so code drafted
    while thinking never runs), ``whole``, or a mapping of markers (see
    `rewardlab.rewards.answer_region`)."""
    backend: Literal["local", "sandbox_fusion"] = "local"
    """Where programs run: ``local`` (the sandbox here) or ``sandbox_fusion`` (a SandboxFusion
    server's ``/run_code``, for users who run one; tests are still judged here, see
    `rewardlab.rewards.code.sandbox_fusion`)."""
    sandbox_fusion: SandboxFusionOptions | None = None
    """The SandboxFusion server (``url``) and how to talk to it, for ``backend: sandbox_fusion``."""


@takes_options(CodeExecutionOptions)
class CodeExecutionReward(Reward):
    """Run the completion's program against the sample's tests in a sandbox.

    Scoring waits on worker processes (``io_bound``), so through the TRL adapter it runs as an
    async reward function, beside the trainer's other async rewards.

    Options: `CodeExecutionOptions` (which block is the program, how tests fold, time and
    resource limits, the sandbox).

    Tests come from the sample's fields; see `cases` for the formats (HumanEval, MBPP, APPS /
    TACO / CodeContests, plain input/output lists). ``Score.details`` lists each test's outcome,
    runtime and the reason for each failure, and ``memory_limit``: ``"cgroup2"`` or
    ``"cgroup1"`` where the program's processes shared one memory limit, ``"per_process"``
    where no memory cgroup could be made (see `cgroup`); a program that does not compile or
    crashes on import fails every test and says why in ``reason``.
    """

    name = "code_execution"
    io_bound = True

    def __init__(
        self,
        *,
        language: ProgramLanguage = "python",
        compile_timeout_s: float = 10.0,
        block: BlockChoice = "last",
        block_name: str | None = None,
        allow_unfenced: bool = False,
        completion_continues_prompt: bool = False,
        aggregate: Literal["fraction", "all_or_nothing"] = "fraction",
        test_timeout_s: float = 3.0,
        total_timeout_s: float = 30.0,
        float_tolerance: float = 1e-6,
        isolation: Isolation = "bwrap",
        limits: SandboxLimits | SandboxLimitsOptions | Mapping[str, int] | None = None,
        workers: int | None = None,
        answer_region: Any = None,
        backend: Literal["local", "sandbox_fusion"] = "local",
        sandbox_fusion: SandboxFusionOptions | Mapping[str, Any] | None = None,
        name: str | None = None,
    ):
        if language != "python" and language not in LANGUAGES:
            raise ValueError(f"language must be python or one of {sorted(LANGUAGES)}, got {language!r}")
        #: None for Python; else how programs are compiled and run (see `languages`).
        self.runtime = LANGUAGES.get(language)
        default_limits = self.runtime.limits if self.runtime is not None else SandboxLimits()
        read_only = self.runtime.read_only if self.runtime is not None else ()
        # The limits given replace only themselves: the others keep the language's own (Java's
        # 3 GiB and 64 processes, Go's 64), not the generic defaults. Taking the options whole
        # turned ``limits: {cpu_seconds: 30}`` into a JVM that could not start, and every Java
        # program into a 0 (red-team round 24). A whole `SandboxLimits` is taken as it is.
        if isinstance(limits, SandboxLimitsOptions):
            limits = dataclasses.replace(default_limits, **limits.model_dump(exclude_unset=True))
        elif isinstance(limits, Mapping):
            limits = dataclasses.replace(default_limits, **limits)
        self.sandbox = Sandbox(isolation=isolation, limits=limits or default_limits, read_only=read_only)
        #: The SandboxFusion server programs run on, or None to run them here.
        self.remote = remote_backend(
            backend, sandbox_fusion, language, self.sandbox.limits.memory_bytes, compile_timeout_s
        )
        if self.remote is None:
            if self.runtime is not None:
                self.runtime.check()  # first: the sandbox's own check binds what it needs
            self.sandbox.check()
        self.language = language
        self.compile_timeout_s = compile_timeout_s
        self.block = block
        self.block_name = block_name
        self.allow_unfenced = allow_unfenced
        self.completion_continues_prompt = completion_continues_prompt
        self.aggregate = aggregate
        self.test_timeout_s = test_timeout_s
        self.total_timeout_s = total_timeout_s
        self.float_tolerance = float_tolerance
        self.workers = workers or os.cpu_count() or 1
        self.answer_region = AnswerRegion.from_option(answer_region)
        if name is not None:
            self.name = name
        # The trusted workers decode what programs return; a memory limit keeps a huge return
        # value from taking the host's memory with it.
        self._pool = LazyPool(
            functools.partial(
                KillableProcessPool,
                self.workers,
                preload=["rewardlab.rewards.code.harness"],
                memory_limit_bytes=WORKER_MEMORY_BYTES,
            )
        )

    @property
    def pool(self) -> KillableProcessPool:
        return self._pool.get()

    def close(self) -> None:
        self._pool.close()

    def _text_and_extraction(self, sample: Sample) -> tuple[str | None, dict[str, Any], str | None]:
        """The text the program is in, how to find it there, and why there is none (if so)."""
        if self.completion_continues_prompt:
            # The completion is code that continues the prompt's: no region to read.
            return sample.prompt_text + sample.completion_text, {"whole": True}, None
        region = self.answer_region.read(sample.completion_text)
        extraction = {
            "language": self.language,
            "block": self.block,
            "block_name": self.block_name,
            "allow_unfenced": self.allow_unfenced,
        }
        return region.text, extraction, region.reason

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return list(await asyncio.gather(*(self._score_one(sample, i) for i, sample in enumerate(samples))))

    async def _score_one(self, sample: Sample, index: int) -> Score:
        try:
            tests = read_tests(sample.fields, sample.prompt)
            text, extraction, no_answer = self._text_and_extraction(sample)
        except InvalidInput as error:
            return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
        unsupported = unsupported_tests(self.runtime, tests)
        if unsupported is not None:
            return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: fields: {unsupported}")
        details: dict[str, Any] = {"tests_total": tests.count}
        if text is None:
            return Score(value=0.0, reason=no_answer, details={**details, "extraction": "none"})
        budget = self.total_timeout_s + STARTUP_ALLOWANCE_S * 2
        limits = (self.test_timeout_s, self.total_timeout_s, self.float_tolerance)
        try:
            if self.remote is not None:
                method, report = await self.pool.run(
                    execute_remote, text, extraction, tests, self.remote, limits, budget_s=budget
                )
            else:
                runner = LocalRunner(self.sandbox, self.runtime, self.compile_timeout_s)
                method, report = await self.pool.run(
                    execute, text, extraction, tests, runner, limits, budget_s=budget
                )
        except TaskTimeout as error:
            return Score.failure(Status.TIMEOUT, f"the execution harness {error}", details=details)
        except (TaskFailed, WorkerCrashed) as error:
            return Score.failure(Status.ERROR, f"the execution harness failed: {error}", details=details)
        details["extraction"] = method
        if report is None:
            return Score(value=0.0, reason="no program found in the completion", details=details)
        if isinstance(report, RemoteFailure):
            return Score.failure(report.status, f"{sample.label(index)}: {report.reason}", details=details)
        return self._score(report, tests.count, details)

    def _score(self, report: ProgramReport, total: int, details: dict[str, Any]) -> Score:
        passed = report.passed
        fraction = passed / total
        value = fraction if self.aggregate == "fraction" else float(passed == total)
        failures = [o for o in report.outcomes if o.outcome != "passed"]
        reason = None
        if report.load_error:
            reason = report.load_error
        elif failures:
            first = failures[0]
            reason = f"{passed}/{total} tests passed; test {first.index} {first.outcome}: {first.reason}"
        details.update(
            tests_passed=passed,
            tests=[o.to_dict() for o in report.outcomes[:MAX_DETAILED_TESTS]],
            output_tail=report.output_tail,
        )
        if report.memory_limit is not None:
            details["memory_limit"] = report.memory_limit
        if report.load_error:
            details["load_error"] = report.load_error
        return Score(
            value=value,
            breakdown={"pass_fraction": fraction, "all_passed": float(passed == total)},
            reason=reason,
            details=details,
        )
