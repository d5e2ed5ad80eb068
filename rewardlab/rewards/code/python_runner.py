"""The program-side half of Python code execution: runs INSIDE the sandbox, stdlib only.

It is started as ``python3 -I -S python_runner.py [--sandboxed]`` and stays up for many programs,
as two processes that never run untrusted code:

- The *template*, the process started (inside bwrap, with ``--as-pid-1``, the PID namespace's
  init). It forks a child per program and reaps every process, and nothing else: it never reads
  a request, a program, an argument or a reply. A child inherits the template's memory, so it
  inherits nothing of any earlier sample; a program that reads its own memory finds only itself.
  As init it ignores every signal a program may send it, and when it exits the kernel kills
  every process in the namespace.
- The *relay*, forked from the template before anything else: it alone holds the pipes to the
  trusted side, reads requests, compiles Python programs, has the template fork children (handing it
  the pipes of each over a socket, ``SCM_RIGHTS``), writes each child its job, relays the child's
  replies and resets the sandbox between programs. It never forks, so nothing of what it has
  read reaches a program. (bwrap's own init, which this replaces, ran as the program's user,
  dumpable, holding the pipes to the trusted side: a program traced it and made it write forged
  results for the programs after it - issue 18.)

Both are non-dumpable (``PR_SET_DUMPABLE`` 0, which their children inherit): programs run as the
same user, and the kernel then refuses them ptrace, ``/proc/<pid>/mem`` and ``/proc/<pid>/fd``
of these two (see ptrace(2), "Ptrace access mode checking"); the seccomp filter refuses ptrace
and cross-process memory calls outright (see `seccomp`). So no program reaches the pipes to the
trusted side, and each reply carries the request's random id besides: a line the relay did not
write for that request is refused.

The kernel still shows every process of the user its ``/proc/<pid>/status``, ``stat`` and
``schedstat``, non-dumpable or not: the relay's context switches, CPU time and peak memory there
counted the programs and tests before a program and the size of earlier replies (red-team round
9). ``hidepid`` would hide them, but only on a mount of ``/proc`` that bwrap does not make. So
both processes start with ``CAP_SYS_ADMIN``, ``CAP_SYS_RESOURCE`` and ``CAP_SETPCAP`` in the
sandbox's own user namespace (see `sandbox`; nothing outside the sandbox) and use them once,
before anything else (`_seal`): user namespaces limited to none (what bwrap's
``--disable-userns`` did), an empty tmpfs no one may enter over ``/proc/1`` and
``/proc/<relay>``, and ``/proc/sys`` read-only (the sandbox's IPC and PID namespaces let their
user set ``kernel.shmmax``, ``kernel.pid_max`` and the like there, which every later program
would read or suffer). Then each drops every capability, bounding and ambient sets included,
before the template forks a child or the relay reads a request. The template's and the relay's
limits and scheduling, which the same user could otherwise change and every later child would
inherit, are guarded by the seccomp filter and checked again at every reset (see `Relay.reset`).

Requests arrive on stdin, each a 4-byte length and a ``marshal``-ed dict (they come from the
trusted side) with an ``"id"``; every request gets one reply line on the original stdout: the id,
a space, and a JSON object.

- ``{"op": "program", "source", "timeout"}``: start a program: reset the sandbox, start a child
  that runs the source as a module, reply with how loading went.
- ``{"op": "call", "name", "args", "kwargs", "timeout"}``: call a function of the current
  program; the reply carries the return value encoded by `encode`.
- ``{"op": "script", "source", "stdin", "timeout"}``: run the source as ``__main__`` on the given
  input in a fresh child; the reply carries its stdout, exit code and stderr tail.
- ``{"op": "compile", "files", "argv", "env", "output", "timeout"}``: write the files (name ->
  bytes) into a fresh scratch directory and run a compiler there (``argv``, an executable under
  ``/usr`` given by its full path) in a fresh child, as a program would run; the reply carries
  its exit code and the head of what it printed, and, when it succeeded, every regular file it
  left under ``output`` (see `Relay._artifacts`). The trusted side keeps them (see `languages`).
- ``{"op": "exec", "files", "argv", "env", "stdin", "timeout"}``: write the files (name ->
  (bytes, executable)), then run ``argv`` on the given input in a fresh child, as ``script``
  runs Python; the same reply. The child replaces itself with the program (execve(2)): it keeps
  the sandbox's limits, namespaces, session and seccomp filter, gains no capability (the
  bounding set is empty), holds none of the runner's descriptors, and is reset like any other
  program. A compiler is run the same way, so a compile-time trick (an endless constant
  expression, ``#include </dev/random>``) meets the same limits and is killed at its deadline;
  its files are read back as a program's output is (`Relay._artifacts`). Nothing of the test
  but its input enters, as for ``script``.
- ``{"op": "reset"}``: end the current program (see below).

In ``env`` values of ``compile`` and ``exec``, ``{workdir}`` stands for the program's scratch
directory (a compiler's cache and home go there, and go with it at the reset).

Each program runs in the scratch directory ``program`` under ``/tmp`` (one name for all: a
numbered one would tell a program how many ran before it). Each child starts a session of its
own: the session's autogroup, whose nice value a process may raise through
``/proc/self/autogroup`` (sched(7), "The autogroup feature"), is then the program's alone, not
the template's and every later program's. Between programs the relay resets the sandbox: with
``--sandboxed`` it kills every process but itself and init, so nothing a program started
survives it, and it empties ``/tmp`` and ``/dev/shm`` and gives their roots back their mode and
times and none of the extended attributes, access control lists or inode flags a program can
set there; if anything is left, it exits and the trusted side starts a fresh sandbox. A program
that kills or stops the relay only ends the sandbox.

What this side never sees is the expected output: tests are judged by the caller, outside the
sandbox. So a program that patches this runner, prints "all tests passed", forges its own
replies or reads every file it can reach gains nothing: the only thing it controls is what it
returns or prints, which is exactly what is being tested.

The same module is imported outside the sandbox for `encode` / `decode`.
"""

import _socket  # not socket, which imports enum and selectors: milliseconds at every start
import binascii
import errno
import fcntl
import gc
import json
import marshal
import math
import os
import resource
import select
import signal
import stat
import sys
import time
import types

MAX_OUTPUT_BYTES = 8 << 20
MAX_REPLY_BYTES = 10 << 20
MAX_DEPTH = 64
#: Decoding a reply builds at most this many values in all, however they are nested.
MAX_DECODED_VALUES = 2_000_000
#: Distinct values of one hash that one decoded value may hold (see `_Decoder`).
MAX_SAME_HASH = 8
TAIL_CHARS = 500
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4  # prctl(2)
#: What bwrap leaves the runner (see `sandbox`): CAP_SYS_ADMIN, CAP_SYS_RESOURCE and, last, as
#: dropping one from the bounding set takes it, CAP_SETPCAP (linux/capability.h).
_CAPABILITIES = (21, 24, 8)
_CAPABILITY_VERSION_3 = 0x20080522
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 8, 32, 4096  # mount(2)
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602  # ioctl_iflags(2)
#: Extended attributes a program may set on a directory it owns (xattr(7)): ``user.*``, and the
#: access control lists stored as ``system.posix_acl_*`` (acl(5)). The others need privileges.
_PROGRAM_XATTRS = ("user.", "system.posix_acl_")
#: The compile error of a program past the limits of the parser or compiler (see `Relay._compiled`).
TOO_COMPLEX_TO_COMPILE = "the program is too large or too deeply nested to compile"
#: Every resource limit this Python knows (``RLIMIT_OFILE`` is ``RLIMIT_NOFILE``).
_LIMITS = sorted({value for name, value in vars(resource).items() if name.startswith("RLIMIT_")})
SCRATCH_DIRECTORIES = ("/tmp", "/dev/shm")
WORKDIR = "program"
#: The most a compiler may leave for the trusted side in all (before base64, see `Relay._artifacts`).
MAX_ARTIFACT_BYTES = 8 << 20
MAX_ARTIFACT_FILES = 256
#: The exit code of an ``exec`` child whose program could not be started.
EXEC_FAILED = 127
_HASH_MODULUS = sys.hash_info.modulus
_EXACT_FLOATS = 2.0**52


class Unencodable(TypeError):
    """A value that is not plain data (e.g. an object with its own ``__eq__``)."""


class DecodeTimeout(Exception):
    """Decoding a value ran past its deadline."""


def encode(value, depth=0):
    """Plain Python data as tagged literals (dicts, lists, str, int, float, bool, None): exact
    built-in types only, so no object can bring its own ``__eq__`` or ``__repr__`` across the
    sandbox boundary."""
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        # Hex, not decimal: Python limits decimal conversions of huge ints, not hex ones.
        return value if abs(value) < 2**53 else {"int": hex(value)}
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind is tuple:
        return {"tuple": [encode(item, depth + 1) for item in value]}
    if kind is set:
        return {"set": [encode(item, depth + 1) for item in value]}
    if kind is frozenset:
        return {"frozenset": [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is complex:
        return {"complex": [encode(value.real), encode(value.imag)]}
    if kind is bytes:
        return {"bytes": value.hex()}
    raise Unencodable(f"cannot pass a {kind.__name__} across the sandbox boundary")


class _Decoder:
    """One value's decoding under one budget: at most `MAX_DECODED_VALUES` values built in all,
    done by ``deadline``, and at most `MAX_SAME_HASH` distinct values per hash among the values
    whose hash a program can choose.

    Why the last: an int hashes to itself modulo 2**61 - 1, and floats, tuples, complex numbers
    and frozensets hash without a secret, so a program can send any number of distinct values
    with one hash (``1 + k * (2**61 - 1)``); a set or dict built from them - here, or by a test
    that calls ``set(candidate(...))`` - compares each new member with every earlier one. With at
    most 8 per hash, building any set of these values stays linear. Strings and bytes hash with a
    per-process secret (SipHash, PEP 456), and ints below the modulus and integral floats below
    2**52 hash to their own value, so those are not counted.
    """

    def __init__(self, deadline):
        self.deadline = deadline
        self.values = 0
        self.by_hash = {}

    def value(self, data, depth):
        self.values += 1
        if self.values > MAX_DECODED_VALUES:
            raise ValueError("the value is too large")
        if not self.values & 0xFFF and self.deadline is not None and time.monotonic() > self.deadline:
            raise DecodeTimeout("reading the value ran past the time limit")
        if depth > MAX_DEPTH:
            raise ValueError("value nested too deeply")
        kind = type(data)
        if data is None or kind is bool or kind is str:
            return data
        if kind is int:
            return data if -_HASH_MODULUS < data < _HASH_MODULUS else self.hashed(data)
        if kind is float:
            return data if data.is_integer() and abs(data) < _EXACT_FLOATS else self.hashed(data)
        if kind is list:
            return [self.value(item, depth + 1) for item in data]
        if kind is dict and len(data) == 1:
            ((tag, body),) = data.items()
            if tag == "int" and type(body) is str:
                return self.value(int(body, 16), depth)
            if tag == "float" and body in ("inf", "-inf", "nan"):
                return float(body)
            if tag == "bytes" and type(body) is str:
                return bytes.fromhex(body)
            if type(body) is list:
                items = (self.value(item, depth + 1) for item in body)
                if tag == "tuple":
                    return self.hashed(tuple(items))
                if tag == "set":
                    return set(items)
                if tag == "frozenset":
                    return self.hashed(frozenset(items))
                if tag == "complex" and len(body) == 2:
                    return self.hashed(complex(*items))
                if tag == "dict" and all(type(pair) is list and len(pair) == 2 for pair in body):
                    return {self.value(k, depth + 1): self.value(v, depth + 1) for k, v in body}
        raise ValueError(f"not an encoded value (a {kind.__name__})")

    def hashed(self, value):
        try:
            key = hash(value)
        except TypeError:  # a tuple holding a list: no set or dict can hold it
            return value
        same = self.by_hash.setdefault(key, [])
        if value not in same:
            if len(same) >= MAX_SAME_HASH:
                raise ValueError(f"more than {MAX_SAME_HASH} distinct values share one hash")
            same.append(value)
        return value


def decode(data, deadline=None):
    """The inverse of `encode`; a ValueError for anything `encode` cannot produce, or too large or
    too costly to rebuild (see `_Decoder`); `DecodeTimeout` past ``deadline`` (a monotonic time)."""
    try:
        return _Decoder(deadline).value(data, 0)
    except (TypeError, OverflowError) as error:  # an unhashable member; a complex of huge ints
        raise ValueError(f"not an encoded value: {error}") from None


def _output_file(path, limit, tail=False):
    """The first (or last) ``limit`` bytes of a file a program wrote, if it is still a regular
    file: the program may have put a symbolic link or a FIFO in its place, which the relay would
    otherwise read (its own descriptors in /proc) or block on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        if tail:
            os.lseek(fd, max(0, os.fstat(fd).st_size - limit), os.SEEK_SET)
        chunks = []
        while limit > 0 and (chunk := os.read(fd, min(limit, 1 << 20))):
            chunks.append(chunk)
            limit -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _tail(path):
    return _output_file(path, TAIL_CHARS * 4, tail=True).decode("utf-8", "replace")[-TAIL_CHARS:]


def _error_text(error):
    return f"{type(error).__name__}: {error}"[:TAIL_CHARS]


def _redirect(fd, path, flags):
    opened = os.open(path, flags, 0o600)
    os.dup2(opened, fd)
    os.close(opened)


def _read_message(stream):
    header = stream.read(4)
    if len(header) < 4:
        return None
    return marshal.loads(stream.read(int.from_bytes(header, "big")))


def _send_fds(sock, message, fds):
    """``socket.send_fds``: ``fds`` passed with ``message`` (SCM_RIGHTS, see unix(7))."""
    data = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
    sock.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, data)])


def _receive_fds(sock, count):
    """``socket.recv_fds``: a message and the descriptors passed with it."""
    message, ancillary, _, _ = sock.recvmsg(16, _socket.CMSG_SPACE(4 * count))
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4)]
    return message, fds


def _framed(message):
    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _join_threads():
    """Wait for the program's own threads, as the interpreter does at exit (``threading.Thread(
    target=main).start()`` is a common way to get a bigger stack)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()


def _inode_flags(directory):
    """A directory's inode flags (ioctl_iflags(2)); 0 where the filesystem keeps none (tmpfs
    before Linux 6.0)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
    except OSError as error:
        if error.errno in (errno.ENOTTY, errno.EOPNOTSUPP):
            return 0
        raise
    finally:
        os.close(fd)


def _process_state(pid):
    """What a forked child inherits from process ``pid`` (0: the caller) that another process of
    the same user may change: its resource limits and its scheduling (prlimit(2), sched(7))."""
    return (
        [resource.prlimit(pid, limit) for limit in _LIMITS],
        os.getpriority(os.PRIO_PROCESS, pid),
        os.sched_getscheduler(pid),
        os.sched_getparam(pid),
        os.sched_getaffinity(pid),
    )


def _inherited_state():
    """The template's (PID 1) and the relay's own `_process_state`."""
    return _process_state(1), _process_state(0)


def _checked(result, what):
    if result != 0:
        import ctypes  # imported already, by main

        raise OSError(ctypes.get_errno(), f"{what} failed")


def _seal(libc, pids):
    """Allow no new user namespace (user_namespaces(7), "/proc/sys/user": a limit of 0 on this
    one's descendants, which takes ``CAP_SYS_RESOURCE`` here to raise), cover ``/proc/<pid>`` of
    each pid with an empty read-only tmpfs that no one may enter, and make ``/proc/sys``
    read-only (see the module's docstring). A program can undo none of it without the
    capabilities the runner drops next."""
    with open("/proc/sys/user/max_user_namespaces", "w") as limit:
        limit.write("0")
    sealed = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for pid in pids:
        target = f"/proc/{pid}".encode()
        _checked(
            libc.mount(b"none", target, b"tmpfs", sealed, b"mode=0,size=4k"), f"mounting over {target!r}"
        )
    _checked(libc.mount(b"/proc/sys", b"/proc/sys", None, _MS_BIND, None), "binding /proc/sys")
    read_only = _MS_REMOUNT | _MS_BIND | sealed
    _checked(libc.mount(None, b"/proc/sys", None, read_only, None), "remounting /proc/sys read-only")


def _drop_capabilities(libc):
    """Give up the capabilities bwrap left this process (see the module's docstring), in every
    set: bounding (which takes ``CAP_SETPCAP``, hence first), ambient, and the effective,
    permitted and inheritable ones (capabilities(7)). Its children start with none, and as the
    bounding set is empty, no program gains one by running a file as the namespace's root."""
    import ctypes  # imported already, by main

    for capability in _CAPABILITIES:
        _checked(libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0), "PR_CAPBSET_DROP")
    _checked(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "PR_CAP_AMBIENT_CLEAR_ALL")
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    _checked(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class ProgramChild:
    """In a forked child: loads one program and answers calls into it. Runs untrusted code."""

    def __init__(self, requests, replies, workdir):
        self.requests = requests
        self.replies = replies
        self.output_path = os.path.join(workdir, "program-output")
        self.namespace = None

    def reply(self, message):
        self.replies.write(json.dumps(message) + "\n")
        self.replies.flush()

    def run(self, code):
        sys.set_int_max_str_digits(0)
        _redirect(0, os.devnull, os.O_RDONLY)
        _redirect(1, self.output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(1, 2)
        self.reply(self.load(code))
        while (request := _read_message(self.requests)) is not None:
            self.reply(self.call(request))

    def load(self, code):
        # A real module in sys.modules: dataclasses and pickling look their module up there.
        module = types.ModuleType("solution")
        sys.modules["solution"] = module
        namespace = module.__dict__
        started = time.perf_counter()
        try:
            exec(code, namespace)
        except BaseException as error:  # a SystemExit or KeyboardInterrupt from the program too
            return {
                "ok": False,
                "kind": "load_error",
                "error": _error_text(error),
                "output": _tail(self.output_path),
            }
        finally:
            sys.stdout.flush()
        self.namespace = namespace
        return {"ok": True, "runtime_s": time.perf_counter() - started}

    def _function(self, name):
        """A top-level function, or a method of a ``Solution`` class (LeetCode-style programs)."""
        if self.namespace is None:
            return None
        function = self.namespace.get(name)
        if callable(function) and not isinstance(function, type):
            return function
        solution = self.namespace.get("Solution")
        if isinstance(solution, type) and callable(getattr(solution, name, None)):
            return getattr(solution(), name)
        return None

    def call(self, request):
        function = self._function(request["name"])
        if not callable(function):
            return {
                "ok": False,
                "kind": "missing_function",
                "error": f"no function named {request['name']!r}",
            }
        started = time.perf_counter()
        try:
            result = function(*decode(request["args"]), **decode(request.get("kwargs") or {"dict": []}))
            encoded = encode(result)
        except BaseException as error:
            return {
                "ok": False,
                "kind": "raised",
                "error": _error_text(error),
                "output": _tail(self.output_path),
            }
        finally:
            sys.stdout.flush()
        return {"ok": True, "value": encoded, "runtime_s": time.perf_counter() - started}


def _run_script(job):
    """In a forked child: the program as ``__main__`` with the test input as stdin."""
    exit_code = 0
    try:
        _redirect(0, job["in"], os.O_RDONLY)
        _redirect(1, job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        _redirect(2, job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
        sys.set_int_max_str_digits(0)
        exec(job["code"], {"__name__": "__main__", "__builtins__": __builtins__})
        _join_threads()
    except SystemExit as error:
        exit_code = error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
    except BaseException as error:
        sys.stderr.write(_error_text(error) + "\n")
        exit_code = 1
    finally:
        try:
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                if stream is not None:
                    stream.flush()
        finally:
            os._exit(exit_code)


def _safe_name(name):
    """Whether ``name`` is a relative path that stays inside the scratch directory."""
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _run_exec(job):
    """In a forked child: replace this process with ``job["argv"]`` on the test input. Signals
    Python ignores (``SIGPIPE``, ``SIGXFSZ``) would stay ignored across execve(2), so they get
    their defaults back first; every descriptor but the three standard ones is closed."""
    try:
        _redirect(0, job["in"], os.O_RDONLY)
        _redirect(1, job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        _redirect(2, job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        os.execve(job["argv"][0], job["argv"], job["env"])
    except BaseException as error:
        try:
            os.write(2, (_error_text(error) + "\n").encode())
        finally:
            os._exit(EXEC_FAILED)


class Template:
    """The sandbox's first process: forks children for programs and reaps every process. It reads
    nothing but "fork" and two file descriptors from the relay, so its memory - which every child
    starts with - holds nothing of any sample."""

    def __init__(self, control, relay):
        self.control = control
        self.relay = relay
        self.children = set()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)

    def serve(self):
        # Every object so far, frozen: a child's collections skip them, and so do not touch (and
        # copy) the pages they share with this process.
        gc.disable()
        gc.freeze()
        signal.set_wakeup_fd(self.wake_write, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self._reap()
        while True:
            readable = select.select([self.control, self.wake_read], [], [])[0]
            if self.wake_read in readable:
                while True:
                    try:
                        os.read(self.wake_read, 4096)
                    except BlockingIOError:
                        break
                self._reap()
            if self.control in readable:
                message, fds = _receive_fds(self.control, 2)
                if not message:
                    return
                self._fork(*fds)

    def _fork(self, job_fd, reply_fd):
        pid = os.fork()
        if pid == 0:
            self._child(job_fd, reply_fd)
        os.close(job_fd)
        os.close(reply_fd)
        self.children.add(pid)
        self.control.send(b"forked %d" % pid)

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.relay:
                os._exit(0)  # as init, this ends every process of the sandbox
            if pid in self.children:
                self.children.discard(pid)
                self.control.send(b"exited %d %d" % (pid, os.waitstatus_to_exitcode(status)))

    def _child(self, job_fd, reply_fd):
        """The new child: starts a session of its own (and with it a process group and an autogroup,
        see the module's docstring), reads its job (from the relay, not the template) and runs it.
        The relay kills it by its process group; until the child has made it, nothing of a
        program runs in it, and killing the child alone is enough."""
        code = 1
        try:
            os.setsid()
            gc.enable()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.close(self.control.detach())
            os.close(self.wake_read)
            os.close(self.wake_write)
            requests = os.fdopen(job_fd, "rb")
            job = _read_message(requests)
            os.chdir(job["workdir"])
            if job["op"] in ("script", "exec"):
                requests.close()
                os.close(reply_fd)
                if job["op"] == "exec":
                    _run_exec(job)
                _run_script(job)
            ProgramChild(requests, os.fdopen(reply_fd, "w"), job["workdir"]).run(job["code"])
            code = 0
        finally:
            os._exit(code)


class Relay:
    """Speaks with the trusted side; starts programs through the template and resets the sandbox
    between them. Holds every request and reply, and never forks.

    After each reset it asks the template for the next program's child at once (the *spare*),
    which waits for its job: the fork is done while the trusted side reads the reply. A spare
    runs none of a program's code until its job comes, so the sandbox is clean with it waiting.
    """

    def __init__(self, control, sandboxed):
        self.control = control
        self.sandboxed = sandboxed
        self.pid = os.getpid()
        self.requests = os.fdopen(os.dup(0), "rb")
        self.responses = os.fdopen(os.dup(1), "w", encoding="utf-8")
        for fd in (0, 1):
            _redirect(fd, os.devnull, os.O_RDWR)
        self.child: tuple[int, int, int] | None = None  # (pid, request fd, reply fd) of the loaded program
        #: (request fd, reply fd) of the child forked ahead; its pid comes later.
        self.spare: tuple[int, int] | None = None
        self.exits = {}  # pid -> exit code, reported by the template
        #: Whether a child got its job since the last reset: if none did, no program code ran
        #: since, and there is nothing to reset.
        self.dirty = False
        scratch = [os.getcwd()] + [d for d in SCRATCH_DIRECTORIES if sandboxed and os.path.isdir(d)]
        self.scratch = list(dict.fromkeys(scratch))  # the sandbox's working directory is /tmp
        self.workdir = os.path.join(self.scratch[0], WORKDIR)
        #: What the template (which forks every child) and the relay had at the start.
        self.inherited = _inherited_state() if sandboxed else None
        os.mkdir(self.workdir, 0o700)
        self._fork_spare()

    def serve(self):
        while (request := _read_message(self.requests)) is not None:
            nonce = request.pop("id")
            reply = getattr(self, "op_" + request["op"])(request)
            self.responses.write(f"{nonce} {reply if isinstance(reply, str) else json.dumps(reply)}\n")
            self.responses.flush()

    @staticmethod
    def _compiled(source):
        """The program compiled here (it reaches the child in its job: marshal carries code
        objects), or a compile_error reply. Compiling here, not in the child, keeps that work out
        of a fresh copy-on-write process.

        Besides SyntaxError and ValueError (null bytes), compile() reports the limits of the
        parser and compiler as other errors: MemoryError, with no message, for 100,000 unary
        minus signs, RecursionError for 100,000 chained calls, OverflowError for sizes past a C
        integer. Each is the program's compile error, said in words (a bare "MemoryError" reads
        as the grader's); uncaught, it ended the relay, and with no load error recorded every
        test started a new sandbox to crash again (red-team round 9)."""
        try:
            return compile(source, "<solution>", "exec"), None
        except (SyntaxError, ValueError) as error:
            return None, {"ok": False, "kind": "compile_error", "error": _error_text(error)}
        except (MemoryError, RecursionError, OverflowError):
            return None, {"ok": False, "kind": "compile_error", "error": TOO_COMPLEX_TO_COMPILE}

    def _fork_spare(self):
        job_read, job_write = os.pipe()
        reply_read, reply_write = os.pipe()
        _send_fds(self.control, b"fork", [job_read, reply_write])
        os.close(job_read)
        os.close(reply_write)
        self.spare = (job_write, reply_read)

    def _start(self, job):
        """The spare child, given its job: (pid, request fd, reply fd). There is always a spare
        here: one is forked when the relay starts and after every reset that follows a start."""
        spare, self.spare = self.spare, None
        assert spare is not None
        requests, replies = spare
        self.dirty = True
        pid = self._control_message()
        try:
            _write_all(requests, _framed(job))
        except OSError:
            pass  # the child is gone; reading its reply says so
        return pid, requests, replies

    def _control_message(self, exited=None, deadline=None):
        """The pid of the child forked last; or, with ``exited``, that child's exit code (None
        past ``deadline``). Exits reported meanwhile are kept for when they are asked for."""
        while exited is None or exited not in self.exits:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self.control], [], [], remaining)[0]:
                    return None
            message = self.control.recv(64)
            if not message:
                os._exit(4)  # the template is gone
            kind, *numbers = message.split()
            if kind == b"forked" and exited is None:
                return int(numbers[0])
            if kind == b"exited":
                self.exits[int(numbers[0])] = int(numbers[1])
        return self.exits.pop(exited)

    def reset(self):
        """End the current program and everything it started; empty the scratch directories.

        If they cannot be emptied (a program found a way to keep something), or the template's or
        the relay's limits or scheduling are not what they were at the start, the relay exits:
        the trusted side then replaces the whole sandbox rather than run a program in a dirty one.
        The seccomp filter already refuses a program the calls that change another process's
        limits or scheduling (see `seccomp`); this check also holds where there is no filter, and
        against a way to them the filter does not know. They cannot be put back instead: a
        lowered hard limit or a raised nice value takes privileges to undo.
        """
        if not self.dirty:
            return
        self.dirty = False
        pid = None
        if self.child is not None:
            pid, requests, replies = self.child
            self.child = None
            os.close(requests)
            os.close(replies)
            _kill_group(pid)
        if self.sandboxed:
            # Inside our own PID namespace: every process but this one and init is a program's.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        if pid is not None and self._control_message(exited=pid, deadline=time.monotonic() + 10) is None:
            os._exit(3)
        if self.sandboxed:
            self._await_alone()
            if _inherited_state() != self.inherited:
                os._exit(3)
        self.exits.clear()
        for directory in self.scratch:
            self._empty(directory)
            try:
                if self.sandboxed:
                    self._restore(directory)
                pristine = self._pristine(directory)
            except OSError:
                pristine = False
            if not pristine:
                os._exit(3)
        os.mkdir(self.workdir, 0o700)
        self._fork_spare()

    def _await_alone(self):
        """Wait until init has reaped every process killed (they leave /proc when reaped); the
        program's own process is already reaped, so there is only a wait where it had started
        others."""
        deadline = time.monotonic() + 5
        delay = 0.0001
        while any(name.isdigit() and int(name) not in (1, self.pid) for name in os.listdir("/proc")):
            if time.monotonic() > deadline:
                os._exit(3)
            time.sleep(delay)
            delay = min(delay * 2, 0.005)

    @staticmethod
    def _empty(directory):
        """Delete everything below ``directory``, giving back any permission a program took away
        from a directory before reading it."""
        try:
            os.chmod(directory, 0o700)
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    Relay._empty(entry.path)
                    os.rmdir(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass

    @staticmethod
    def _restore(directory):
        """Give a scratch root back what a program may have set on the directory itself, which
        emptying it keeps: extended attributes and access control lists, inode flags
        (chattr(1): no-atime and no-dump need no privilege on tmpfs) and times (an access time in
        the future stays: relatime only moves it forward). Each was a channel from one sample to
        the next (red-team round 9). `_empty` has already restored its mode; `_pristine` checks."""
        for name in os.listxattr(directory):
            if name.startswith(_PROGRAM_XATTRS):
                os.removexattr(directory, name)
        if _inode_flags(directory):
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.ioctl(fd, _FS_IOC_SETFLAGS, bytes(8))
            finally:
                os.close(fd)
        os.utime(directory)

    def _pristine(self, directory):
        """Whether a scratch root is as a fresh sandbox has it: empty, ours alone to use, and, in
        the sandbox, without an attribute or flag a program set."""
        if os.listdir(directory) or stat.S_IMODE(os.stat(directory).st_mode) != 0o700:
            return False
        if not self.sandboxed:
            return True
        return not _inode_flags(directory) and not any(
            name.startswith(_PROGRAM_XATTRS) for name in os.listxattr(directory)
        )

    @staticmethod
    def _await_line(fd, timeout):
        """One reply line from a child, or a failure dict (timeout, crash, oversize)."""
        deadline = time.monotonic() + timeout
        buffer = b""
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return {"ok": False, "kind": "timeout", "error": "the program ran past its time limit"}
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return {"ok": False, "kind": "crashed", "error": "the program's process died"}
            buffer += chunk
            if len(buffer) > MAX_REPLY_BYTES:
                return {
                    "ok": False,
                    "kind": "crashed",
                    "error": "the program's reply exceeded the size limit",
                }
        return buffer.split(b"\n", 1)[0].decode("utf-8", "replace")

    def op_reset(self, request):
        self.reset()
        return {"ok": True}

    def op_program(self, request):
        self.reset()
        code, failure = self._compiled(request["source"])
        if failure is not None:
            return failure
        self.child = self._start({"op": "program", "code": code, "workdir": self.workdir})
        return self._relay_reply(self.child[2], float(request.get("timeout", 5.0)))

    def op_call(self, request):
        if self.child is None:
            return {"ok": False, "kind": "not_loaded", "error": "no program is loaded"}
        try:
            _write_all(self.child[1], _framed(request))
        except OSError:
            self.reset()
            return {"ok": False, "kind": "crashed", "error": "the program's process died"}
        return self._relay_reply(self.child[2], float(request.get("timeout", 5.0)))

    def _relay_reply(self, replies, timeout):
        """The loaded program's reply on fd ``replies``; a program that did not reply is reset."""
        reply = self._await_line(replies, timeout)
        if isinstance(reply, dict):
            self.reset()  # a program that timed out or died is gone; the caller starts it again
        return reply

    def op_script(self, request):
        self.reset()
        code, failure = self._compiled(request["source"])
        if failure is not None:
            return failure
        reply = self._run_child({"op": "script", "code": code}, request)
        self.reset()
        return reply

    def op_exec(self, request):
        """Run a program given as files and a command line (see the module's docstring)."""
        self.reset()
        self._write_files(request["files"])
        reply = self._run_child(self._exec_job(request), request)
        self.reset()
        return reply

    def op_compile(self, request):
        """Run a compiler on the files; on success, reply with what it left under ``output``."""
        self.reset()
        self._write_files({name: (content, False) for name, content in request["files"].items()})
        output = os.path.join(self.workdir, request["output"])
        os.mkdir(output, 0o700)
        reply = self._run_child(self._exec_job(request), {**request, "stdin": ""}, head=True)
        if reply["exit_code"] == 0 and not reply["timed_out"]:
            reply["files"], reply["artifact_error"] = self._artifacts(output, request["output"])
        self.reset()
        return reply

    def _exec_job(self, request):
        env = {key: value.replace("{workdir}", self.workdir) for key, value in request["env"].items()}
        return {"op": "exec", "argv": list(request["argv"]), "env": env}

    def _write_files(self, files):
        """Write the program's files (name -> (bytes, executable)) into its scratch directory."""
        for name, (content, executable) in files.items():
            if not _safe_name(name):
                raise ValueError(f"not a file name inside the scratch directory: {name!r}")
            path = os.path.join(self.workdir, name)
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700 if executable else 0o600)
            try:
                _write_all(fd, content)
            finally:
                os.close(fd)

    @staticmethod
    def _artifacts(root, prefix):
        """Every regular file below ``root`` (name under the scratch directory -> [base64,
        executable]), and None; or an empty dict and why they cannot be taken. The compiler ran
        as a program's user, so what it left is read as a program's output is: no link
        followed, nothing but regular files and directories, bounded in count, depth and size."""
        files: dict[str, list] = {}
        total, pending = 0, [(root, prefix, 0)]
        while pending:
            directory, name, depth = pending.pop()
            if depth > 8:
                return {}, "the compiler's output is nested too deeply"
            for entry in os.scandir(directory):
                relative = f"{name}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, relative, depth + 1))
                    continue
                if not entry.is_file(follow_symlinks=False) or not _safe_name(relative):
                    continue
                if len(files) >= MAX_ARTIFACT_FILES:
                    return {}, f"the compiler left more than {MAX_ARTIFACT_FILES} files"
                content = _output_file(entry.path, MAX_ARTIFACT_BYTES + 1 - total)
                total += len(content)
                if total > MAX_ARTIFACT_BYTES:
                    return {}, f"the compiled program exceeds {MAX_ARTIFACT_BYTES} bytes"
                executable = bool(entry.stat(follow_symlinks=False).st_mode & stat.S_IXUSR)
                files[relative] = [binascii.b2a_base64(content, newline=False).decode(), executable]
        return files, None

    def _run_child(self, job, request, head=False):
        """Run ``job`` in the spare child on the request's stdin and collect what it printed (the
        head of stderr with ``head``: a compiler's first error is the one that matters)."""
        paths = {name: os.path.join(self.workdir, f"script-{name}") for name in ("in", "out", "err")}
        with open(paths["in"], "w", encoding="utf-8") as handle:
            handle.write(request.get("stdin", ""))
        started = time.perf_counter()
        pid, requests, replies = self._start({**job, "workdir": self.workdir, **paths})
        os.close(requests)
        os.close(replies)
        exit_code, timed_out = self._wait(pid, float(request.get("timeout", 5.0)))
        runtime = time.perf_counter() - started
        raw = _output_file(paths["out"], MAX_OUTPUT_BYTES + 1)
        if head:
            stderr = _output_file(paths["err"], TAIL_CHARS * 4).decode("utf-8", "replace")[:TAIL_CHARS]
        else:
            stderr = _tail(paths["err"])
        return {
            "ok": True,
            "stdout": raw[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"),
            "output_truncated": len(raw) > MAX_OUTPUT_BYTES,
            "exit_code": exit_code,
            "timed_out": timed_out,
            "stderr": stderr,
            "runtime_s": runtime,
        }

    def _wait(self, pid, timeout):
        """(exit code, False), or (None, True) when the child ran past ``timeout`` (killed)."""
        exit_code = self._control_message(exited=pid, deadline=time.monotonic() + timeout)
        if exit_code is not None:
            return exit_code, False
        _kill_group(pid)
        if self._control_message(exited=pid, deadline=time.monotonic() + 10) is None:
            os._exit(3)
        return None, True


def main():
    # Inside bwrap's PID namespace (--as-pid-1) this process is its init. Only there may the
    # relay's reset kill "everything": outside it, kill(-1) would reach every process of the user.
    sandboxed = "--sandboxed" in sys.argv and os.getpid() == 1
    libc = None
    if sandboxed:
        import ctypes  # only here: the import costs milliseconds and unsafe mode has no use for it

        libc = ctypes.CDLL(None, use_errno=True)
        _checked(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    template_end, relay_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    relay = os.fork()
    if relay == 0:
        template_end.close()
        try:
            if sandboxed:
                _drop_capabilities(libc)
            Relay(relay_end, sandboxed).serve()
        except BaseException:
            sys.excepthook(*sys.exc_info())  # to the diagnostics file, which only the relay holds
            os._exit(1)
        os._exit(0)
    relay_end.close()
    if sandboxed:
        # Before the template serves: it forks no child until it has dropped its capabilities.
        _seal(libc, (1, relay))
        _drop_capabilities(libc)
    for fd in (0, 1, 2):
        _redirect(fd, os.devnull, os.O_RDWR)
    Template(template_end, relay).serve()


if __name__ == "__main__":
    main()
