"""Process isolation for untrusted programs: bubblewrap namespaces, an unprivileged user, rlimits.

Every sandboxed process is started as::

    setpriv --reuid=U --regid=U --clear-groups --no-new-privs --   (an unprivileged user)
      prlimit --nproc --as --cpu --fsize --nofile --                (resource limits)
        bwrap --unshare-all ... --                                  (namespaces, read-only system)
          /usr/bin/python3 -I -S /sandbox/python_runner.py

- Namespaces (bwrap): no network (a new, empty network namespace), its own PID namespace (when
  its first process dies, the kernel kills every process in it), a read-only view of ``/usr``
  only (no ``/etc``, no home, no project, no ``/proc`` of the host), a private ``/tmp`` tmpfs of
  bounded size, an empty environment.
- An unprivileged user: root ignores ``RLIMIT_NPROC``, so a fork bomb is only bounded when the
  real user id is not 0. When rewardlab runs as root each worker uses its own uid from
  `UID_RANGE` (no account is needed); otherwise the sandbox runs as the calling user.
- A wall-clock deadline is enforced by the caller, which kills the process group: that takes the
  PID namespace, and with it every process the program started, down with it.

``bwrap`` comes from Debian's ``bubblewrap`` package. Without it construction fails loudly; the
`unsafe_local` mode (no isolation, limits and deadlines only) exists for trusted code and must be
asked for by name.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

RUNNER_SOURCE = Path(__file__).with_name("python_runner.py")
SANDBOX_RUNNER = "/sandbox/python_runner.py"
UID_RANGE = (61000, 91000)
Isolation = Literal["bwrap", "unsafe_local"]


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run on this machine; the message says how to fix it."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits for one sandboxed run.

    Attributes:
        memory_bytes: Address-space limit (``RLIMIT_AS``) of each process. Default 1 GiB.
        cpu_seconds: CPU-time limit (``RLIMIT_CPU``) per process, a backstop behind the caller's
            wall-clock deadline. Default 60.
        processes: Processes the sandbox user may have (``RLIMIT_NPROC``); bounds fork bombs.
            Default 32.
        file_bytes: Largest file a program may write (``RLIMIT_FSIZE``). Default 16 MiB.
        open_files: Open file descriptors per process (``RLIMIT_NOFILE``). Default 64.
        tmp_bytes: Size of the private ``/tmp``. Default 64 MiB.
    """

    memory_bytes: int = 1 << 30
    cpu_seconds: int = 60
    processes: int = 32
    file_bytes: int = 16 << 20
    open_files: int = 64
    tmp_bytes: int = 64 << 20


def _python_for_sandbox() -> str:
    """An interpreter every user may run: the system one, or this process's if it is readable."""
    for candidate in ("/usr/bin/python3", os.path.realpath(shutil.which("python3") or "")):
        if candidate and os.access(candidate, os.X_OK) and candidate.startswith("/usr/"):
            return candidate
    raise SandboxUnavailable(
        "the sandbox runs programs with the system Python under /usr (e.g. /usr/bin/python3); "
        "install it with: apt-get install -y python3"
    )


@functools.cache
def runner_path() -> str:
    """A world-readable copy of the runner script.

    bwrap runs as the sandbox user, which must be able to read what it binds; the installed
    package may live where only its owner can read (a virtual environment under /root).
    """
    directory = tempfile.mkdtemp(prefix="rewardlab-runner-")
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "python_runner.py")
    shutil.copyfile(RUNNER_SOURCE, path)
    os.chmod(path, 0o644)
    return path


def _sandbox_uid() -> int | None:
    """The unprivileged uid this worker's sandboxes run as; None when we are not root."""
    if os.geteuid() != 0:
        return None
    low, high = UID_RANGE
    # One uid per worker process, so that one program's fork bomb cannot use up another's quota.
    return low + os.getpid() % (high - low)


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How to start sandboxed Python runners.

    Args:
        isolation: ``"bwrap"`` (default) or ``"unsafe_local"``: no namespaces and no user
            switch, for trusted code only; limits and deadlines still apply.
        limits: Resource limits of each run.
    """

    isolation: Isolation = "bwrap"
    limits: SandboxLimits = SandboxLimits()

    def check(self) -> None:
        """Fail with instructions when this machine cannot provide the requested isolation."""
        if self.isolation not in ("bwrap", "unsafe_local"):
            raise ValueError(f"isolation must be 'bwrap' or 'unsafe_local', got {self.isolation!r}")
        missing = [tool for tool in ("prlimit", "setpriv") if shutil.which(tool) is None]
        if missing:
            raise SandboxUnavailable(f"{', '.join(missing)} not found; install util-linux")
        _python_for_sandbox()
        if self.isolation == "unsafe_local":
            return
        if shutil.which("bwrap") is None:
            raise SandboxUnavailable(
                "bwrap (bubblewrap) is not installed, and untrusted code is never run without a "
                "sandbox. Install it with: apt-get install -y bubblewrap (Debian/Ubuntu) or "
                "dnf install bubblewrap. To run trusted code without isolation, pass "
                "isolation='unsafe_local'."
            )
        probe = subprocess.run(self.command(["/usr/bin/true"]), capture_output=True, timeout=30, check=False)
        if probe.returncode != 0:
            raise SandboxUnavailable(
                "bwrap is installed but cannot create a sandbox here ("
                + probe.stderr.decode(errors="replace").strip()
                + "); unprivileged user namespaces may be disabled "
                "(sysctl kernel.unprivileged_userns_clone=1)"
            )

    def command(self, program: list[str]) -> list[str]:
        """The full command line that runs ``program`` (a path inside the sandbox) isolated."""
        limits = self.limits
        nproc = limits.processes
        uid = _sandbox_uid() if self.isolation == "bwrap" else None
        prefix: list[str] = []
        if uid is not None:
            prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]
        else:
            # RLIMIT_NPROC counts all of the user's processes: leave room for the ones running.
            nproc += _process_count(os.getuid())
        prefix += [
            "prlimit",
            f"--nproc={nproc}",
            f"--as={limits.memory_bytes}",
            f"--cpu={limits.cpu_seconds}",
            f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}",
            "--",
        ]
        if self.isolation == "unsafe_local":
            return [*prefix, *program]
        return [
            *prefix,
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "PATH", "/usr/bin",
            "--setenv", "LANG", "C.UTF-8",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            "--ro-bind", runner_path(), SANDBOX_RUNNER,
            "--remount-ro", "/",
            "--chdir", "/tmp",
            "--",
            *program,
        ]  # fmt: skip

    def runner_command(self) -> list[str]:
        """The command that starts a Python runner (see `python_runner`)."""
        if self.isolation == "bwrap":
            return self.command([_python_for_sandbox(), "-I", "-S", SANDBOX_RUNNER, "--sandboxed"])
        return self.command([_python_for_sandbox(), "-I", "-S", runner_path()])


def _process_count(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count
