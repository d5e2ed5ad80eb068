"""One live program runner in a sandbox, spoken to with deadlines.

The caller holds the only copy of the tests; the session only carries requests in and program
outputs back. Any deadline missed, crash, or garbled reply ends the session: its process group
(and with it the sandbox's PID namespace) is killed, and the caller starts a fresh one.

Each request carries a random id that its reply must repeat, and nothing may arrive between
replies: a line that something other than the runner wrote into the pipe - a program that got
hold of it could answer for the programs after it (issue 18) - ends the session instead of
being read as a result.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import marshal
import os
import select
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from rewardlab.rewards.code.cgroup import MemoryCgroup
from rewardlab.rewards.code.sandbox import RUNNER_SOURCE, Sandbox
from rewardlab.rewards.code.seccomp import sandbox_filter

MAX_RESPONSE_BYTES = 12 << 20
SANDBOX_ENVIRONMENT = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    Killing a sandbox orphans bwrap's PID-1 process; left to the machine's init it may linger as
    a zombie, and zombies count against the sandbox user's ``RLIMIT_NPROC``, so a busy worker
    would soon be unable to start sandboxes. Call this in a process that only runs sandboxes
    (a pool worker) and `reap_orphans` after each job.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_orphans() -> None:
    """Collect every child of this process that has exited (never waits for a running one)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _memory_file(name: str, content: bytes) -> int:
    """An open descriptor holding ``content``, for bwrap to read."""
    fd = os.memfd_create(name, 0)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return []


class SessionEnded(RuntimeError):
    """The runner is gone: it timed out, crashed, exited, or sent something unreadable."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class SandboxSession:
    """A runner process (see `python_runner`) inside the sandbox; it serves many programs.

    Args:
        sandbox: How to start the runner.
        cgroup: The memory cgroup that every process of the sandbox joins (see `cgroup`); it is
            emptied when the session closes. None: each process has only its own ``RLIMIT_AS``.
    """

    def __init__(self, sandbox: Sandbox, cgroup: MemoryCgroup | None = None):
        self.workdir = (
            tempfile.mkdtemp(prefix="rewardlab-run-") if sandbox.isolation == "unsafe_local" else None
        )
        self.diagnostics = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the session
        seccomp = runner = None
        if sandbox.isolation == "bwrap":
            runner = _memory_file("rewardlab-runner", RUNNER_SOURCE.read_bytes())
            program = sandbox_filter()
            seccomp = None if program is None else _memory_file("rewardlab-seccomp", program)
        passed = [fd for fd in (seccomp, runner) if fd is not None]
        self.cgroup = cgroup
        #: What limits the memory of a program: "cgroup2" or "cgroup1" (all its processes
        #: together), or "per_process" (RLIMIT_AS alone, where no cgroup could be made).
        self.memory_limit = cgroup.kind if cgroup is not None else "per_process"
        try:
            self.process = subprocess.Popen(
                sandbox.runner_command(seccomp, runner, self.cgroup),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.diagnostics,
                start_new_session=True,
                cwd=self.workdir,
                pass_fds=passed,
                # Not even bwrap gets our environment: its own /proc/<pid>/environ is readable
                # from inside the sandbox, and the environment is where API keys live.
                env=SANDBOX_ENVIRONMENT,
            )
        finally:
            for fd in passed:
                os.close(fd)
        requests, replies = self.process.stdin, self.process.stdout
        assert requests is not None and replies is not None  # both asked for as pipes above
        #: The runner's stdin, where requests go, and its stdout, where replies come from.
        self.requests, self.replies = requests, replies
        os.set_blocking(self.requests.fileno(), False)
        self.pending = b""
        self.closed = False
        #: Programs started in this sandbox (it is replaced after a number of them).
        self.programs = 0

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request and wait at most ``timeout_s`` for its reply."""
        if self.closed:
            raise SessionEnded("the session is closed")
        deadline = time.monotonic() + timeout_s
        nonce = os.urandom(8).hex()
        body = marshal.dumps({**message, "id": nonce})
        self._write(len(body).to_bytes(4, "big") + body, deadline)
        tag, _, line = self._read_line(deadline).partition(b" ")
        if tag != nonce.encode() or self.pending:
            self._end()
            raise SessionEnded("the sandbox sent a reply that the runner did not write")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            self._end()
            raise SessionEnded("the runner sent an unreadable reply") from None
        if not isinstance(reply, dict):
            self._end()
            raise SessionEnded("the runner sent an unreadable reply")
        return reply

    def clean(self) -> bool:
        """Whether nothing is waiting in the pipe from the runner, as between any two replies."""
        return not self.pending and not select.select([self.replies], [], [], 0)[0]

    def _write(self, data: bytes, deadline: float) -> None:
        """Write without blocking past the deadline (a stopped runner stops reading)."""
        fd = self.requests.fileno()
        view = memoryview(data)
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_WRITE)
            while view:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self._end()
                    raise SessionEnded("the program ran past its time limit", timed_out=True)
                try:
                    written = os.write(fd, view)
                except BlockingIOError:
                    continue
                except OSError:
                    self._end()
                    raise SessionEnded(self._death_reason()) from None
                view = view[written:]

    def _read_line(self, deadline: float) -> bytes:
        with selectors.DefaultSelector() as selector:
            selector.register(self.replies, selectors.EVENT_READ)
            while b"\n" not in self.pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self._end()
                    raise SessionEnded("the program ran past its time limit", timed_out=True)
                chunk = os.read(self.replies.fileno(), 1 << 16)
                if not chunk:
                    self._end()
                    raise SessionEnded(self._death_reason())
                self.pending += chunk
                if len(self.pending) > MAX_RESPONSE_BYTES:
                    self._end()
                    raise SessionEnded("the program's reply exceeded the size limit")
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def _death_reason(self) -> str:
        try:
            code = self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        self.diagnostics.seek(0)
        detail = self.diagnostics.read()[-500:].decode(errors="replace").strip()
        reason = f"the sandbox exited (code {code})"
        if code is not None and code < 0:
            reason = f"the sandbox was killed by signal {-code}"
        return f"{reason}: {detail}" if detail else reason

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        # bwrap's PID-1 process runs in a session of its own; kill it with the outer group, so
        # that the sandbox's PID namespace, and every process in it, goes at once.
        for group in [self.process.pid, *_children(self.process.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Kill the runner and everything it started; idempotent."""
        self._end()
        for stream in (self.requests, self.replies):
            stream.close()
        self.diagnostics.close()
        if self.cgroup is not None:
            self.cgroup.empty()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
