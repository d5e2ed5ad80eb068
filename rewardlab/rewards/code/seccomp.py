"""A seccomp filter for the sandbox's processes, against three things:

- Channels that keep state between programs: System V IPC (shared memory, semaphores, message
  queues), POSIX message queues, the kernel keyrings, and sockets of every family but Unix. The
  first three outlive the processes that create them; shared memory is also memory no resource
  limit counts.
  The sandbox's network namespace outlives programs too: a TCP connection closed on loopback
  stays in TIME_WAIT for a minute, its ports listed in ``/proc/net/tcp`` for the next program
  to read (red-team round 9). Unix sockets leave nothing behind and stay allowed. Sockets are
  an allow-list, not a deny-list: ``socket`` and ``socketpair`` take ``AF_UNIX`` only. Denying
  IPv4 and IPv6 alone let a program open ``AF_VSOCK`` sockets, which no network namespace
  covers: the sandbox shared the host's vsock port space, a channel between concurrent
  sandboxes and a path to the hypervisor's side (CID 2) on a virtual machine (red-team round
  24). No toolchain here needs another family: g++, javac and java, node, go and rustc build
  and run programs with none (tests/rewards/code/test_hostile_round24.py, which also shows Java
  and node programs keep Unix sockets); only name resolution would open ``AF_NETLINK``
  (getaddrinfo's ``AI_ADDRCONFIG``), and the sandbox has no network and no ``/etc/hosts`` to
  resolve with. Filesystems are covered differently (the runner empties them). io_uring is
  refused whole: its requests (opcode 45 opens a socket) run without the syscalls this filter
  sees, and a program opened an IPv4 socket through it (red-team round 11). ``inotify_init``,
  ``inotify_init1`` and ``fanotify_init`` are refused too: the sandbox's ``/usr`` is the host's,
  whose inodes a watch follows whatever the mount namespace, so a program watching a compiler
  or a shared library saw every other sandbox and the host open and read it (red-team round
  24). No compiler or runtime here needs a watch to build or run a program.
- Reaching into another process: ``ptrace``, ``process_vm_readv`` / ``process_vm_writev``,
  ``pidfd_getfd`` and ``process_madvise``. The runner's processes are non-dumpable, which already
  makes the kernel refuse these (and ``/proc/<pid>/mem``, which no syscall filter can tell apart
  by path) to programs of the same user; refusing the calls outright keeps one mistake from being
  enough. A program that traced bwrap's init made it write forged results to the trusted side
  (issue 18).
- Changing another process's limits or scheduling: ``prlimit64``, ``setpriority``,
  ``sched_setscheduler`` / ``sched_setparam`` / ``sched_setattr`` / ``sched_setaffinity``,
  ``ioprio_set``, ``migrate_pages`` and ``move_pages`` need only the same user id, not ptrace
  access (prlimit(2), sched_setattr(2), setpriority(2), ioprio_set(2), migrate_pages(2)). A
  program gave the sandbox's first process - which forks every later program - a file-size
  limit of 0, nice 19, SCHED_IDLE and one CPU, and every later program inherited them (red-team
  round 9). These calls may name only the caller, as 0: pid 0, or "who" 0 with ``PRIO_PROCESS``
  / ``IOPRIO_WHO_PROCESS``. A program that names itself by its pid, or one of its threads, is
  refused too; reading another process's limits (``prlimit64`` with no new limit) is allowed.

The filter is classic BPF, built here for x86-64 and AArch64 (other architectures run without it;
the runner then still notices a changed limit or scheduling at its next reset, see
`python_runner`). A process of another ABI (x32, i386 on x86-64) is killed, so a blocked call
cannot be reached under another number. Arguments are compared by their low 32 bits only: the
kernel reads these ones as ``int`` (``pid_t``), whatever the upper half of the register holds.
"""

from __future__ import annotations

import errno
import platform
import socket
import struct

_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_FAIL = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS
_NUMBER_OFFSET, _ARCH_OFFSET = 0, 4  # in struct seccomp_data
_X32_BIT = 0x40000000
_PRIO_PROCESS = 0  # setpriority(2)
_IOPRIO_WHO_PROCESS = 1  # ioprio_set(2)

# (audit architecture, blocked syscall numbers, numbers of the syscalls in `_RULES`)
_ARCHITECTURES = {
    "x86_64": (
        0xC000003E,
        # shmget shmat shmctl semget semop semctl msgget msgsnd msgrcv msgctl semtimedop,
        # mq_open .. mq_getsetattr, add_key request_key keyctl;
        # ptrace process_vm_readv process_vm_writev pidfd_getfd process_madvise;
        # io_uring_setup io_uring_enter io_uring_register; inotify_init inotify_init1 fanotify_init
        (29, 30, 31, 64, 65, 66, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245, 248, 249, 250,
         101, 310, 311, 438, 440, 425, 426, 427, 253, 294, 300),
        {"prlimit64": 302, "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144,
         "sched_setaffinity": 203, "sched_setattr": 314, "ioprio_set": 251, "migrate_pages": 256,
         "move_pages": 279, "socket": 41, "socketpair": 53},
    ),
    "aarch64": (
        0xC00000B7,
        # mq_open .. mq_getsetattr, msgget .. shmat, add_key request_key keyctl;
        # ptrace process_vm_readv process_vm_writev pidfd_getfd process_madvise;
        # io_uring_setup io_uring_enter io_uring_register; inotify_init1 fanotify_init (AArch64
        # has no inotify_init)
        (180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 217, 218, 219,
         117, 270, 271, 438, 440, 425, 426, 427, 26, 262),
        {"prlimit64": 261, "setpriority": 140, "sched_setparam": 118, "sched_setscheduler": 119,
         "sched_setaffinity": 122, "sched_setattr": 274, "ioprio_set": 30, "migrate_pages": 238,
         "move_pages": 239, "socket": 198, "socketpair": 199},
    ),
}  # fmt: skip


def _argument(index: int, high: bool = False) -> int:
    """Offset of a 32-bit half of ``args[index]`` in struct seccomp_data (both architectures here
    are little-endian: the low half comes first)."""
    return 16 + 8 * index + (4 if high else 0)


# What a syscall's arguments must be: checks in order, each (offset, value, where to go when the
# word equals the value, where otherwise); "next" is the following check.
_SELF_ONLY = ((_argument(0), 0, "allow", "fail"),)
_RULES = {
    "prlimit64": (
        (_argument(0), 0, "allow", "next"),
        (_argument(2), 0, "next", "fail"),  # new_limit: NULL (both halves) only reads
        (_argument(2, high=True), 0, "allow", "fail"),
    ),
    "setpriority": ((_argument(0), _PRIO_PROCESS, "next", "fail"), (_argument(1), 0, "allow", "fail")),
    "ioprio_set": ((_argument(0), _IOPRIO_WHO_PROCESS, "next", "fail"), (_argument(1), 0, "allow", "fail")),
    "sched_setparam": _SELF_ONLY,
    "sched_setscheduler": _SELF_ONLY,
    "sched_setattr": _SELF_ONLY,
    "sched_setaffinity": _SELF_ONLY,
    "migrate_pages": _SELF_ONLY,
    "move_pages": _SELF_ONLY,
    # The family is an allow-list (see the module docstring): AF_UNIX or nothing.
    "socket": ((_argument(0), socket.AF_UNIX, "allow", "fail"),),
    "socketpair": ((_argument(0), socket.AF_UNIX, "allow", "fail"),),
}


def _instruction(code: int, jump_true: int, jump_false: int, value: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, value)


def sandbox_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None where there is none."""
    machine = machine or platform.machine()
    if machine not in _ARCHITECTURES:
        return None
    architecture, blocked, numbers = _ARCHITECTURES[machine]
    # Each entry: (code, value, target if true, target if false); a target is a label, or None
    # for the next instruction. Layout: the architecture check; the syscall number against each
    # blocked one and each one with a rule; allow; the rules; allow, fail, kill. Classic BPF
    # jumps only forward, by at most 255 instructions.
    program: list[tuple[int, int, str | None, str | None] | str] = [
        (_LOAD_WORD, _ARCH_OFFSET, None, None),
        (_JUMP_EQUAL, architecture, None, "kill"),
        (_LOAD_WORD, _NUMBER_OFFSET, None, None),
    ]
    if machine == "x86_64":
        program.append((_JUMP_AT_LEAST, _X32_BIT, "kill", None))
    program += [(_JUMP_EQUAL, number, "fail", None) for number in blocked]
    program += [(_JUMP_EQUAL, numbers[name], f"rule {name}", None) for name in _RULES]
    program.append((_RETURN, _ALLOW, None, None))
    for name, checks in _RULES.items():
        program.append(f"rule {name}")
        for offset, value, equal, other in checks:
            program.append((_LOAD_WORD, offset, None, None))
            program.append((_JUMP_EQUAL, value, _target(equal), _target(other)))
    program += ["allow", (_RETURN, _ALLOW, None, None), "fail", (_RETURN, _FAIL, None, None)]
    program += ["kill", (_RETURN, _KILL, None, None)]
    return _assemble(program)


def _target(name: str) -> str | None:
    """A rule's target as a label; "next" is the instruction after the jump (offset 0)."""
    return None if name == "next" else name


def _assemble(program: list[tuple[int, int, str | None, str | None] | str]) -> bytes:
    """Instructions with their labels (strings, placed before the instruction they name) turned
    into classic BPF, each jump counted from the instruction after it."""
    labels: dict[str, int] = {}
    instructions: list[tuple[int, int, str | None, str | None]] = []
    for entry in program:
        if isinstance(entry, str):
            labels[entry] = len(instructions)
        else:
            instructions.append(entry)

    def offset(target: str | None, position: int) -> int:
        if target is None:
            return 0
        distance = labels[target] - position - 1
        if not 0 <= distance <= 255:
            raise ValueError(f"a jump to {target!r} does not fit classic BPF")
        return distance

    return b"".join(
        _instruction(code, offset(true, position), offset(false, position), value)
        for position, (code, value, true, false) in enumerate(instructions)
    )
