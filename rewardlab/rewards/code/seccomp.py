"""A seccomp filter for the sandbox's processes, against two things:

- Channels that keep state between programs: System V IPC (shared memory, semaphores, message
  queues), POSIX message queues and the kernel keyrings. All of them outlive the processes that
  create them; shared memory is also memory no resource limit counts. Filesystems are covered
  differently (the runner empties them).
- Reaching into another process: ``ptrace``, ``process_vm_readv`` / ``process_vm_writev`` and
  ``pidfd_getfd``. The runner's processes are non-dumpable, which already makes the kernel refuse
  these (and ``/proc/<pid>/mem``, which no syscall filter can tell apart by path) to programs of
  the same user; refusing the calls outright keeps one mistake from being enough. A program
  that traced bwrap's init made it write forged results to the trusted side (issue 18).

The filter is classic BPF, built here for x86-64 and AArch64 (other architectures run without it).
A process of another ABI (x32, i386 on x86-64) is killed, so a blocked call cannot be reached
under another number.
"""

from __future__ import annotations

import errno
import platform
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

# (audit architecture, blocked syscall numbers)
_ARCHITECTURES = {
    "x86_64": (
        0xC000003E,
        # shmget shmat shmctl semget semop semctl msgget msgsnd msgrcv msgctl semtimedop,
        # mq_open .. mq_getsetattr, add_key request_key keyctl;
        # ptrace process_vm_readv process_vm_writev pidfd_getfd
        (29, 30, 31, 64, 65, 66, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245, 248, 249, 250,
         101, 310, 311, 438),
    ),
    "aarch64": (
        0xC00000B7,
        # mq_open .. mq_getsetattr, msgget .. shmat, add_key request_key keyctl;
        # ptrace process_vm_readv process_vm_writev pidfd_getfd
        (180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 217, 218, 219,
         117, 270, 271, 438),
    ),
}  # fmt: skip


def _instruction(code: int, jump_true: int, jump_false: int, value: int) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, value)


def sandbox_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None where there is none."""
    machine = machine or platform.machine()
    if machine not in _ARCHITECTURES:
        return None
    architecture, blocked = _ARCHITECTURES[machine]
    checks = [(_JUMP_AT_LEAST, _X32_BIT, "kill")] if machine == "x86_64" else []
    checks += [(_JUMP_EQUAL, number, "fail") for number in blocked]
    # Layout: load arch; jump to kill unless it is ours; load the syscall number; the checks;
    # allow; fail; kill. A jump counts from the instruction after it.
    first_check = 3
    allow = first_check + len(checks)
    targets = {"fail": allow + 1, "kill": allow + 2}
    program = [
        _instruction(_LOAD_WORD, 0, 0, _ARCH_OFFSET),
        _instruction(_JUMP_EQUAL, 0, targets["kill"] - 2, architecture),
        _instruction(_LOAD_WORD, 0, 0, _NUMBER_OFFSET),
    ]
    for position, (code, value, target) in enumerate(checks, start=first_check):
        program.append(_instruction(code, targets[target] - position - 1, 0, value))
    program += [
        _instruction(_RETURN, 0, 0, _ALLOW),
        _instruction(_RETURN, 0, 0, _FAIL),
        _instruction(_RETURN, 0, 0, _KILL),
    ]
    return b"".join(program)
