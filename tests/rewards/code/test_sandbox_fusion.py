"""The SandboxFusion backend against a real HTTP server on 127.0.0.1 that speaks ``/run_code``'s
wire format (bytedance/SandboxFusion ``sandbox/server/sandbox_api.py``): python programs really
run, in a subprocess (these are the tests' own programs); canned answers script the failures."""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from rewardlab import Sample, Status, build
from rewardlab.errors import ConfigError, SandboxUnavailable
from rewardlab.rewards.code.cases import read_tests
from rewardlab.rewards.code.reward import CodeExecutionReward
from rewardlab.rewards.code.sandbox import Sandbox
from rewardlab.rewards.code.sandbox_fusion import (
    RemoteFailure,
    SandboxFusion,
    SandboxFusionOptions,
    _marked_reply,
    execute_remote,
)
from rewardlab.testing import _LocalServer
from tests.adversarial_text import CATALOGUE


class FakeSandboxFusion(_LocalServer):
    """``POST /run_code`` as SandboxFusion answers it. Each request is recorded; while ``script``
    holds canned answers ``(status, body, delay_s)`` they are sent instead of running the code.
    Served on 127.0.0.1 from a thread while in a ``with`` block, as `rewardlab.testing`'s
    scripted servers are."""

    def __init__(self, *script):
        super().__init__()
        self.script = list(script)
        self.requests = []

    def app(self):
        from fastapi import FastAPI, Request
        from fastapi.responses import Response

        app = FastAPI()

        @app.post("/run_code")
        async def run_code(request: Request):
            self.requests.append(json.loads(await request.body()))
            if self.script:
                status, body, delay_s = self.script.pop(0)
                await asyncio.sleep(delay_s)
                return Response(body, status_code=status, media_type="application/json")
            answer = await asyncio.to_thread(self.run, self.requests[-1])
            return Response(json.dumps(answer), media_type="application/json")

        return app

    @staticmethod
    def run(request):
        """What SandboxFusion's runners do: compile (C++), run the file with the stdin, and
        answer with ``parse_run_status``'s status (a non-zero exit or a timeout is ``Failed``)."""
        with tempfile.TemporaryDirectory() as workdir:
            source = {"python": "main.py", "cpp": "main.cpp", "nodejs": "main.js"}[request["language"]]
            with open(f"{workdir}/{source}", "w") as file:
                file.write(request["code"])
            compile_result = None
            if request["language"] == "cpp":
                command = ["g++", "-std=c++17", "-O1", "-o", f"{workdir}/main", f"{workdir}/{source}"]
                compile_result = command_result(command, "", request["compile_timeout"])
                if compile_result["status"] != "Finished" or compile_result["return_code"] != 0:
                    return {
                        "status": "Failed",
                        "message": "",
                        "compile_result": compile_result,
                        "run_result": None,
                    }
            command = {
                "python": [sys.executable, f"{workdir}/{source}"],
                "cpp": [f"{workdir}/main"],
                "nodejs": ["node", f"{workdir}/{source}"],
            }[request["language"]]
            run_result = command_result(command, request["stdin"] or "", request["run_timeout"])
        failed = run_result["status"] != "Finished" or run_result["return_code"] != 0
        return {"status": "Failed" if failed else "Success", "message": "",
                "compile_result": compile_result, "run_result": run_result}  # fmt: skip


def command_result(command, stdin, timeout_s):
    """A ``CommandRunResult`` of SandboxFusion (``sandbox/runners/types.py``)."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, check=False, input=stdin, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return {"status": "TimeLimitExceeded", "execution_time": timeout_s, "return_code": None,
                "stdout": "", "stderr": ""}  # fmt: skip
    return {"status": "Finished", "execution_time": time.monotonic() - started,
            "return_code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}  # fmt: skip


def backend(url, language="python", **options):
    settings = {"retries": 2, "backoff_s": 0.0, **options}
    return SandboxFusion.connect(SandboxFusionOptions(url=url, **settings), language, 256 << 20, 20.0)


def run(remote, source, fields, test_timeout_s=5.0, total_timeout_s=30.0):
    extraction = {"whole": True}
    return execute_remote(
        source, extraction, read_tests(fields), remote, (test_timeout_s, total_timeout_s, 1e-6)
    )


SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
SUM_TESTS = {
    "tests": [{"input": "20 22\n", "output": "42\n"}, {"input": "400000 24242\n", "output": "424242"}]
}


def outcomes(report):
    return [(o.outcome, o.reason) for o in report.outcomes]


def test_stdio_tests_run_remotely_and_are_judged_here():
    with FakeSandboxFusion() as server:
        method, right = run(backend(server.url), SUM, SUM_TESTS)
        _, wrong = run(backend(server.url), SUM.replace("a + b", "a - b"), SUM_TESTS)
    assert method == "prompt_and_completion"
    assert outcomes(right) == [("passed", None), ("passed", None)]
    assert outcomes(wrong) == [
        ("failed", "expected '42\\n', got '-2\\n'"),
        ("failed", "expected '424242', got '375758\\n'"),
    ]
    assert right.memory_limit == "sandbox_fusion (256 MB)"
    sent = [json.dumps(request) for request in server.requests]
    assert len(sent) == 4
    # The guarantee: only the program and the stdin travel; the expected output never does.
    assert not any("424242" in request for request in sent)
    assert json.loads(sent[1])["stdin"] == "400000 24242\n" and json.loads(sent[1])["memory_limit_MB"] == 256


def test_numbers_are_compared_with_the_tolerance_here():
    fields = {"tests": [{"input": "", "output": "0.333333333\n"}, {"input": "", "output": "7\n"}]}
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), "print(1/3 + 1e-10)\n", fields)
    assert outcomes(report) == [("passed", None), ("failed", "expected '7\\n', got '0.3333333334333333\\n'")]


def test_a_run_past_its_time_limit_fails_that_test():
    program = "import sys\nn = int(sys.stdin.read())\nwhile n < 0:\n    pass\nprint(n)\n"
    fields = {"tests": [{"input": "-1", "output": "-1"}, {"input": "5", "output": "5"}]}
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), program, fields, test_timeout_s=0.5)
    assert outcomes(report) == [("timeout", "the program ran past its time limit"), ("passed", None)]
    assert server.requests[0]["run_timeout"] == 0.5


def test_a_crash_is_an_error_with_the_stderr():
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), "raise SystemExit('no input today')\n", SUM_TESTS)
    assert [o.outcome for o in report.outcomes] == ["error", "error"]
    assert report.outcomes[0].reason == "exited with code 1: no input today\n"


CALL_TESTS = {
    "fn_name": "pair",
    "tests": [{"input": [1, 2], "output": [2, 1]}, {"input": [0, 5], "output": [5, 0]}],
}


def test_function_calls_return_values_that_are_judged_here():
    program = (
        "def pair(a, b):\n    print('chatter', a)\n"
        "    if a == 0:\n        raise ValueError('zero')\n    return (b, a)\n"
    )
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), program, CALL_TESTS)
    assert outcomes(report) == [("passed", None), ("error", "ValueError: zero")]
    assert report.output_tail == "chatter 0\n"
    assert all("[5, 0]" not in request["code"] + request["stdin"] for request in server.requests)


def test_leetcode_style_solution_classes_and_missing_functions():
    solution = "class Solution:\n    def pair(self, a, b):\n        return [b, a]\n"
    with FakeSandboxFusion() as server:
        _, found = run(backend(server.url), solution, CALL_TESTS)
        _, missing = run(backend(server.url), "def other():\n    pass\n", CALL_TESTS)
    assert outcomes(found) == [("passed", None), ("passed", None)]
    assert outcomes(missing) == [("error", "ProgramFailure: no function named 'pair'")] * 2


def test_a_program_that_does_not_load_fails_every_call_after_one_request():
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), "def pair(a, b)\n    return b, a\n", CALL_TESTS)
    assert [o.outcome for o in report.outcomes] == ["error", "error"]
    assert report.load_error.startswith("load_error: SyntaxError: expected ':'")
    assert len(server.requests) == 1


def test_assert_tests_run_here_with_values_that_keep_their_types():
    fields = {
        "test": "def check(candidate):\n"
        "    assert candidate((1, 2)) == (2, 1)\n"
        "    assert candidate({3}) == {3}\n"
        "    assert candidate(10**40) == 10**40 + 1\n",
        "entry_point": "bump",
    }
    program = (
        "def bump(x):\n"
        "    if isinstance(x, tuple):\n        return x[::-1]\n"
        "    if isinstance(x, set):\n        return x\n"
        "    return x + 2\n"
    )
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url), program, fields)
    assert [o.outcome for o in report.outcomes] == ["passed", "passed", "failed"]
    assert report.outcomes[2].reason == "assertion failed"
    assert len(server.requests) == 3


def test_a_compile_error_fails_every_test_after_one_request():
    compile_error = {
        "status": "Failed",
        "message": "",
        "compile_result": {"status": "Finished", "execution_time": 0.4, "return_code": 1,
                           "stdout": "", "stderr": "main.cpp:1:1: error: 'x' does not name a type"},
        "run_result": None,
    }  # fmt: skip
    fields = {"tests": [{"input": str(i), "output": str(i)} for i in range(3)]}
    with FakeSandboxFusion((200, json.dumps(compile_error), 0.0)) as server:
        _, report = run(backend(server.url, language="cpp"), "x y;\n", fields)
    reason = "compile_error: main.cpp:1:1: error: 'x' does not name a type"
    assert outcomes(report) == [("error", reason)] * 3
    assert report.load_error == reason
    assert len(server.requests) == 1 and server.requests[0]["language"] == "cpp"


def needs(*tools):
    """Skip where the fake server cannot run a language (g++, node), except in CI (``CI=1``)."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return pytest.mark.skipif(bool(missing) and not os.environ.get("CI"), reason=f"{missing} not installed")


def test_a_compile_past_its_time_limit_is_a_timeout_of_every_test():
    slow_compile = {"status": "Failed", "message": "", "run_result": None,
                    "compile_result": {"status": "TimeLimitExceeded", "execution_time": 20.0}}  # fmt: skip
    fields = {"tests": [{"input": "1", "output": "1"}, {"input": "2", "output": "2"}]}
    with FakeSandboxFusion((200, json.dumps(slow_compile), 0.0)) as server:
        _, report = run(backend(server.url, language="cpp"), "template <int N> struct F;\n", fields)
    assert outcomes(report) == [("timeout", "compile_timeout: compiling ran past its time limit")] * 2
    assert server.requests[0]["compile_timeout"] == 20.0 and len(server.requests) == 1


@needs("g++", "node")
def test_cpp_and_javascript_programs_compile_and_run_remotely():
    cpp = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a * b << '\\n'; }\n"
    js = 'const [a, b] = require("fs").readFileSync(0, "utf8").split(" ").map(Number);\nconsole.log(a * b);\n'
    fields = {
        "tests": [{"input": "6 7", "output": "42"}, {"input": "100000 100000", "output": "10000000000"}]
    }
    with FakeSandboxFusion() as server:
        _, compiled = run(backend(server.url, language="cpp"), cpp, fields, test_timeout_s=10.0)
        _, interpreted = run(backend(server.url, language="javascript"), js, fields)
    assert outcomes(compiled) == [("passed", None), ("passed", None)]
    assert outcomes(interpreted) == [("passed", None), ("passed", None)]
    assert [request["language"] for request in server.requests] == ["cpp", "cpp", "nodejs", "nodejs"]


@needs("node")
def test_javascript_function_calls_go_through_the_languages_harness():
    js = "function pair(a, b) {\n  console.log('chatter');\n  return [b, a];\n}\n"
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url, language="javascript"), js, CALL_TESTS)
    assert outcomes(report) == [("passed", None), ("passed", None)]
    assert [request["stdin"] for request in server.requests] == ["[1, 2]", "[0, 5]"]


def test_tests_a_language_cannot_take_are_refused_before_anything_is_sent():
    asserts = {"test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "same"}
    with FakeSandboxFusion() as server:
        _, assert_tests = run(
            backend(server.url, language="javascript"), "function same(x) { return x; }", asserts
        )
        _, ruby_calls = run(backend(server.url, language="ruby"), "def pair(a, b) = [b, a]", CALL_TESTS)
    assert assert_tests == RemoteFailure(
        "invalid_input", "fields: assert tests are Python code and cannot test a javascript program"
    )
    assert ruby_calls == RemoteFailure(
        "invalid_input", "fields: only stdin/stdout tests can judge a ruby program"
    )
    assert server.requests == []


def test_a_server_error_is_retried_then_the_run_succeeds():
    with FakeSandboxFusion((500, "Internal Server Error", 0.0), (504, "", 0.0)) as server:
        _, report = run(backend(server.url), SUM, SUM_TESTS)
    assert outcomes(report) == [("passed", None), ("passed", None)]
    assert len(server.requests) == 4  # the first test three times, the second once


def test_a_server_that_keeps_failing_is_a_backend_error_naming_the_url():
    sandbox_error = json.dumps({"status": "SandboxError", "message": "executor pod gone", "run_result": None})
    with FakeSandboxFusion(*[(200, sandbox_error, 0.0)] * 3) as server:
        _, failure = run(backend(server.url), SUM, SUM_TESTS)
    assert failure == RemoteFailure(
        "backend_error", f"POST {server.url}/run_code: SandboxError: executor pod gone (after 3 attempts)"
    )
    assert len(server.requests) == 3


def test_a_malformed_or_refused_answer_is_not_retried():
    with FakeSandboxFusion(
        (200, "<html>proxy</html>", 0.0), (422, '{"detail": "bad language"}', 0.0)
    ) as server:
        _, malformed = run(backend(server.url), SUM, SUM_TESTS)
        _, refused = run(backend(server.url), SUM, SUM_TESTS)
    assert malformed.status == "backend_error"
    assert malformed.reason.startswith(f"POST {server.url}/run_code: not JSON (Expecting value")
    assert refused == RemoteFailure(
        "backend_error", f'POST {server.url}/run_code: HTTP 422: {{"detail": "bad language"}}'
    )
    assert len(server.requests) == 2


def test_an_oversized_answer_fails_the_test_that_caused_it():
    flood = "import sys\nn = int(input())\nprint('x' * n)\n"
    fields = {"tests": [{"input": "10", "output": "x" * 10}, {"input": "5000", "output": "x" * 5000}]}
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url, max_reply_bytes=2048), flood, fields)
    assert outcomes(report) == [("passed", None), ("failed", "output exceeded the size limit")]


def test_connection_refused_is_a_backend_error_naming_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _, failure = run(backend(url, retries=1), SUM, SUM_TESTS)
    assert failure.status == "backend_error"
    assert (
        failure.reason
        == f"POST {url}/run_code: connection failed: [Errno 111] Connection refused (after 2 attempts)"
    )


def test_a_backend_slower_than_the_budget_is_a_timeout_not_a_zero():
    slow = json.dumps({"status": "Success", "message": "", "run_result": {"status": "Finished"}})
    with FakeSandboxFusion((200, slow, 3.0)) as server:
        started = time.monotonic()
        _, failure = run(backend(server.url), SUM, SUM_TESTS, total_timeout_s=1.0)
        elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.0
    assert failure == RemoteFailure(
        "timeout",
        f"POST {server.url}/run_code: the program's 1 s budget ran out, 0 s of it running the program",
    )


def test_options_are_checked_when_the_backend_is_made():
    with pytest.raises(ConfigError, match=r"sandbox_fusion\.url: must be an http"):
        backend("sandbox:8080")
    with pytest.raises(ConfigError, match="SandboxFusion does not run 'cobol'"):
        backend("http://sandbox:8080", language="cobol")
    assert backend("http://sandbox:8080/").url == "http://sandbox:8080/run_code"
    assert backend("https://sb.example/api/run_code").url == "https://sb.example/api/run_code"


def test_an_outage_during_assert_tests_fails_the_sample_not_its_tests():
    fields = {"test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n",
              "entry_point": "inc"}  # fmt: skip
    down = (503, '{"detail": "draining"}', 0.0)
    with FakeSandboxFusion(down, down) as server:
        _, failure = run(backend(server.url, retries=1), "def inc(x):\n    return x + 1\n", fields)
    assert failure == RemoteFailure(
        "backend_error", f'POST {server.url}/run_code: HTTP 503: {{"detail": "draining"}} (after 2 attempts)'
    )
    assert len(server.requests) == 2  # the second assert sent nothing


def fenced(code):
    return f"Here it is.\n```python\n{code}\n```\n"


def test_the_reward_runs_on_sandbox_fusion_without_a_local_sandbox(monkeypatch):
    def no_bwrap(self):
        raise SandboxUnavailable("bwrap is not installed")

    monkeypatch.setattr(Sandbox, "check", no_bwrap)
    samples = [
        Sample(completion=fenced(SUM), fields=SUM_TESTS, id="right"),
        Sample(completion=fenced(SUM.replace("a + b", "a * b")), fields=SUM_TESTS, id="wrong"),
        Sample(completion="no code here", fields=SUM_TESTS, id="none"),
    ]
    with FakeSandboxFusion() as server:
        config = {"type": "code_execution", "backend": "sandbox_fusion", "workers": 2,
                  "sandbox_fusion": {"url": server.url, "retries": 0}}  # fmt: skip
        reward = build(config)
        try:
            right, wrong, none = reward.score(samples)
        finally:
            reward.close()
    assert (right.value, right.reason, right.details["memory_limit"]) == (
        1.0,
        None,
        "sandbox_fusion (1024 MB)",
    )
    assert wrong.value == 0.0
    assert wrong.reason == "0/2 tests passed; test 0 failed: expected '42\\n', got '440\\n'"
    assert (none.value, none.reason) == (0.0, "no program found in the completion")
    assert len(server.requests) == 4


def test_the_reward_gives_a_backend_error_not_a_zero_when_the_server_is_down():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    reward = CodeExecutionReward(
        backend="sandbox_fusion", sandbox_fusion={"url": url, "retries": 0}, workers=1
    )
    try:
        [score] = reward.score([Sample(completion=fenced(SUM), fields=SUM_TESTS, id="p1")])
    finally:
        reward.close()
    assert score.status is Status.BACKEND_ERROR and score.value is None
    assert (
        score.reason == f"sample 'p1': POST {url}/run_code: connection failed: [Errno 111] Connection refused"
    )


def test_backend_options_that_do_not_fit_together_are_refused():
    with pytest.raises(ConfigError, match="backend: sandbox_fusion needs the server's url"):
        CodeExecutionReward(backend="sandbox_fusion")
    with pytest.raises(ConfigError, match="is only used with backend: sandbox_fusion"):
        CodeExecutionReward(sandbox_fusion={"url": "http://sandbox:8080"}, isolation="unsafe_local")


@pytest.mark.parametrize("kind", sorted(CATALOGUE))
def test_reading_a_reply_from_program_output_is_linear(kind):
    """The driver's reply is found in output the program wrote: every adversarial text, bare and
    after the marker (so it is parsed as the reply; a text that is a JSON object is one), at 1 MB,
    plus JSON nested a million deep. Nothing raises, and each read stays well under a second."""
    marker = "m" * 32
    text = CATALOGUE[kind](1 << 20)
    for stdout in (text, f"{marker} {text}", f"{text}\n{marker} " + "[" * (1 << 20)):
        started = time.monotonic()
        reply = _marked_reply(stdout, marker)
        assert time.monotonic() - started < 1.0
        assert reply is None or (stdout.startswith(marker) and reply == json.loads(text))
    assert _marked_reply(f'{text}\n{marker} {{"ok": true, "value": 1}}\n{text[:100]}', marker) == {
        "ok": True,
        "value": 1,
    }
