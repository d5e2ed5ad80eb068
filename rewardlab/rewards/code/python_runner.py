"""The program-side half of Python code execution: runs INSIDE the sandbox, stdlib only.

It is started as ``python3 -I -S python_runner.py [--sandboxed]`` and stays up for many programs.
The process itself (the *zygote*) never runs untrusted code: it forks a child per program and
relays requests to it, so a program costs a fork rather than a sandbox and an interpreter start.

Requests arrive on stdin, each a 4-byte length and a ``marshal``-ed dict (they come from the
trusted side); every request gets one reply line of JSON on the original stdout.

- ``{"op": "program", "source", "timeout"}``: start a program: reset the sandbox, fork a child
  that runs the source as a module, reply with how loading went.
- ``{"op": "call", "name", "args", "kwargs", "timeout"}``: call a function of the current
  program; the reply carries the return value encoded by `encode`.
- ``{"op": "script", "source", "stdin", "timeout"}``: run the source as ``__main__`` on the given
  input in a fresh child; the reply carries its stdout, exit code and stderr tail.
- ``{"op": "reset"}``: end the current program (see below).

Each program runs in a scratch directory of its own under ``/tmp``. Between programs the zygote
resets the sandbox: with ``--sandboxed`` (inside bwrap's PID namespace) it kills every process
but itself and the namespace's init, so nothing a program started survives it, and it empties
``/tmp`` and ``/dev/shm``, restoring any permission a program took away; if anything is left, it
exits and the trusted side starts a fresh sandbox. It makes itself non-dumpable, so programs
running as the same user cannot trace it or read its memory. A program that kills or stops the
zygote only ends the sandbox.

What this side never sees is the expected output: tests are judged by the caller, outside the
sandbox. So a program that patches this runner, prints "all tests passed", forges replies or
reads every file it can reach gains nothing: the only thing it controls is what it returns or
prints, which is exactly what is being tested.

The same module is imported outside the sandbox for `encode` / `decode`.
"""

import json
import marshal
import math
import os
import select
import signal
import sys
import time
import types

MAX_OUTPUT_BYTES = 8 << 20
MAX_REPLY_BYTES = 10 << 20
MAX_DEPTH = 64
#: Decoding a reply builds at most this many values, and sets or dicts of at most this many
#: members: a program cannot make the trusted side's decoding slow (ints can be chosen to share
#: one hash) or large.
MAX_DECODED_VALUES = 2_000_000
MAX_HASHED_MEMBERS = 10_000
TAIL_CHARS = 500
_PR_SET_DUMPABLE = 4
SCRATCH_DIRECTORIES = ("/tmp", "/dev/shm")


class Unencodable(TypeError):
    """A value that is not plain data (e.g. an object with its own ``__eq__``)."""


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


class _Budget:
    def __init__(self):
        self.values = 0

    def spend(self, count=1):
        self.values += count
        if self.values > MAX_DECODED_VALUES:
            raise ValueError("the value is too large")


def decode(data, depth=0, budget=None):
    """The inverse of `encode`; rejects anything `encode` cannot produce, and anything too large
    or too expensive to rebuild (see `MAX_DECODED_VALUES`, `MAX_HASHED_MEMBERS`)."""
    budget = budget or _Budget()
    budget.spend()
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if data is None or isinstance(data, (bool, str, int, float)):
        return data
    if isinstance(data, list):
        return [decode(item, depth + 1, budget) for item in data]
    if isinstance(data, dict) and len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "int" and isinstance(body, str):
            return int(body, 16)
        if tag == "float" and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "tuple":
            return tuple(decode(item, depth + 1, budget) for item in body)
        if tag in ("set", "frozenset", "dict") and len(body) > MAX_HASHED_MEMBERS:
            raise ValueError(f"a {tag} of more than {MAX_HASHED_MEMBERS} members")
        if tag == "set":
            return {decode(item, depth + 1, budget) for item in body}
        if tag == "frozenset":
            return frozenset(decode(item, depth + 1, budget) for item in body)
        if tag == "dict":
            return {decode(k, depth + 1, budget): decode(v, depth + 1, budget) for k, v in body}
        if tag == "complex":
            return complex(decode(body[0], depth + 1, budget), decode(body[1], depth + 1, budget))
        if tag == "bytes" and isinstance(body, str):
            return bytes.fromhex(body)
    raise ValueError(f"not an encoded value: {str(data)[:100]}")


def _tail(path):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_CHARS * 4))
            return handle.read().decode("utf-8", "replace")[-TAIL_CHARS:]
    except OSError:
        return ""


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


def _write_message(stream, message):
    body = marshal.dumps(message)
    stream.write(len(body).to_bytes(4, "big") + body)
    stream.flush()


def _join_threads():
    """Wait for the program's own threads, as the interpreter does at exit (``threading.Thread(
    target=main).start()`` is a common way to get a bigger stack)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()


class ProgramChild:
    """In a forked child: loads one program and answers calls into it. Runs untrusted code."""

    def __init__(self, requests, replies, output_path):
        self.requests = requests
        self.replies = replies
        self.output_path = output_path
        self.namespace = None

    def reply(self, message):
        self.replies.write(json.dumps(message) + "\n")
        self.replies.flush()

    def run(self, source):
        os.setpgid(0, 0)
        sys.set_int_max_str_digits(0)
        _redirect(0, os.devnull, os.O_RDONLY)
        _redirect(1, self.output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(1, 2)
        self.reply(self.load(source))
        while (request := _read_message(self.requests)) is not None:
            self.reply(self.call(request))

    def load(self, source):
        # A real module in sys.modules: dataclasses and pickling look their module up there.
        module = types.ModuleType("solution")
        sys.modules["solution"] = module
        namespace = module.__dict__
        started = time.perf_counter()
        try:
            code = compile(source, "<solution>", "exec")
        except (SyntaxError, ValueError) as error:
            return {"ok": False, "kind": "compile_error", "error": _error_text(error)}
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


class Zygote:
    """The long-lived runner process: forks children for programs, never runs untrusted code."""

    def __init__(self, sandboxed):
        self.sandboxed = sandboxed
        self.requests = os.fdopen(os.dup(0), "rb")
        self.responses = os.fdopen(os.dup(1), "w", encoding="utf-8")
        for fd in (0, 1, 2):
            _redirect(fd, os.devnull, os.O_RDWR)
        self.child = None  # (pid, request pipe, reply pipe)
        self.scratch = [os.getcwd()] + [d for d in SCRATCH_DIRECTORIES if sandboxed and os.path.isdir(d)]
        self.programs = 0
        self.workdir = self._new_workdir()
        if sandboxed:
            import ctypes  # only here: the import costs milliseconds and unsafe mode has no use for it

            ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)

    def serve(self):
        while (request := _read_message(self.requests)) is not None:
            reply = getattr(self, "op_" + request["op"])(request)
            self.responses.write(reply if isinstance(reply, str) else json.dumps(reply) + "\n")
            self.responses.flush()

    def _new_workdir(self):
        """A fresh directory for the next program: nothing of an earlier program is in it."""
        self.programs += 1
        path = os.path.join(self.scratch[0], f"program-{self.programs}")
        os.mkdir(path, 0o700)
        return path

    def reset(self):
        """End the current program and everything it started; empty the scratch directories.

        If they cannot be emptied (a program found a way to keep something), the zygote exits:
        the trusted side then replaces the whole sandbox rather than run a program in a dirty one.
        """
        if self.child is not None:
            pid, requests, replies = self.child
            self.child = None
            requests.close()
            replies.close()
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.sandboxed:
            # Inside our own PID namespace: every process but this one and init is a program's.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, 0)[0] == 0:
                    break
            except ChildProcessError:
                break
        for directory in self.scratch:
            self._empty(directory)
            if os.listdir(directory) or not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
                os._exit(3)
        self.workdir = self._new_workdir()

    @staticmethod
    def _empty(directory):
        """Delete everything below ``directory``, first giving back any permission taken away."""
        os.chmod(directory, 0o700)
        for root, dirs, _ in os.walk(directory):
            for name in dirs:
                try:
                    os.chmod(os.path.join(root, name), 0o700)
                except OSError:
                    pass
        for root, dirs, files in os.walk(directory, topdown=False):
            for name in files:
                try:
                    os.unlink(os.path.join(root, name))
                except OSError:
                    pass
            for name in dirs:
                try:
                    os.rmdir(os.path.join(root, name))
                except OSError:
                    pass

    def _await_line(self, replies, timeout):
        """One reply line from a child, or a failure dict (timeout, crash, oversize)."""
        deadline = time.monotonic() + timeout
        buffer = b""
        fd = replies.fileno()
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
        line = buffer.split(b"\n", 1)[0].decode("utf-8", "replace")
        return line + "\n"

    def op_reset(self, request):
        self.reset()
        return {"ok": True}

    def op_program(self, request):
        self.reset()
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(request_write)
                os.close(reply_read)
                self.requests.close()
                self.responses.close()
                os.chdir(self.workdir)
                output = os.path.join(self.workdir, "program-output")
                child = ProgramChild(os.fdopen(request_read, "rb"), os.fdopen(reply_write, "w"), output)
                child.run(request["source"])
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(request_read)
        os.close(reply_write)
        self.child = (pid, os.fdopen(request_write, "wb"), os.fdopen(reply_read, "rb"))
        return self._relay_reply(float(request.get("timeout", 5.0)))

    def op_call(self, request):
        if self.child is None:
            return {"ok": False, "kind": "not_loaded", "error": "no program is loaded"}
        try:
            _write_message(self.child[1], request)
        except OSError:
            self.reset()
            return {"ok": False, "kind": "crashed", "error": "the program's process died"}
        return self._relay_reply(float(request.get("timeout", 5.0)))

    def _relay_reply(self, timeout):
        reply = self._await_line(self.child[2], timeout)
        if isinstance(reply, dict):
            self.reset()  # a program that timed out or died is gone; the caller starts it again
        return reply

    def op_script(self, request):
        self.reset()
        in_path, out_path, err_path = (
            os.path.join(self.workdir, f"script-{name}") for name in ("in", "out", "err")
        )
        try:
            code = compile(request["source"], "<solution>", "exec")
        except (SyntaxError, ValueError) as error:
            return {"ok": False, "kind": "compile_error", "error": _error_text(error)}
        with open(in_path, "w", encoding="utf-8") as handle:
            handle.write(request.get("stdin", ""))
        started = time.perf_counter()
        child = os.fork()
        if child == 0:
            self._run_script(code, in_path, out_path, err_path)
        exit_code, timed_out = self._wait(child, float(request.get("timeout", 5.0)))
        runtime = time.perf_counter() - started
        with open(out_path, "rb") as handle:
            raw = handle.read(MAX_OUTPUT_BYTES + 1)
        stderr = _tail(err_path)
        self.reset()
        return {
            "ok": True,
            "stdout": raw[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"),
            "output_truncated": len(raw) > MAX_OUTPUT_BYTES,
            "exit_code": exit_code,
            "timed_out": timed_out,
            "stderr": stderr,
            "runtime_s": runtime,
        }

    def _run_script(self, code, in_path, out_path, err_path):
        """In the forked child: the program as ``__main__`` with the test input as stdin."""
        exit_code = 0
        try:
            os.setpgid(0, 0)
            self.requests.close()
            self.responses.close()
            _redirect(0, in_path, os.O_RDONLY)
            _redirect(1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            _redirect(2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.chdir(self.workdir)
            sys.stdin = open(0, encoding="utf-8", closefd=False)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
            sys.set_int_max_str_digits(0)
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            _join_threads()
        except SystemExit as error:
            exit_code = error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
        except BaseException as error:
            sys.stderr.write(_error_text(error) + "\n")
            exit_code = 1
        finally:
            try:
                for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                    stream.flush()
            finally:
                os._exit(exit_code)

    @staticmethod
    def _wait(child, timeout):
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                return (os.waitstatus_to_exitcode(status), False)
            if time.monotonic() >= deadline:
                try:
                    os.killpg(child, signal.SIGKILL)
                except OSError:
                    os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                return (None, True)
            time.sleep(delay)
            delay = min(delay * 2, 0.01)


if __name__ == "__main__":
    # Only inside bwrap's PID namespace (whose init is our parent) may reset kill "everything":
    # outside it, kill(-1) would reach every process of the user.
    Zygote(sandboxed="--sandboxed" in sys.argv and os.getppid() == 1).serve()
