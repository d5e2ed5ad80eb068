"""Process isolation for untrusted programs: bubblewrap namespaces, an unprivileged user, rlimits.

Every sandboxed process is started as::

    setpriv --reuid=U --regid=U --clear-groups --no-new-privs --   (an unprivileged user)
      prlimit --nproc --as --cpu --fsize --nofile --core=0 --       (resource limits)
        bwrap --unshare-all --as-pid-1 ... --                       (namespaces, read-only system)
          /usr/bin/python3 -I -S /sandbox/python_runner.py   (which runs compilers and
                                                              programs in other languages too)

- Namespaces (bwrap): no network (a new, empty network namespace), its own PID namespace (when
  its first process dies, the kernel kills every process in it), a read-only view of ``/usr``
  only (no ``/etc``, no home, no project, no ``/proc`` of the host; a language whose toolchain
  keeps its configuration elsewhere names that directory, read-only, in `Sandbox.read_only`:
  Java's ``/etc/java-17-openjdk``, see `languages`), a read-only ``/dev`` with a
  small ``/dev/shm``, a private ``/tmp`` tmpfs of bounded size, an empty environment, and a
  seccomp filter (see `seccomp`).
- Our runner is the namespace's first process (``--as-pid-1``): bwrap's own init would run as the
  program's user, dumpable, holding the pipes to the trusted side, and outlive every program -
  a process a program could trace and make write for it (issue 18). The runner is copied into
  the sandbox from a file descriptor (``--ro-bind-data``), so the mount table shows no host path.
- Capabilities: the runner's two processes start with ``CAP_SYS_ADMIN``, ``CAP_SYS_RESOURCE``
  and ``CAP_SETPCAP`` in the sandbox's own user namespace (``--cap-add``, which bwrap grants
  there without privileges of its own). They use them once - to allow no further user
  namespace, hide themselves in ``/proc`` and make ``/proc/sys`` read-only - and drop them all
  before any program runs (see `python_runner`). For their mounts to count, the sandbox's user
  is uid 0 of that namespace (``--uid 0``; still the unprivileged uid below on the host): for
  any other uid, bwrap nests a second user namespace that owns nothing, and so does
  ``--disable-userns``, whose limit the runner now sets itself.
- An unprivileged user: root ignores ``RLIMIT_NPROC``, so a fork bomb is only bounded when the
  real user id is not 0. When rewardlab runs as root each worker uses its own uid, drawn at
  random from `UID_RANGE` and held while the worker lives (`claim_uid`; no account is needed);
  otherwise the sandboxes run as the calling user and share its process limit (a fork bomb in
  one can then keep another from starting processes).
- Memory: ``RLIMIT_AS`` per process, and a memory cgroup over the whole sandbox where one can be
  made (see `cgroup`).
- A wall-clock deadline is enforced by the caller, which kills the process group: that takes the
  PID namespace, and with it every process the program started, down with it.

``bwrap`` comes from Debian's ``bubblewrap`` package (options as its man page, bwrap(1), gives
them). Without it construction fails loudly; the `unsafe_local` mode (no isolation, limits and
deadlines only) exists for trusted code and must be asked for by name.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rewardlab.errors import SandboxUnavailable
from rewardlab.rewards.code.cgroup import MemoryCgroup

RUNNER_SOURCE = Path(__file__).with_name("python_runner.py")
SANDBOX_RUNNER = "/sandbox/python_runner.py"
#: Sandbox users when rewardlab runs as root, one per worker (see `claim_uid`). No account is
#: needed for them.
UID_RANGE = (1_000_000, 1_000_000 + (1 << 22))
SHM_BYTES = 1 << 20
Isolation = Literal["bwrap", "unsafe_local"]


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits for one sandboxed run.

    Attributes:
        memory_bytes: Address-space limit (``RLIMIT_AS``) of each process, and the memory limit
            of the whole sandbox where a memory cgroup can be made (see `cgroup`). Default 1 GiB.
        cpu_seconds: CPU-time limit (``RLIMIT_CPU``) per process, a backstop behind the caller's
            wall-clock deadline. Default 60.
        processes: Processes the sandbox user may have (``RLIMIT_NPROC``); bounds fork bombs.
            Default 32.
        file_bytes: Largest file a program may write (``RLIMIT_FSIZE``); also the largest
            stdin a test can have. Default 64 MiB (the whole of ``/tmp``).
        open_files: Open file descriptors per process (``RLIMIT_NOFILE``). Default 64.
        tmp_bytes: Size of the private ``/tmp``. Default 64 MiB.
    """

    memory_bytes: int = 1 << 30
    cpu_seconds: int = 60
    processes: int = 32
    file_bytes: int = 64 << 20
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


def claim_uid(candidates: Iterable[int]) -> tuple[int, socket.socket] | None:
    """The first of ``candidates`` that no live process holds, and what holds it for this one: a
    socket bound to a name for it in the abstract namespace (unix(7)). The kernel frees the name
    when the socket's last holder exits, crashed or not, so no stale claim outlives a worker.
    None when every candidate is held."""
    for uid in candidates:
        holder = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            holder.bind(f"\0rewardlab-sandbox-uid-{uid}")
        except OSError:
            holder.close()
            continue
        return uid, holder
    return None


# The uid each process (by pid: a forked child claims its own) holds, and what holds it.
_claims: dict[int, tuple[int, socket.socket]] = {}


def _sandbox_uid() -> int | None:
    """The unprivileged uid this worker's sandboxes run as; None when we are not root.

    Drawn at random and claimed (`claim_uid`), so that two live workers of this host never share
    one (nor its process limit) and it tells a program nothing: it was the first uid plus the
    worker's pid, which gave a program the pid of its worker on the host (red-team round 9).
    """
    if os.geteuid() != 0:
        return None
    pid = os.getpid()
    low, high = UID_RANGE
    while pid not in _claims:
        claim = claim_uid([low + secrets.randbelow(high - low)])
        if claim is not None:
            _claims[pid] = claim
    return _claims[pid][0]


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How to start sandboxed Python runners.

    Args:
        isolation: ``"bwrap"`` (default) or ``"unsafe_local"``: no namespaces and no user
            switch, for trusted code only; limits and deadlines still apply.
        limits: Resource limits of each run.
        read_only: Host directories outside ``/usr`` shown read-only at the same path, for a
            toolchain that keeps its configuration there (the JDK's ``/etc/java-17-openjdk``,
            see `languages`). Empty for Python.
    """

    isolation: Isolation = "bwrap"
    limits: SandboxLimits = SandboxLimits()
    read_only: tuple[str, ...] = ()

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

    def command(
        self,
        program: list[str],
        seccomp_fd: int | None = None,
        runner_fd: int | None = None,
        cgroup: MemoryCgroup | None = None,
    ) -> list[str]:
        """The full command line that runs ``program`` (a path inside the sandbox) isolated, as the
        first process of its PID namespace, which must reap the others; ``seccomp_fd`` is an open
        file holding `seccomp.sandbox_filter`, ``runner_fd`` one holding the runner's source,
        both passed to bwrap. With ``cgroup``, the first process joins it (by a shell, still
        with our privileges) before anything else starts."""
        limits = self.limits
        nproc = limits.processes
        uid = _sandbox_uid() if self.isolation == "bwrap" else None
        prefix: list[str] = []
        if cgroup is not None:
            prefix = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup.procs)]
        if uid is not None:
            prefix += [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--no-new-privs",
                "--",
            ]
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
            # Hard 0, not just the soft 0 a worker passes on: a program could raise a soft limit
            # to the hard one and dump core, and where ``core_pattern`` is a pipe the kernel runs
            # that helper as root on the host for each crash (red-team round 24).
            "--core=0",
            "--",
        ]
        if self.isolation == "unsafe_local":
            return [*prefix, *program]
        return [
            *prefix,
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--uid", "0",
            "--gid", "0",
            "--as-pid-1",
            "--cap-add", "CAP_SYS_ADMIN",
            "--cap-add", "CAP_SYS_RESOURCE",
            "--cap-add", "CAP_SETPCAP",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "PATH", "/usr/bin",
            "--setenv", "LANG", "C.UTF-8",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64",
            *[argument for path in self.read_only for argument in ("--ro-bind", path, path)],
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",
            "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
            *(["--ro-bind-data", str(runner_fd), SANDBOX_RUNNER] if runner_fd is not None else []),
            *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
            "--remount-ro", "/",
            "--chdir", "/tmp",
            "--",
            *program,
        ]  # fmt: skip

    def runner_command(
        self, seccomp_fd: int | None = None, runner_fd: int | None = None, cgroup: MemoryCgroup | None = None
    ) -> list[str]:
        """The command that starts a Python runner (see `python_runner`); with bwrap, the runner
        is read from ``runner_fd``. Without isolation the runner runs as the calling user, who
        can read the installed file."""
        if self.isolation == "bwrap":
            runner = [_python_for_sandbox(), "-I", "-S", SANDBOX_RUNNER, "--sandboxed"]
            return self.command(runner, seccomp_fd, runner_fd, cgroup)
        return self.command([_python_for_sandbox(), "-I", "-S", str(RUNNER_SOURCE)], cgroup=cgroup)


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
