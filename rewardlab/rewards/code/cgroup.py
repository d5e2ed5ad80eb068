"""A memory cgroup per sandbox: one memory limit over every process a program starts.

``RLIMIT_AS`` limits each process alone, so a program that forks six children gets six times
the limit. A memory cgroup charges the pages of all its processes together, and when they reach
the limit the kernel reclaims and then kills one of them ("out of memory" inside the cgroup only;
Documentation/admin-guide/cgroup-v2.rst, "memory.max"; cgroup-v1/memory.rst, "limit_in_bytes").

Which one: cgroup v2 where its memory controller may be given to a new cgroup, else the v1
``memory`` hierarchy. A v1 cgroup is made below this process's own. A v2 one is made below this
process's own only where that already hands the memory controller to its children (the root); a
cgroup that holds processes cannot (cgroup-v2.rst, "No Internal Process Constraint"), so
elsewhere it is made beside this process's own, in a parent that hands out memory.

The sandbox's first process joins the cgroup before it starts bwrap (`Sandbox.command`), so
every process of the sandbox starts in it (a child starts in its parent's cgroup), and bwrap's
cgroup namespace makes it the root of what a program sees in ``/proc/self/cgroup``. A worker
keeps its cgroup for one sandbox after another, emptied in between (`MemoryCgroup.empty`): the
first processes in a new memory cgroup start about 10 ms slower (measured on cgroup v1, Linux
6.18), which a sandbox per cgroup would pay every 64 programs.

A worker killed from outside leaves its cgroup behind, empty. Each cgroup's name holds its
maker's PID namespace and pid, and making a new cgroup deletes those whose maker is gone. (What
a program sees of the name: nothing; its cgroup namespace starts at the cgroup.)

Without either (not root and nothing delegated, or a container whose cgroup files are read-only)
`memory_cgroup` returns None: each process keeps its own ``RLIMIT_AS`` and nothing more, and the
scores say so (``"memory_limit": "per_process"`` in `Score.details`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class MemoryCgroup:
    """A cgroup with its memory limit set, for one sandbox at a time."""

    path: Path
    version: int

    @property
    def kind(self) -> str:
        """``"cgroup2"`` or ``"cgroup1"``, as `Score.details` names it."""
        return f"cgroup{self.version}"

    @property
    def procs(self) -> Path:
        """The file a process writes its pid into to join."""
        return self.path / "cgroup.procs"

    def empty(self) -> bool:
        """Kill whatever is still in the cgroup and wait (a few seconds at most) until it has
        left: killed processes leave as they exit. Whether the cgroup is empty now."""
        deadline = time.monotonic() + 5
        delay = 0.0002
        while True:
            try:
                pids = self.procs.read_text().split()
            except OSError:
                return False
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(delay)
            delay = min(2 * delay, 0.01)

    def remove(self) -> None:
        """Empty the cgroup and delete it; one that stays busy is left to `memory_cgroup`'s
        clean-up of stale cgroups."""
        if self.empty():
            with contextlib.suppress(OSError):
                self.path.rmdir()


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(filesystem type, root inside the hierarchy, mount point, super options) of each cgroup
    mount in ``/proc/self/mountinfo`` (see proc(5))."""
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        separator = fields.index("-")
        kind = fields[separator + 1]
        if kind in ("cgroup", "cgroup2") and len(fields) > separator + 3:
            mounts.append((kind, fields[3], fields[4], set(fields[separator + 3].split(","))))
    return mounts


def _below(mount_root: str, mount_point: str, path: str) -> Path | None:
    """Where cgroup ``path`` (as /proc/self/cgroup names it) is under this mount, if it is."""
    relative = os.path.relpath(path, mount_root)
    if relative.startswith(".."):
        return None
    return Path(mount_point) / relative


def parents(mountinfo: str, own_cgroups: str) -> list[tuple[int, Path]]:
    """Where sandbox cgroups may be made, best first: (version, parent directory). Reads only
    the two texts (``/proc/self/mountinfo``, ``/proc/self/cgroup``) and the cgroup files."""
    own: dict[str, str] = {}  # controller ("" for v2) -> this process's cgroup
    for line in own_cgroups.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    found: list[tuple[int, Path]] = []
    for kind, root, mount_point, options in _mounts(mountinfo):
        if kind == "cgroup2" and "" in own:
            directory = _below(root, mount_point, own[""])
            if directory is None:
                continue
            for candidate in (directory, directory.parent):
                with contextlib.suppress(OSError):
                    if Path(mount_point) in (candidate, *candidate.parents) and "memory" in (
                        (candidate / "cgroup.subtree_control").read_text().split()
                    ):
                        found.insert(0, (2, candidate))
                        break
        elif kind == "cgroup" and "memory" in options and "memory" in own:
            directory = _below(root, mount_point, own["memory"])
            if directory is not None and directory.is_dir():
                found.append((1, directory))
    return found


@functools.cache
def _parents() -> tuple[tuple[int, Path], ...]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own_cgroups = Path("/proc/self/cgroup").read_text()
    except OSError:
        return ()
    return tuple(parents(mountinfo, own_cgroups))


PREFIX = "rewardlab-"


def _maker() -> str:
    """This process as cgroup names hold it: its PID namespace and its pid there."""
    return f"{os.stat('/proc/self/ns/pid').st_ino}-{os.getpid()}"


def _remove_stale(parent: Path) -> None:
    namespace = _maker().split("-")[0]
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            fields = entry.name.removeprefix(PREFIX).split("-")
            if not entry.name.startswith(PREFIX) or len(fields) != 3 or fields[0] != namespace:
                continue
            try:
                os.kill(int(fields[1]), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)  # EBUSY while processes are in it
            except (OSError, ValueError):
                continue


def memory_cgroup(limit_bytes: int) -> MemoryCgroup | None:
    """A new cgroup limited to ``limit_bytes`` of memory (and no swap), or None where no memory
    cgroup can be made here."""
    for version, parent in _parents():
        _remove_stale(parent)
        path = parent / f"{PREFIX}{_maker()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except OSError:
            continue
        try:
            if version == 2:
                (path / "memory.max").write_text(str(limit_bytes))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if (path / "memory.memsw.limit_in_bytes").exists():  # memory + swap, v1's swap limit
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            path.rmdir()
            continue
        return MemoryCgroup(path, version)
    return None
