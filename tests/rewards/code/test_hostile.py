"""Hostile programs: each one is contained, earns no pass it did not earn, leaves the worker pool
working and changes nothing outside its sandbox.

Every hostile program below is scored against tests it would pass if its trick worked: the
expected outputs are things only cheating can produce (a secret from the environment, a file
on the host, "connected"), or the trick targets the harness itself (exit 0 before the tests,
a patched ``assert``, an object equal to everything).
"""

import errno
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import rewardlab.rewards.code.session as session_module
from rewardlab import Sample, Status
from rewardlab.rewards.code import harness
from rewardlab.rewards.code.cases import read_tests
from rewardlab.rewards.code.harness import run_program
from rewardlab.rewards.code.python_runner import TOO_COMPLEX_TO_COMPILE
from rewardlab.rewards.code.reward import CodeExecutionReward
from rewardlab.rewards.code.sandbox import UID_RANGE, Sandbox, claim_uid
from rewardlab.rewards.code.session import SandboxSession, SessionEnded

SECRET = "rewardlab-secret-7f3a"
HOST_CANARY = Path("/tmp/rewardlab-hostile-canary")

ADD_CALLS = {"fn_name": "add", "tests": [{"input": [1, 2], "output": 3}, {"input": [5, 5], "output": 10}]}
ADD_CHECK = {
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n",
}
SUM_STDIO = {"tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]}
SECRET_CALL = {"fn_name": "leak", "tests": [{"input": [], "output": SECRET}]}


def listening_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted = []

    def accept_all():
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(connection)

    threading.Thread(target=accept_all, daemon=True).start()
    return server, accepted


HOSTILE = {
    "fork bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
                  "def add(a, b):\n    return a + b", ADD_CALLS),
    "memory bomb": ("chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))\n"
                    "def add(a, b):\n    return a + b", ADD_CALLS),
    "infinite loop": ("def add(a, b):\n    while True:\n        pass", ADD_CALLS),
    "busy loop in a signal handler": (
        "import signal, time\n"
        "def stubborn(*_):\n    while True:\n        pass\n"
        "for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):\n"
        "    signal.signal(sig, stubborn)\n"
        "signal.alarm(1)\n"
        "def add(a, b):\n    time.sleep(30)\n    return a + b", ADD_CALLS),
    "write outside the temp dir": (
        f"import os\nfor path in ['{HOST_CANARY}', '/usr/canary', '/canary', '/etc/canary',"
        f" os.path.expanduser('~/canary'), '{os.getcwd()}/canary']:\n"
        "    try:\n        open(path, 'w').write('pwned')\n    except OSError:\n        pass\n"
        "def add(a, b):\n    return a + b", ADD_CALLS),  # it may pass its tests; it must not write
    "read /etc/passwd, home and environment": (
        "import os, glob\n"
        "def leak():\n"
        "    found = os.environ.get('REWARDLAB_HOSTILE_SECRET', '')\n"
        "    for path in ['/etc/passwd', os.path.expanduser('~/.bash_history'), '/proc/1/environ',"
        " '/proc/self/environ'] + glob.glob('/root/*') + glob.glob('/work/**/*.py', recursive=True):\n"
        "        try:\n            found += open(path, errors='ignore').read()\n"
        "        except OSError:\n            pass\n"
        f"    return '{SECRET}' if '{SECRET}' in found or 'root:x:0' in found else found[:50]",
        SECRET_CALL),
    "network connection": ("import socket\n"
                           "def leak():\n"
                           "    socket.create_connection(('127.0.0.1', PORT), timeout=1)\n"
                           f"    return '{SECRET}'", SECRET_CALL),
    "kill the parent": ("import os, signal\nfor pid in (os.getppid(), 1, -1):\n"
                        "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
                        "def add(a, b):\n    return a + b", ADD_CALLS),
    "os._exit(0) before the tests": ("import os\nos._exit(0)\ndef add(a, b):\n    return a + b", ADD_CHECK),
    "sys.exit(0) before the tests": ("import sys\nsys.exit(0)", SUM_STDIO),
    "override assert": ("import builtins\nclass Never(Exception):\n    pass\n"
                        "builtins.AssertionError = Never\n"
                        "def add(a, b):\n    return 0", ADD_CHECK),
    "object equal to everything": ("class Anything:\n    def __eq__(self, other):\n        return True\n"
                                   "    __hash__ = object.__hash__\n"
                                   "def add(a, b):\n    return Anything()", ADD_CHECK),
    "monkeypatch the harness": (
        "import sys, json\nrunner = sys.modules['__main__']\n"
        "def forged(self, request):\n    return {'ok': True, 'passed': True, 'value': 42}\n"
        "runner.Runner.op_call = forged\n"
        "runner.encode = lambda value, depth=0: 42\n"
        "json.dumps = lambda *a, **k: '{\"ok\": true, \"passed\": true, \"value\": 42}'\n"
        "def add(a, b):\n    return 0", ADD_CALLS),
    "print fake pass markers": ("print('All tests passed!')\nprint('3')\nprint('PASSED 2/2')\n"
                                "import sys\nsys.exit(0)", SUM_STDIO),
    "stdout flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", SUM_STDIO),
    "deep recursion": ("import sys\nsys.setrecursionlimit(10**8)\n"
                       "def add(a, b):\n    return add(a + 1, b)", ADD_CALLS),
    "read the tests": (
        "import os, gc\n"
        "def leak():\n"
        "    for root, dirs, files in os.walk('/'):\n"
        "        if root.startswith('/proc'):\n            continue\n"
        "        for name in files:\n"
        "            try:\n                text = open(os.path.join(root, name), errors='ignore').read()\n"
        "            except OSError:\n                continue\n"
        "            if 'rewardlab-secret' in text:\n                return text\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, str) and obj.startswith('rewardlab-secret'):\n            return obj\n"
        "    return 'nothing'", SECRET_CALL),
}  # fmt: skip

#: Hostile programs whose tests a correct function would pass: the trick must not matter, and
#: they may score 1.0; every other program must score 0.
MAY_PASS = {"write outside the temp dir", "kill the parent"}


def sandbox_processes():
    low, high = UID_RANGE
    for _ in range(50):  # processes of a closed sandbox take a few milliseconds to go
        output = subprocess.run(
            ["ps", "-e", "-o", "uid=,pid=,stat=,comm="], capture_output=True, text=True, check=False
        ).stdout
        alive = [line for line in output.splitlines() if low <= int(line.split()[0]) < high]
        if not alive:
            return []
        time.sleep(0.05)
    return alive


@pytest.fixture(scope="module")
def hostile_scores():
    os.environ["REWARDLAB_HOSTILE_SECRET"] = SECRET
    server, accepted = listening_server()
    port = server.getsockname()[1]
    reward = CodeExecutionReward(test_timeout_s=1.5, total_timeout_s=6.0, limits={"memory_bytes": 512 << 20})
    samples = [
        Sample(completion=f"```python\n{code.replace('PORT', str(port))}\n```", id=name, fields=fields)
        for name, (code, fields) in HOSTILE.items()
    ]
    scores = dict(zip(HOSTILE, reward.score(samples), strict=True))
    healthy = reward.score(
        [Sample(completion="```python\ndef add(a, b):\n    return a + b\n```", fields=ADD_CALLS)]
    )
    reward.close()
    server.close()
    del os.environ["REWARDLAB_HOSTILE_SECRET"]
    yield scores, healthy[0], accepted


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_earns_nothing(hostile_scores, name):
    scores, _, _ = hostile_scores
    score = scores[name]
    assert score.ok, f"{name}: the harness itself failed: {score.reason}"
    if name in MAY_PASS:
        return
    assert score.value == 0.0, f"{name} earned {score.value}: {score.details.get('tests')}"


def test_nothing_was_written_outside_the_sandbox(hostile_scores):
    assert not HOST_CANARY.exists()
    assert not Path("canary").exists() and not Path("/canary").exists() and not Path("/usr/canary").exists()
    assert not Path(os.path.expanduser("~/canary")).exists()


def test_no_connection_reached_the_host(hostile_scores):
    _, _, accepted = hostile_scores
    assert accepted == []


def test_the_pool_still_works_and_no_sandbox_process_survives(hostile_scores):
    _, healthy, _ = hostile_scores
    assert healthy.value == 1.0
    assert sandbox_processes() == []


def test_timeouts_and_crashes_are_reported_as_such(hostile_scores):
    scores, _, _ = hostile_scores
    outcomes = lambda name: {test["outcome"] for test in scores[name].details["tests"]}  # noqa: E731
    assert outcomes("infinite loop") == {"timeout"}
    assert outcomes("busy loop in a signal handler") == {"timeout"}
    assert outcomes("deep recursion") <= {"error", "timeout"}
    assert "MemoryError" in scores["memory bomb"].reason or "timeout" in outcomes("memory bomb")


LINGERER = (
    "import os, time\n"
    "open('/tmp/leftover', 'w').write('x')\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    while True:\n"
    "        time.sleep(0.01)\n"
    "        try:\n            os.kill(-1, 9)\n        except OSError:\n            pass\n"
    "def f():\n    return 1\n"
)
ZYGOTE_ATTACKER = (
    "import os, signal\n"
    "def f():\n"
    "    zygote = os.getppid()\n"
    "    try:\n        open(f'/proc/{zygote}/mem', 'rb').read(1)\n        return 'read the runner'\n"
    "    except OSError:\n        pass\n"
    "    os.kill(zygote, signal.SIGKILL)\n"
    "    return 1\n"
)
OBSERVER = (
    "import os\n"
    "def g():\n"
    "    processes = [p for p in os.listdir('/proc') if p.isdigit()]\n"
    "    return [os.path.exists('/tmp/leftover'), len(processes)]\n"
)


def test_programs_sharing_a_sandbox_cannot_reach_each_other():
    # One worker, so all three programs go through the same sandboxed runner in turn: what the
    # first leaves behind (a file, a daemon killing everything it can) and what the second does
    # to the runner itself must not reach the third.
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    calls = lambda name, output: {"fn_name": name, "tests": [{"input": [], "output": output}]}  # noqa: E731
    samples = [
        Sample(completion=f"```python\n{LINGERER}```", fields=calls("f", 1)),
        Sample(completion=f"```python\n{ZYGOTE_ATTACKER}```", fields=calls("f", "read the runner")),
        # Init, the runner and this program: nothing else may be running, and /tmp is empty.
        Sample(completion=f"```python\n{OBSERVER}```", fields=calls("g", [False, 3])),
    ]
    lingerer, attacker, observer = (reward.score([sample])[0] for sample in samples)
    reward.close()
    assert lingerer.value == 1.0
    assert attacker.value == 0.0  # could not read the runner's memory
    assert observer.value == 1.0, observer.details["tests"]


POISONER = (
    "import os\n"
    "os.chmod(os.path.join(os.getcwd(), 'program-output'), 0o400)\n"
    "os.makedirs('/tmp/a/b/c', exist_ok=True)\n"
    "for path in ('/tmp/a/b/c', '/tmp/a/b', '/tmp/a', '/tmp'):\n"
    "    os.chmod(path, 0o500)\n"
    "open('/dev/shm/oracle', 'w').write('guess 1')\n"
    "import ctypes\n"
    "shm = ctypes.CDLL(None).shmget(0, 1 << 20, 0o1600)\n"
    "def f():\n    return shm\n"
)
WITNESS = (
    "import os, glob\n"
    "def g():\n"
    "    here = os.getcwd()\n"
    "    return [sorted(p for p in glob.glob('/tmp/*') + glob.glob('/dev/shm/*') if p != here),"
    " open('/proc/sysvipc/shm').read().count('\\n') - 1]\n"
)


def test_a_program_cannot_poison_the_sandbox_for_the_next_ones():
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    calls = lambda name, output: {"fn_name": name, "tests": [{"input": [], "output": output}]}  # noqa: E731
    poisoner, witness, healthy = (
        reward.score([sample])[0]
        for sample in (
            Sample(completion=f"```python\n{POISONER}```", fields=calls("f", -1)),  # SysV IPC is refused
            Sample(completion=f"```python\n{WITNESS}```", fields=calls("g", [[], 0])),
            Sample(completion="```python\ndef add(a, b):\n    return a + b\n```", fields=ADD_CALLS),
        )
    )
    reward.close()
    assert poisoner.value == 1.0, poisoner.details
    assert witness.value == 1.0, witness.details["tests"]  # nothing left in /tmp, /dev/shm or SysV IPC
    assert healthy.value == 1.0


def test_code_in_a_chat_prompt_never_runs_outside_the_sandbox(tmp_path):
    canary = tmp_path / "ran"
    prompt = [
        {"role": "user", "content": "Write add."},
        {"role": "assistant", "content": f"```python\nopen({str(canary)!r}, 'w').write('x')\n```"},
        {"role": "user", "content": "That failed, fix it."},
    ]
    reward = CodeExecutionReward()
    [score] = reward.score(
        [
            Sample(
                prompt=prompt, completion="```python\ndef add(a, b):\n    return a + b\n```", fields=ADD_CHECK
            )
        ]
    )
    reward.close()
    assert score.value == 1.0 and not canary.exists()


def test_big_integers_are_compared_exactly():
    reward = CodeExecutionReward()
    stdio = {"tests": [{"input": "", "output": "1000000000\n"}]}
    calls = {"fn_name": "f", "tests": [{"input": [], "output": 123456789}]}
    near_stdout, near_return = reward.score(
        [Sample(completion="```python\nprint(1000000006)\n```", fields=stdio),
         Sample(completion="```python\ndef f():\n    return 123456700.0\n```", fields=calls)]
    )  # fmt: skip
    reward.close()
    assert near_stdout.value == 0.0 and near_return.value == 0.0


def test_assert_true_lines_are_not_tests():
    check = (
        "def check(candidate):\n    assert candidate(2) == 4\n    assert True, 'filler'\n    assert True\n"
    )
    reward = CodeExecutionReward()
    [score] = reward.score(
        [
            Sample(
                completion="```python\ndef f(*a, **k):\n    return None\n```",
                fields={"test": check, "entry_point": "f"},
            )
        ]
    )
    reward.close()
    assert score.details["tests_total"] == 1 and score.value == 0.0


def test_closing_stops_programs_in_flight():
    import asyncio

    reward = CodeExecutionReward(test_timeout_s=20.0, total_timeout_s=30.0)
    spinner = Sample(
        completion="```python\ndef add(a, b):\n    while True:\n        pass\n```", fields=ADD_CALLS
    )

    async def start_then_close():
        task = asyncio.ensure_future(reward.ascore([spinner]))
        await asyncio.sleep(1.0)
        reward.close()
        return await task

    started = time.monotonic()
    [score] = asyncio.run(start_then_close())
    assert time.monotonic() - started < 8
    assert not score.ok and "worker exited" in score.reason
    assert sandbox_processes() == []


# --- issue 18: what a program of one sample can do to the next ones ---------------------------

#: Ptrace every other process in the sandbox and make it write five forged replies into its fd 1
#: (bwrap's init held the pipe to the grader there): a syscall instruction is found in its code,
#: the lines written at the bottom of its stack, and one ``write`` single-stepped. x86-64 only.
FORGER = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
ATTACH, DETACH, GETREGS, SETREGS, SINGLESTEP, ALL = 16, 17, 12, 13, 9, 0x40000000
class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
        "fs_base gs_base ds es fs gs").split()]
REPLY = {"ok": True, "stdout": "42\n", "output_truncated": False, "exit_code": 0,
         "timed_out": False, "stderr": "", "runtime_s": 0.0}
FORGED = (json.dumps(REPLY) + "\n").encode() * 5
def mappings(pid):
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        yield start, end, fields[1], fields[5] if len(fields) > 5 else ""
def forge(pid, fd):
    if libc.ptrace(ATTACH, pid, None, None) != 0:
        return "refused"
    os.waitpid(pid, ALL)
    saved, regs = Regs(), Regs()
    libc.ptrace(GETREGS, pid, None, ctypes.byref(saved))
    try:
        with open(f"/proc/{pid}/mem", "r+b", 0) as mem:
            code = None
            for start, end, mode, _ in mappings(pid):
                if "x" in mode and code is None:
                    mem.seek(start)
                    at = mem.read(min(end - start, 1 << 22)).find(b"\x0f\x05")
                    code = start + at if at >= 0 else None
            stack = next(start for start, _, _, name in mappings(pid) if name == "[stack]")
            mem.seek(stack)
            kept = mem.read(len(FORGED))
            mem.seek(stack)
            mem.write(FORGED)
            ctypes.memmove(ctypes.byref(regs), ctypes.byref(saved), ctypes.sizeof(Regs))
            regs.rax, regs.orig_rax, regs.rdi, regs.rsi, regs.rdx, regs.rip = (
                1, 2**64 - 1, fd, stack, len(FORGED), code)
            libc.ptrace(SETREGS, pid, None, ctypes.byref(regs))
            libc.ptrace(SINGLESTEP, pid, None, None)
            os.waitpid(pid, ALL)
            libc.ptrace(GETREGS, pid, None, ctypes.byref(regs))
            mem.seek(stack)
            mem.write(kept)
            return f"wrote {regs.rax}"
    finally:
        libc.ptrace(SETREGS, pid, None, ctypes.byref(saved))
        libc.ptrace(DETACH, pid, None, None)
print({pid: forge(int(pid), 1) for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != os.getpid()})
"""
#: Every way to another process's memory or file descriptors: each test passes when one works.
PROBER = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.syscall.restype = ctypes.c_long
OTHERS = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
def readable(pid):
    for line in open(f"/proc/{pid}/maps"):
        if line.split()[1].startswith("r"):
            return int(line.split("-")[0], 16)
def attempt(pid, name):
    try:
        if name == "ptrace":
            if libc.ptrace(16, pid, None, None) == 0:
                libc.ptrace(17, pid, None, None)
                return True
        elif name == "mem":
            with open(f"/proc/{pid}/mem", "rb", 0) as mem:
                mem.seek(readable(pid))
                return len(mem.read(16)) == 16
        elif name == "fds":
            return bool(os.listdir(f"/proc/{pid}/fd"))
        elif name == "vm_read":
            buffer = ctypes.create_string_buffer(16)
            local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 16)
            remote = (ctypes.c_void_p * 2)(readable(pid), 16)
            return libc.syscall(310, pid, local, 1, remote, 1, 0) == 16
        elif name == "getfd":
            pidfd = libc.syscall(434, pid, 0)
            return pidfd >= 0 and libc.syscall(438, pidfd, 1, 0) >= 0
    except OSError:
        pass
    return False
def probe(name):
    return any(attempt(pid, name) for pid in OTHERS)
"""
PROBES = ("ptrace", "mem", "fds", "vm_read", "getfd")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the forger injects x86-64 code")
def test_a_program_cannot_reach_other_processes_or_forge_later_results():
    reward = CodeExecutionReward(workers=1, test_timeout_s=3.0)
    prober = Sample(
        completion=f"```python\n{PROBER}```",
        fields={"fn_name": "probe", "tests": [{"input": [name], "output": True} for name in PROBES]},
    )
    wants_42 = {"tests": [{"input": "", "output": "42"}]}
    forger, *victims = (
        reward.score([Sample(completion=f"```python\n{code}\n```", fields=wants_42)])[0]
        for code in (FORGER, "print(0)", "print(0)", "print(1)")
    )
    [probed] = reward.score([prober])
    reward.close()
    assert forger.value == 0.0 and "refused" in forger.details["tests"][0]["stdout_tail"], forger.details
    assert [(v.status, v.value) for v in victims] == [(Status.OK, 0.0)] * 3, [v.reason for v in victims]
    assert probed.value == 0.0, probed.details["tests"]


#: Scan this process's own memory for an earlier sample's values, made dumpable first (children
#: of a non-dumpable process are not, and /proc then refuses even their own memory to them);
#: ``SELF`` is this program's own marker, which shows that the scan finds what is there.
SCANNER = r"""
import ctypes, re
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
SELF = "SECRET-" + "SELF-" + "0123456789abcdef"
FOUND = []
def scan():
    found = set()
    with open("/proc/self/mem", "rb", 0) as mem:
        for line in open("/proc/self/maps"):
            fields = line.split()
            if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                found.update(re.findall(rb"SECRET-[A-Z]+-[0-9a-f]{16}", mem.read(end - start)))
            except (OSError, OverflowError, ValueError):
                continue
    return found
def find(kind):
    if not FOUND:
        FOUND.append(scan())
    return next((s.decode() for s in sorted(FOUND[0]) if s.startswith(f"SECRET-{kind}-".encode())), None)
"""


def test_no_earlier_sample_is_left_in_a_later_programs_memory():
    secret = {kind: os.urandom(8).hex() for kind in ("ARG", "SOURCE", "STDIN", "RETURN")}
    # The return value is made at run time, so it is in no request: only in the reply.
    earlier_call = (
        f"# SECRET-SOURCE-{secret['SOURCE']}\n"
        f"def f(x):\n    return 'SECRET-RET' + 'URN-' + {secret['RETURN']!r}\n"
    )
    earlier_script = "print(input())"
    reward = CodeExecutionReward(workers=1, test_timeout_s=3.0)
    first, second = reward.score(
        [Sample(completion=f"```python\n{earlier_call}```",
                fields={"fn_name": "f", "tests": [{"input": [f"SECRET-ARG-{secret['ARG']}"], "output": 0}]}),
         Sample(completion=f"```python\n{earlier_script}\n```",
                fields={"tests": [{"input": f"SECRET-STDIN-{secret['STDIN']}", "output": "0"}]})]
    )  # fmt: skip
    expected = {**{kind: f"SECRET-{kind}-{value}" for kind, value in secret.items()},
                "SELF": "SECRET-SELF-0123456789abcdef"}  # fmt: skip
    tests = [{"input": [kind], "output": value} for kind, value in expected.items()]
    scanner = Sample(completion=f"```python\n{SCANNER}```", fields={"fn_name": "find", "tests": tests})
    [scan] = reward.score([scanner])
    reward.close()
    assert first.ok and second.ok
    outcomes = {kind: test["outcome"] for kind, test in zip(expected, scan.details["tests"], strict=True)}
    assert outcomes == {**dict.fromkeys(secret, "failed"), "SELF": "passed"}, scan.details["tests"]


def test_huge_integers_are_judged_exactly_and_never_crash_the_grader():
    program = "def f(x):\n    return x if x < 10 else 10 ** (5000 if x < 30 else 400)\n"
    fields = {
        "fn_name": "f",
        "tests": [
            {"input": [1], "output": 1},
            {"input": [20], "output": 1},  # 10**5000: more digits than str() converts
            {"input": [40], "output": 0.5},  # 10**400: too large for a float
            {"input": [2], "output": 2},
        ],
    }
    check = "def check(candidate):\n    assert candidate(20) == 10 ** 5001\n    assert candidate(1) == 1\n"
    asserts = {"entry_point": "f", "test": check}
    reward = CodeExecutionReward()
    calls, checked = reward.score(
        [Sample(completion=f"```python\n{program}```", fields=fields),
         Sample(completion=f"```python\n{program}```", fields=asserts)]
    )  # fmt: skip
    reward.close()
    assert (calls.status, calls.value) == (Status.OK, 0.5), calls.reason
    reasons = [test["reason"] for test in calls.details["tests"]]
    assert "got <int of about 5001 digits>" in reasons[1] and "got 1000000" in reasons[2], reasons
    assert (checked.status, checked.value) == (Status.OK, 0.5), checked.reason


#: Sends 40 sets of 10,000 integers sharing one hash (``1 + k * (2**61 - 1)``) in place of its
#: real return value, by replacing the runner's encoder.
HASH_FLOODER = (
    "import sys\n"
    "sys.modules['__main__'].encode = lambda value, depth=0: "
    "[{'set': [1 + k * (2**61 - 1) for k in range(1, 10_001)]} for _ in range(40)]\n"
    "def f():\n    return 1\n"
)
#: The same integers as a list, which MBPP-style tests hash themselves (``set(candidate(...))``).
HASH_LIST = (
    "import sys\n"
    "sys.modules['__main__'].encode = lambda value, depth=0: "
    "[1 + k * (2**61 - 1) for k in range(1, 200_001)]\n"
    "def f():\n    return 1\n"
)


def test_values_built_to_collide_in_hash_tables_cost_the_grader_little():
    reward = CodeExecutionReward(test_timeout_s=3.0, total_timeout_s=30.0)
    started = time.monotonic()
    sets, listed = reward.score(
        [Sample(completion=f"```python\n{HASH_FLOODER}```",
                fields={"fn_name": "f", "tests": [{"input": [], "output": 1}] * 3}),
         Sample(completion=f"```python\n{HASH_LIST}```",
                fields={"test_list": ["assert set(f()) == {1}"] * 3})]
    )  # fmt: skip
    elapsed = time.monotonic() - started
    reward.close()
    assert (sets.status, sets.value) == (Status.OK, 0.0), sets.reason
    assert (listed.status, listed.value) == (Status.OK, 0.0), listed.reason
    assert elapsed < 15, elapsed


#: Four children each hold 100 MiB at once, 400 MiB in all, under a 256 MiB limit that
#: ``RLIMIT_AS`` applies to each process alone. Passes when all four held it together.
FORKED_HOARD = r"""
import os, select, time
def hoard():
    ready_read, ready_write = os.pipe()
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            block = b"x" * (100 << 20)
            os.write(ready_write, b".")
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    ready, deadline = 0, time.monotonic() + 5
    while ready < 4 and select.select([ready_read], [], [], max(0, deadline - time.monotonic()))[0]:
        ready += len(os.read(ready_read, 4))
    held = 0
    for pid in children:
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        if "State:\tZ" not in status:
            held += int(status.split("VmRSS:")[1].split()[0]) >> 10
    return held >= 400
"""


def test_memory_is_capped_for_the_whole_sandbox_not_per_process():
    reward = CodeExecutionReward(test_timeout_s=6.0, limits={"memory_bytes": 256 << 20})
    [score] = reward.score(
        [Sample(completion=f"```python\n{FORKED_HOARD}```",
                fields={"fn_name": "hoard", "tests": [{"input": [], "output": True}]})]
    )  # fmt: skip
    reward.close()
    if score.details["memory_limit"] == "per_process":
        pytest.skip("no memory cgroup can be made here: each process has only its own RLIMIT_AS")
    assert score.ok and score.value == 0.0, score.details["tests"]


def test_stop_iteration_does_not_end_a_check_early():
    # map() reads a StopIteration from the function it calls as the end of its input: all()
    # then sees no item and passes.
    check = (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert all(map(lambda x: candidate(x) == 2 * x, [1, 2, 3]))\n"
    )
    program = "def f(x):\n    if x == 1:\n        return 2\n    raise StopIteration\n"
    reward = CodeExecutionReward()
    [score] = reward.score(
        [Sample(completion=f"```python\n{program}```", fields={"test": check, "entry_point": "f"})]
    )
    reward.close()
    assert score.value == 0.5, score.details["tests"]


#: What a program may learn of where it runs: the same in every program, and no host path.
SURROUNDINGS = r"""
import hashlib, os, tempfile
def seen():
    mounts = open("/proc/self/mountinfo").read()
    return hashlib.sha256((os.getcwd() + mounts + open("/proc/self/cgroup").read()).encode()).hexdigest()
def host_path_seen():
    mounts = open("/proc/self/mountinfo").read()
    return "rewardlab" in mounts or tempfile.gettempdir() + "/" in mounts
"""


def test_a_program_cannot_tell_how_many_ran_before_it_or_where_it_runs_on_the_host():
    reward = CodeExecutionReward(workers=1)
    sample = Sample(
        completion=f"```python\n{SURROUNDINGS}```",
        fields={"fn_name": "seen", "tests": [{"input": [], "output": "?"}]},
    )
    seen = [reward.score([sample])[0].details["tests"][0]["reason"] for _ in range(3)]
    [host] = reward.score(
        [Sample(completion=f"```python\n{SURROUNDINGS}```",
                fields={"fn_name": "host_path_seen", "tests": [{"input": [], "output": True}]})]
    )  # fmt: skip
    reward.close()
    assert len(set(seen)) == 1, seen
    assert host.value == 0.0


def test_a_reply_the_runner_did_not_write_is_refused():
    # Whatever reaches the pipe from the sandbox, here a line written into it from outside: the
    # session must not read it as the reply to its next request.
    session = SandboxSession(Sandbox())
    try:
        loaded = session.request({"op": "program", "source": "def f():\n    return 1\n", "timeout": 5}, 10)
        assert loaded["ok"] and session.clean()
        forged = os.open(f"/proc/{session.process.pid}/fd/1", os.O_WRONLY)
        os.write(forged, b'{"ok": true, "value": 42}\n')
        os.close(forged)
        assert not session.clean()
        with pytest.raises(SessionEnded, match="did not write"):
            session.request({"op": "call", "name": "f", "args": [], "kwargs": {"dict": []}, "timeout": 5}, 10)
    finally:
        session.close()


EXPECTS_TYPE_ERROR = (
    "def check(candidate):\n"
    "    try:\n        candidate(1)\n"
    "    except TypeError:\n        pass\n"
    "    else:\n        raise AssertionError('no TypeError')\n"
)


@pytest.mark.parametrize(
    "program",
    [
        # The grader makes builtins.UnicodeDecodeError from the name, which needs five arguments.
        "class UnicodeDecodeError(Exception):\n    pass\ndef f(x):\n    raise UnicodeDecodeError('x')\n",
        # A reply that is not an encoded value.
        "import sys\nsys.modules['__main__'].encode = lambda value, depth=0: {'tuple': 5}\n"
        "def f(x):\n    return 1\n",
        "import sys\nsys.modules['__main__'].encode = lambda value, depth=0: {'set': [[1]]}\n"
        "def f(x):\n    return 1\n",
    ],
)
def test_the_graders_own_errors_never_pass_for_the_programs(program):
    reward = CodeExecutionReward()
    fields = {"test": EXPECTS_TYPE_ERROR, "entry_point": "f"}
    [score] = reward.score([Sample(completion=f"```python\n{program}```", fields=fields)])
    reward.close()
    assert (score.status, score.value) == (Status.OK, 0.0), score.details["tests"]


@pytest.mark.parametrize(
    "replacement",
    [
        "os.mkfifo('script-out')",  # the runner would wait for a writer
        "os.symlink('/proc/2/fd/3', 'script-out')",  # a descriptor of the runner's own
        "os.symlink('/proc/2/cmdline', 'script-out')",
    ],
)
def test_an_output_file_replaced_by_the_program_reads_as_empty(replacement):
    program = f"import os\nprint(42)\nos.unlink('script-out')\n{replacement}\n"
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    [score] = reward.score(
        [Sample(completion=f"```python\n{program}```", fields={"tests": [{"input": "", "output": "42"}]})]
    )
    reward.close()
    assert score.details["tests"][0]["outcome"] == "failed", score.details["tests"]
    assert score.details["tests"][0]["stdout_tail"] == ""


def test_what_a_program_writes_into_its_replies_is_shown_clipped():
    program = (
        "import sys\nrunner = sys.modules['__main__']\n"
        "runner._error_text = lambda error: 'E' * 5_000_000\n"
        "raise ValueError\n"
    )
    reward = CodeExecutionReward()
    fields = {"fn_name": "f", "tests": [{"input": [], "output": 1}]}
    [score] = reward.score([Sample(completion=f"```python\n{program}```", fields=fields)])
    reward.close()
    assert score.value == 0.0 and len(repr(score.details)) + len(score.reason) < 5_000


# --- red-team round 9: state a program leaves in the sandbox for the next ones -----------------


def one_by_one(reward, *samples):
    """Each sample scored alone, in order: with one worker they share one sandbox in turn."""
    return [reward.score([sample])[0] for sample in samples]


def calls_sample(code, name, output, args=()):
    fields = {"fn_name": name, "tests": [{"input": list(args), "output": output}]}
    return Sample(completion=f"```python\n{code}```", fields=fields)


#: Lowers the limits of the sandbox's first process (which forks every later program) and of the
#: relay (pid 2): every later program would inherit the first, and the second would kill the
#: relay in the middle of a later program. Returns what the kernel allowed.
LIMIT_POISONER = r"""
import resource
def poison():
    lowered = []
    for pid in (1, 2):
        for limit, soft in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NOFILE, 8),
                            (resource.RLIMIT_CPU, 1)):
            try:
                resource.prlimit(pid, limit, (soft, resource.prlimit(pid, limit)[1]))
            except OSError:
                continue
            lowered.append([pid, limit])
    return lowered
"""
#: Writes a file and holds 20 open at once: within the default limits, not within the lowered.
OPENS_FILES = """
def f():
    files = [open(f"/tmp/f{i}", "w") for i in range(20)]
    return files[0].write("x" * 100)
"""
ADD_STDIO = "a, b = map(int, input().split())\nprint(a + b)\n"


def test_a_program_cannot_lower_the_limits_that_later_programs_inherit():
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    poisoner, stdio, files = one_by_one(
        reward,
        calls_sample(LIMIT_POISONER, "poison", []),
        Sample(completion=f"```python\n{ADD_STDIO}```", fields=SUM_STDIO),
        calls_sample(OPENS_FILES, "f", 100),
    )
    reward.close()
    assert poisoner.value == 1.0, poisoner.details["tests"]  # every attempt was refused
    assert stdio.value == 1.0, stdio.details["tests"]
    assert files.value == 1.0, files.details["tests"]


#: Sets up an io_uring, whose requests (a socket among them, opcode 45) run without the syscalls
#: the seccomp filter sees; returns the errno the kernel gave.
IO_URING = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def setup():
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 8, params)  # io_uring_setup, on x86-64 and AArch64 alike
    return 0 if fd >= 0 else ctypes.get_errno()
"""


def test_io_uring_is_refused():
    """A program opened an IPv4 socket through io_uring, past the filter's socket rule, and left a
    port number in /proc/net/tcp for the next program (red-team round 11)."""
    reward = CodeExecutionReward(workers=1)
    [score] = reward.score([calls_sample(IO_URING, "setup", errno.EPERM)])
    reward.close()
    assert score.value == 1.0, score.details["tests"]


#: Makes the sandbox's first process and the relay nice 19, SCHED_IDLE, idle-class I/O and bound
#: to one CPU, all of which a fork inherits; and its own session's autogroup nice 19 (sched(7),
#: "The autogroup feature"), which every process of the session shares. Returns what the kernel
#: allowed of the first kind (the last is its own, and allowed).
SCHEDULING_POISONER = r"""
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}[platform.machine()]
def ioprio_idle(pid):
    if libc.syscall(IOPRIO_SET, 1, pid, 3 << 13) != 0:
        raise OSError(ctypes.get_errno(), "ioprio_set")
ATTEMPTS = {
    "nice": lambda pid: os.setpriority(os.PRIO_PROCESS, pid, 19),
    "idle": lambda pid: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)),
    "one cpu": lambda pid: os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))}),
    "idle io": ioprio_idle,
}
def poison():
    changed = []
    for pid in (1, 2):
        for name, attempt in ATTEMPTS.items():
            try:
                attempt(pid)
            except OSError:
                continue
            changed.append(f"{name} {pid}")
    try:
        os.setpriority(os.PRIO_USER, 0, 19)
        changed.append("nice for the whole user")
    except OSError:
        pass
    libc.prctl(4, 1, 0, 0, 0)  # dumpable: its own /proc files become writable to it
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write("19")
    except FileNotFoundError:  # a kernel without autogroups
        pass
    return changed
"""
SCHEDULING_OBSERVER = r"""
import ctypes, os, platform
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}[platform.machine()]
def seen():
    autogroup = "0"
    if os.path.exists("/proc/self/autogroup"):  # a kernel with autogroups
        autogroup = open("/proc/self/autogroup").read().split()[-1]
    return [os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), sorted(os.sched_getaffinity(0)),
            ctypes.CDLL(None).syscall(IOPRIO_GET, 1, 0) >> 13 == 3, autogroup]
"""
#: What the observer sees unpoisoned: nice 0, SCHED_OTHER, every CPU this process may use (the
#: sandbox inherits it), not idle-class I/O, autogroup nice 0.
UNPOISONED = [0, os.SCHED_OTHER, sorted(os.sched_getaffinity(0)), False, "0"]


def test_a_program_cannot_change_how_later_programs_are_scheduled():
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    poisoner, observer = one_by_one(
        reward,
        calls_sample(SCHEDULING_POISONER, "poison", []),
        calls_sample(SCHEDULING_OBSERVER, "seen", UNPOISONED),
    )
    reward.close()
    assert poisoner.value == 1.0, poisoner.details["tests"]  # every attempt on another process was refused
    assert observer.value == 1.0, observer.details["tests"]


#: Leaves what it can on the scratch roots, which the relay empties but keeps: extended
#: attributes, an access control list, inode flags (chattr(1): no-atime, no-dump), times far in
#: the future (relatime never moves an atime back) and a mode; and in the namespaces the
#: sandbox keeps: IPC and PID limits (/proc/sys/kernel), and a TCP connection closed on
#: loopback, which stays in TIME_WAIT for a minute and lists its port in /proc/net/tcp.
SCRATCH_WRITER = r"""
import fcntl, os, socket, struct
FS_IOC_SETFLAGS, NOATIME, NODUMP = 0x40086602, 0x80, 0x40
ACL = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, 7, uid) for tag, uid in
      ((1, 0xFFFFFFFF), (2, os.getuid()), (4, 0xFFFFFFFF), (0x10, 0xFFFFFFFF), (0x20, 0xFFFFFFFF)))
def attempts(root, secret):
    yield lambda: os.setxattr(root, "user.secret", secret.encode())
    yield lambda: os.setxattr(root, "system.posix_acl_access", ACL)
    yield lambda: os.setxattr(root, "system.posix_acl_default", ACL)
    yield lambda: fcntl.ioctl(os.open(root, os.O_RDONLY), FS_IOC_SETFLAGS, struct.pack("i", NOATIME | NODUMP))
    yield lambda: os.utime(root, (4_000_012_345, 4_000_012_345))
    yield lambda: os.chmod(root, 0o1777)
def loopback_time_wait():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.socket()
    client.bind(("127.0.0.1", 45678))
    client.connect(server.getsockname())
    server.accept()[0].close()
    client.close()
def store(secret):
    done = 0
    for attempt in [a for root in ("/tmp", "/dev/shm") for a in attempts(root, secret)] + [
        lambda: open("/proc/sys/kernel/shmmax", "w").write("12345"),
        lambda: open("/proc/sys/kernel/pid_max", "w").write("4321"),
        loopback_time_wait,
    ]:
        try:
            attempt()
            done += 1
        except OSError:
            pass
    return done
"""
SCRATCH_READER = r"""
import fcntl, os, struct
FS_IOC_GETFLAGS = 0x80086601
def found():
    left = []
    for root in ("/tmp", "/dev/shm"):
        info = os.stat(root)
        left += [f"{root} {name}" for name in os.listxattr(root)]
        if struct.unpack("i", fcntl.ioctl(os.open(root, os.O_RDONLY), FS_IOC_GETFLAGS, bytes(4)))[0]:
            left.append(f"{root} flags")
        if max(info.st_atime, info.st_mtime) > 4_000_000_000:
            left.append(f"{root} times")
        if info.st_mode & 0o7077:
            left.append(f"{root} mode {info.st_mode:o}")
    for name, planted in (("shmmax", "12345"), ("pid_max", "4321")):
        if open(f"/proc/sys/kernel/{name}").read().strip() == planted:
            left.append(name)
    left += open("/proc/net/tcp").read().splitlines()[1:] + open("/proc/net/tcp6").read().splitlines()[1:]
    return left
"""


def test_nothing_a_program_leaves_on_the_scratch_roots_or_in_the_namespaces_reaches_the_next():
    reward = CodeExecutionReward(workers=1, test_timeout_s=2.0)
    writer, reader = one_by_one(
        reward,
        calls_sample(SCRATCH_WRITER, "store", -1, args=["earlier-sample-argument"]),
        calls_sample(SCRATCH_READER, "found", []),
    )
    reward.close()
    # It set at least a user attribute and the times of both roots (any tmpfs allows those).
    assert int(writer.details["tests"][0]["reason"].rsplit("got ", 1)[1]) >= 4, writer.details["tests"]
    assert reader.value == 1.0, reader.details["tests"]


#: Reads what /proc tells of the sandbox's own two processes (their context switches, CPU time
#: and peak memory counted the programs and tests that ran before and the size of earlier
#: replies); and, as hiding them takes the runner capabilities at its start, which of those it
#: holds and which namespaces it can make (user, mount, PID).
PROC_SPY = r"""
import ctypes
def spy():
    readable = []
    for pid in (1, 2):
        for name in ("status", "stat", "schedstat", "limits", f"task/{pid}/status"):
            try:
                open(f"/proc/{pid}/{name}").read()
            except OSError:
                continue
            readable.append(f"{pid}/{name}")
    capabilities = [line.split()[1] for line in open("/proc/self/status") if line.startswith("Cap")]
    made = [flag for flag in (0x10000000, 0x20000, 0x20000000) if ctypes.CDLL(None).unshare(flag) == 0]
    return [readable, capabilities, made]
"""


def test_a_program_cannot_read_the_runners_own_processes_in_proc():
    reward = CodeExecutionReward(workers=1)
    [spy] = reward.score([calls_sample(PROC_SPY, "spy", [[], ["0" * 16] * 5, []])])
    reward.close()
    assert spy.value == 1.0, spy.details["tests"]


def test_the_sandbox_user_says_nothing_of_the_host_and_no_two_workers_share_one():
    if os.geteuid() != 0:
        pytest.skip("sandboxes run as the calling user when rewardlab is not root")
    # The program is uid 0 of its user namespace; uid_map says which uid that is on the host.
    program = "def uid():\n    return int(open('/proc/self/uid_map').read().split()[1])\n"
    with SandboxSession(Sandbox()) as session:  # this process starts it, as a pool worker would
        session.request({"op": "program", "source": program}, 10)
        reply = session.request({"op": "call", "name": "uid", "args": [], "kwargs": {"dict": []}}, 10)
    uid = reply["value"]
    assert UID_RANGE[0] <= uid < UID_RANGE[1] and uid != UID_RANGE[0] + os.getpid()
    held, other = claim_uid([uid]), UID_RANGE[0] + (uid + 1 - UID_RANGE[0]) % (UID_RANGE[1] - UID_RANGE[0])
    assert held is None  # this process holds it already
    second = claim_uid([uid, other])
    assert second is not None and second[0] == other
    second[1].close()


@pytest.mark.parametrize(
    "source",
    [
        "x = " + "-" * 100_000 + "1\ndef f():\n    return 1\n",  # MemoryError in the parser
        "f" + "()" * 100_000 + "\ndef f():\n    return 1\n",  # RecursionError in the compiler
    ],
)
def test_a_program_that_breaks_the_compiler_fails_once_as_a_compile_error(source):
    reward = CodeExecutionReward(workers=1)
    fields = {"fn_name": "f", "tests": [{"input": [], "output": 1}] * 20}
    [score] = reward.score([Sample(completion=f"```python\n{source}```", fields=fields)])
    reward.close()
    assert score.ok and score.value == 0.0
    load_error = score.details["load_error"]
    assert load_error == f"compile_error: {TOO_COMPLEX_TO_COMPILE}", load_error
    assert score.details["tests"][-1]["reason"] == load_error


@pytest.mark.parametrize(
    ("poisoner", "victim", "victim_fields"),
    [
        (calls_sample(LIMIT_POISONER, "poison", []), ADD_STDIO, SUM_STDIO),
        (
            calls_sample(SCHEDULING_POISONER, "poison", []),
            SCHEDULING_OBSERVER,
            {"fn_name": "seen", "tests": [{"input": [], "output": UNPOISONED}]},
        ),
    ],
    ids=["limits", "scheduling"],
)
def test_without_the_seccomp_filter_the_runner_still_keeps_a_poisoned_sandbox_from_later_programs(
    monkeypatch, poisoner, victim, victim_fields
):
    # Architectures other than x86-64 and AArch64 run without the filter: there the calls go
    # through, and the runner itself must see the change when it resets and end the sandbox.
    monkeypatch.setattr(session_module, "sandbox_filter", lambda: None)
    sandbox, limits = Sandbox(), {"test_timeout_s": 2.0, "total_timeout_s": 10.0, "tolerance": 0.0}
    try:
        attack = poisoner.completion.split("```python\n")[1].split("```")[0]
        poisoned = run_program(attack, read_tests(poisoner.fields), sandbox, **limits)
        later = run_program(victim, read_tests(victim_fields), sandbox, **limits)
    finally:
        harness._close_sessions()
    assert poisoned.outcomes[0].outcome == "failed", poisoned.outcomes  # the calls went through
    assert later.passed == len(later.outcomes), later.outcomes
