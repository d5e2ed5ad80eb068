"""Hostile programs: each one is contained, earns no pass it did not earn, leaves the worker pool
working and changes nothing outside its sandbox.

Every hostile program below is scored against tests it would pass if its trick worked: the
expected outputs are things only cheating can produce (a secret from the environment, a file
on the host, "connected"), or the trick targets the harness itself (exit 0 before the tests,
a patched ``assert``, an object equal to everything).
"""

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from rewardlab import Sample
from rewardlab.rewards.code.reward import CodeExecutionReward
from rewardlab.rewards.code.sandbox import UID_RANGE

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
