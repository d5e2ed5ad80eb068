"""Red-team round 24 (code execution in C++, Java, JavaScript, Go and Rust, and SandboxFusion):
each finding's attack, now held, and the correct programs the fixes must keep passing.

- Sockets are an allow-list (AF_UNIX), inotify and fanotify are refused, and no program may dump
  core (`seccomp`, `sandbox`): probed from every language that can make the calls, while
  every toolchain still builds and runs (its programs here use AF_UNIX where they can).
- A call test calls only the program's own function: not a C library function (C++) nor a
  global built-in (JavaScript) of the same name (`languages`).
- The class lookups read code, not comments and strings; a program's macros do not reach the
  C++ harness (`languages.code_only`).
- ``limits`` keeps the language's own limits it does not name (`reward`); a run that exits with
  nothing on stderr says what it printed (`harness`).
- A test input with no UTF-8 form is refused as ``invalid_input`` (`harness.unsupported_tests`).
- A compile past its time is a ``timeout`` of every test on both backends; a compile error of a
  call-tested program on SandboxFusion is a 0, not a harness failure; call arguments are sent as
  UTF-8 on both backends (`harness.call_stdin`).
"""

import json
import time

import pytest

from rewardlab import Sample, Status, build
from rewardlab.rewards.code.languages import LANGUAGES, code_only
from rewardlab.rewards.code.reward import CodeExecutionReward
from tests.rewards.code.test_sandbox_fusion import FakeSandboxFusion, backend, outcomes, run


def score_all(language, programs, **options):
    """Score each ``(code, fields)`` of ``programs`` with one reward for ``language``."""
    reward = CodeExecutionReward(language=language, workers=2, test_timeout_s=10.0, **options)
    try:
        samples = [
            Sample(completion=f"```{language}\n{code}\n```", fields=fields) for code, fields in programs
        ]
        return reward.score(samples)
    finally:
        reward.close()


def stdout_of(score):
    return score.details["tests"][0]["stdout_tail"]


# --- Finding 0, 7, 8: sockets, inotify and core dumps ------------------------------------------

#: What the probes print: each socket family tried, then socketpair, inotify, fanotify, and the
#: core limit. AF_UNIX must work; everything else must be refused.
EXPECTED_PROBE = (
    "unix ok\nvsock refused\nnetlink refused\npacket refused\ninet refused\ninet6 refused\n"
    "socketpair unix ok\nsocketpair inet refused\ninotify refused\nfanotify refused\ncore hard 0\n"
)
FAMILIES = [("unix", 1), ("vsock", 40), ("netlink", 16), ("packet", 17), ("inet", 2), ("inet6", 10)]

CPP_PROBE = r"""
#include <cstdio>
#include <sys/socket.h>
#include <sys/inotify.h>
#include <sys/fanotify.h>
#include <sys/resource.h>
#include <unistd.h>
int main() {
  const char *names[] = {"unix", "vsock", "netlink", "packet", "inet", "inet6"};
  int families[] = {1, 40, 16, 17, 2, 10};
  for (int i = 0; i < 6; i++) {
    int raw = families[i] == 16 || families[i] == 17;
    int s = socket(families[i], raw ? SOCK_RAW : SOCK_STREAM, 0);
    printf("%s %s\n", names[i], s >= 0 ? "ok" : "refused");
    if (s >= 0) close(s);
  }
  int pair[2];
  printf("socketpair unix %s\n", socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0 ? "ok" : "refused");
  printf("socketpair inet %s\n", socketpair(AF_INET, SOCK_STREAM, 0, pair) == 0 ? "ok" : "refused");
  printf("inotify %s\n", inotify_init1(0) >= 0 ? "ok" : "refused");
  printf("fanotify %s\n", fanotify_init(0, 0) >= 0 ? "ok" : "refused");
  struct rlimit core;
  getrlimit(RLIMIT_CORE, &core);
  core.rlim_cur = core.rlim_max = 1 << 20;
  if (setrlimit(RLIMIT_CORE, &core) == 0) printf("core raised\n");
  getrlimit(RLIMIT_CORE, &core);
  printf("core hard %llu\n", (unsigned long long)core.rlim_max);
}
"""

GO_PROBE = r"""
package main

import (
	"fmt"
	"syscall"
)

func main() {
	names := []string{"unix", "vsock", "netlink", "packet", "inet", "inet6"}
	families := []int{1, 40, 16, 17, 2, 10}
	for i, family := range families {
		kind := syscall.SOCK_STREAM
		if family == 16 || family == 17 {
			kind = syscall.SOCK_RAW
		}
		fd, err := syscall.Socket(family, kind, 0)
		if err == nil {
			fmt.Println(names[i], "ok")
			syscall.Close(fd)
		} else {
			fmt.Println(names[i], "refused")
		}
	}
	if _, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0); err == nil {
		fmt.Println("socketpair unix ok")
	} else {
		fmt.Println("socketpair unix refused")
	}
	if _, err := syscall.Socketpair(syscall.AF_INET, syscall.SOCK_STREAM, 0); err == nil {
		fmt.Println("socketpair inet ok")
	} else {
		fmt.Println("socketpair inet refused")
	}
	if _, err := syscall.InotifyInit1(0); err == nil {
		fmt.Println("inotify ok")
	} else {
		fmt.Println("inotify refused")
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_FANOTIFY_INIT, 0, 0, 0); errno == 0 {
		fmt.Println("fanotify ok")
	} else {
		fmt.Println("fanotify refused")
	}
	var core syscall.Rlimit
	syscall.Getrlimit(4, &core)
	core.Cur, core.Max = 1<<20, 1<<20
	if syscall.Setrlimit(4, &core) == nil {
		fmt.Println("core raised")
	}
	syscall.Getrlimit(4, &core)
	fmt.Println("core hard", core.Max)
}
"""

RUST_PROBE = r"""
extern "C" {
    fn socket(domain: i32, kind: i32, protocol: i32) -> i32;
    fn socketpair(domain: i32, kind: i32, protocol: i32, fds: *mut i32) -> i32;
    fn inotify_init1(flags: i32) -> i32;
    fn fanotify_init(flags: u32, event_flags: u32) -> i32;
    fn getrlimit(resource: i32, limit: *mut [u64; 2]) -> i32;
    fn setrlimit(resource: i32, limit: *const [u64; 2]) -> i32;
    fn close(fd: i32) -> i32;
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "refused" }
}

fn main() {
    let families = [("unix", 1), ("vsock", 40), ("netlink", 16), ("packet", 17), ("inet", 2), ("inet6", 10)];
    unsafe {
        for (name, family) in families {
            let kind = if family == 16 || family == 17 { 3 } else { 1 };
            let fd = socket(family, kind, 0);
            println!("{} {}", name, verdict(fd >= 0));
            if fd >= 0 {
                close(fd);
            }
        }
        let mut pair = [0i32; 2];
        println!("socketpair unix {}", verdict(socketpair(1, 1, 0, pair.as_mut_ptr()) == 0));
        println!("socketpair inet {}", verdict(socketpair(2, 1, 0, pair.as_mut_ptr()) == 0));
        println!("inotify {}", verdict(inotify_init1(0) >= 0));
        println!("fanotify {}", verdict(fanotify_init(0, 0) >= 0));
        let mut core = [0u64; 2];
        getrlimit(4, &mut core);
        if setrlimit(4, &[1 << 20, 1 << 20]) == 0 {
            println!("core raised");
        }
        getrlimit(4, &mut core);
        println!("core hard {}", core[1]);
    }
}
"""

PYTHON_PROBE = r"""
import ctypes, resource, socket
libc = ctypes.CDLL(None, use_errno=True)
for name, family in [("unix", 1), ("vsock", 40), ("netlink", 16), ("packet", 17), ("inet", 2), ("inet6", 10)]:
    try:
        socket.socket(family, socket.SOCK_RAW if family in (16, 17) else socket.SOCK_STREAM).close()
        print(name, "ok")
    except OSError:
        print(name, "refused")
for name, family in [("unix", socket.AF_UNIX), ("inet", socket.AF_INET)]:
    try:
        socket.socketpair(family)
        print("socketpair", name, "ok")
    except OSError:
        print("socketpair", name, "refused")
print("inotify", "ok" if libc.inotify_init1(0) >= 0 else "refused")
print("fanotify", "ok" if libc.fanotify_init(0, 0) >= 0 else "refused")
try:
    resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))
    print("core raised")
except (OSError, ValueError):
    pass
print("core hard", resource.getrlimit(resource.RLIMIT_CORE)[1])
"""

#: Java and node have no API for these families or calls; what they must keep is AF_UNIX (a
#: server and a client over a Unix socket) while IPv4 stays refused.
JAVA_UNIX = r"""
import java.net.*;
import java.nio.*;
import java.nio.channels.*;
import java.nio.file.*;
public class Main {
  public static void main(String[] args) throws Exception {
    Path path = Path.of("/tmp/program/java.sock");
    ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    server.bind(UnixDomainSocketAddress.of(path));
    SocketChannel client = SocketChannel.open(UnixDomainSocketAddress.of(path));
    client.write(ByteBuffer.wrap("hi".getBytes()));
    ByteBuffer in = ByteBuffer.allocate(2);
    server.accept().read(in);
    System.out.println("unix " + new String(in.array()));
    try { new Socket().bind(new InetSocketAddress(0)); System.out.println("inet ok"); }
    catch (Exception e) { System.out.println("inet refused"); }
  }
}
"""
JS_UNIX = r"""
const net = require("net");
const path = "/tmp/program/node.sock";
const server = net.createServer((c) => c.on("data", (d) => {
  console.log("unix " + d); c.end(); server.close();
  const s = net.createServer(); s.on("error", () => console.log("inet refused"));
  s.listen(0, "127.0.0.1", () => { console.log("inet ok"); s.close(); });
}));
server.listen(path, () => net.connect(path, function () { this.write("hi"); }));
"""

PROBES = {"cpp": CPP_PROBE, "go": GO_PROBE, "rust": RUST_PROBE, "python": PYTHON_PROBE}


@pytest.mark.parametrize("language", sorted(PROBES))
def test_only_unix_sockets_no_inotify_and_no_core_dumps(language):
    """Before round 24 AF_VSOCK (and netlink, packet) sockets opened, inotify watched the host's
    /usr, and the core limit's hard half was unlimited."""
    (result,) = score_all(
        language, [(PROBES[language], {"tests": [{"input": "", "output": EXPECTED_PROBE}]})]
    )
    assert stdout_of(result) == EXPECTED_PROBE, result.reason
    assert result.value == 1.0


@pytest.mark.parametrize(("language", "program"), [("java", JAVA_UNIX), ("javascript", JS_UNIX)])
def test_java_and_node_keep_unix_sockets_and_lose_ipv4(language, program):
    expected = "unix hi\ninet refused\n"
    (result,) = score_all(language, [(program, {"tests": [{"input": "", "output": expected}]})])
    assert result.value == 1.0, (result.reason, result.details["tests"])


# --- Finding 1: only the program's own function is called ---------------------------------------


def calls(fn_name, *cases):
    """Call tests of ``fn_name``: each case ``(arguments, expected)``."""
    return {"fn_name": fn_name, "tests": [{"input": list(args), "output": out} for args, out in cases]}


BASE64 = calls("btoa", (["hello"], "aGVsbG8="), (["rewardlab"], "cmV3YXJkbGFi"))
ABS = calls("abs", ([-5], 5), ([7], 7))
UPPER = calls("toupper", ([97], 65))
ESCAPE = calls("escape", (["a<b"], "a&lt;b"))


def test_javascript_built_ins_are_not_the_programs_functions():
    results = score_all(
        "javascript",
        [
            ("// no code at all", BASE64),
            ("class Solution { escape(s) { return s.replace(/</g, '&lt;'); } }", ESCAPE),
            # The program's own btoa is called, a hand-written one included.
            ("function btoa(s) { return Buffer.from(s).toString('base64'); }", BASE64),
            # Object's methods are not Solution's.
            ("class Solution {}", calls("toString", ([], "[object Object]"))),
        ],
    )
    empty, method, own, inherited = results
    assert empty.value == 0.0 and "no function named 'btoa' in the program" in empty.reason
    assert method.value == 1.0, method.reason
    assert own.value == 1.0, own.reason
    assert inherited.value == 0.0 and "no function named 'toString'" in inherited.reason


def test_cpp_c_library_functions_are_not_the_programs_functions():
    results = score_all(
        "cpp",
        [
            ("// nothing here", ABS),
            ("#include <cctype>\n// nothing here", UPPER),
            # A program's own function of such a name is called.
            ("int toupper(int c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }", UPPER),
            # A method Solution inherits from the standard library is not Solution's own.
            (
                "#include <string>\nstruct Solution : std::string {};",
                calls("size", ([], 0)),
            ),
        ],
    )
    empty, included, own, inherited = results
    for result in (empty, included):
        assert result.value == 0.0 and "no function named" in result.reason, result.reason
    assert own.value == 1.0, own.reason
    assert inherited.value == 0.0 and inherited.reason.startswith("compile_error: "), inherited.reason
    assert "rewardlab_harness::serve" in inherited.reason  # the harness's check, not a typo


# --- Finding 6: comments, strings and macros ----------------------------------------------------

ADD = calls("add", ([1, 2], 3), ([3000000000, 4000000000], 7000000000))
CP_PROGRAMS = [
    # Competitive-programming style: pragmas, every header, macros over int and endl.
    '#pragma GCC optimize("O3")\n#include <bits/stdc++.h>\nusing namespace std;\n'
    "#define int long long\n#define endl '\\n'\n#define all(x) (x).begin(), (x).end()\n"
    "typedef long long ll;\nint add(int a, int b) { vector<int> v{a, b}; return accumulate(all(v), 0LL); }",
    "// not a class Solution, a free function\nlong long add(long long a, long long b) { return a + b; }",
    '#include <string>\nstd::string note = "struct Solution";\n'
    "long long add(long long a, long long b) { return a + b; }",
    'const char *raw = R"x(class Solution { )x";\nlong long add(long long a, long long b) { return a + b; }',
    "/* class Solution { public: int add(int a, int b); }; */\n"
    "long long add(long long a, long long b) { return a + b; }",
    "#include <bits/stdc++.h>\nusing namespace std;\nclass Solution {\npublic:\n"
    "  long long add(long long a, long long b) { return a + b; } // class Other\n};",
]


def test_competitive_programming_style_cpp_programs_pass_call_tests():
    results = score_all("cpp", [(program, ADD) for program in CP_PROGRAMS])
    assert [r.value for r in results] == [1.0] * len(CP_PROGRAMS), [r.reason for r in results]


def test_a_compile_error_points_at_the_programs_own_line():
    (result,) = score_all("cpp", [("int add(int a, int b) {\n  return a + b\n}", ADD)])
    assert result.value == 0.0 and "main.cpp:2:" in result.reason, result.reason


JAVA_SUM = (
    "import java.util.*;\n{before}class Main {{ {inside}public static void main(String[] a) {{"
    " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); }} }}"
)
SUM = {"tests": [{"input": "1 2\n", "output": "3\n"}]}


def test_java_main_class_is_read_from_code_only():
    programs = [
        JAVA_SUM.format(before="// public class Solution would be LeetCode's name\npublic ", inside=""),
        JAVA_SUM.format(before="", inside="public final class Node { int v; } "),
        JAVA_SUM.format(before='/* public class X */ @SuppressWarnings("all")\npublic final ', inside=""),
        JAVA_SUM.format(before="", inside='String s = "public class Fake {"; '),
    ]
    results = score_all("java", [(program, SUM) for program in programs])
    assert [r.value for r in results] == [1.0] * len(programs), [r.reason for r in results]


def test_main_class_and_code_only_read_code():
    java = LANGUAGES["java"]
    assert java.main_class("// public class Solution\npublic class Main {}") == "Main"
    assert java.main_class("class Main { public static final class Node {} }") == "Main"
    assert java.main_class('@Deprecated public final class Foo { String s = "public class Bar"; }') == "Foo"
    assert java.main_class('String t = """\npublic class Text\n""";\npublic class Real {}') == "Real"
    blank = code_only("int x = 1'000'000; // class Solution\nchar c = '\"'; s = \"/*\"; int y;")
    assert "Solution" not in blank and blank.count("\n") == 1 and "int y;" in blank and "1'000'000" in blank


@pytest.mark.parametrize("piece", ["/*", '"', "'", 'R"x(', '"""', "//", "\\", "public class A ", "@A("])
def test_code_only_is_linear_on_hostile_source(piece):
    source = (piece + "a") * 100_000 + "class Solution"
    started = time.monotonic()
    code_only(source)
    LANGUAGES["java"].main_class(source)
    assert time.monotonic() - started < 2.0


# --- Finding 3: limits -------------------------------------------------------------------------


def test_limits_given_keep_the_languages_own_for_the_rest():
    java = build({"type": "code_execution", "language": "java", "limits": {"cpu_seconds": 30}})
    go = build({"type": "code_execution", "language": "go", "limits": {"memory_bytes": 2 << 30}})
    try:
        assert (java.sandbox.limits.memory_bytes, java.sandbox.limits.processes) == (3 << 30, 64)
        assert java.sandbox.limits.cpu_seconds == 30
        assert (go.sandbox.limits.processes, go.sandbox.limits.memory_bytes) == (64, 2 << 30)
    finally:
        java.close()
        go.close()
    program = JAVA_SUM.format(before="public ", inside="")
    (result,) = score_all("java", [(program, SUM)], limits={"cpu_seconds": 30})
    assert result.value == 1.0, result.reason


def test_a_run_that_exits_with_nothing_on_stderr_says_what_it_printed():
    (result,) = score_all("python", [("print('the VM could not start')\nraise SystemExit(1)", SUM)])
    assert result.value == 0.0
    assert "exited with code 1 with nothing on stderr" in result.reason
    assert "the VM could not start" in result.reason


# --- Finding 4: inputs with no UTF-8 form ------------------------------------------------------

LONE = json.loads('"\\ud83d"')


def test_an_input_with_a_lone_surrogate_is_refused_as_the_datasets_fault():
    stdio = {"tests": [{"input": "x" + LONE, "output": "1\n"}, {"input": "ab", "output": "2\n"}]}
    sizes = calls("size", (["ab"], 2), ([LONE], 1))
    (python_stdio,) = score_all("python", [("print(len(input()))", stdio)])
    (js_call,) = score_all("javascript", [("function size(s) { return s.length; }", sizes)])
    assert python_stdio.status == Status.INVALID_INPUT
    assert "test 0's input holds a lone surrogate (U+D83D)" in python_stdio.reason
    assert js_call.status == Status.INVALID_INPUT and "test 1's input" in js_call.reason
    # Python call tests pass Python strings, not bytes: they keep the surrogate and still judge.
    (python_call,) = score_all("python", [("def size(s):\n    return len(s)", sizes)])
    assert python_call.value == 1.0, python_call.reason


# --- Findings 2, 5, 9: SandboxFusion and compile timeouts --------------------------------------


def test_a_call_tested_program_that_does_not_compile_on_sandbox_fusion_scores_0():
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url, language="cpp"), "int add(int a, int b) { return a + b }", ADD)
    assert [o.outcome for o in report.outcomes] == ["error", "error"]
    assert report.load_error.startswith("compile_error: ") and "expected" in report.load_error
    assert len(server.requests) == 1


def test_a_compile_past_its_time_on_sandbox_fusion_call_tests_is_a_timeout():
    slow_compile = {"status": "Failed", "message": "", "run_result": None,
                    "compile_result": {"status": "TimeLimitExceeded", "execution_time": 20.0}}  # fmt: skip
    with FakeSandboxFusion((200, json.dumps(slow_compile), 0.0)) as server:
        _, report = run(backend(server.url, language="cpp"), "int add(int a, int b);", ADD)
    assert outcomes(report) == [("timeout", "compile_timeout: compiling ran past its time limit")] * 2


def test_call_arguments_reach_both_backends_as_utf8():
    size = calls("size", (["😀"], 4), (["x😀"], 5))
    program = "#include <string>\nint size(std::string s) { return s.size(); }"
    with FakeSandboxFusion() as server:
        _, report = run(backend(server.url, language="cpp"), program, size, test_timeout_s=10.0)
    assert [request["stdin"] for request in server.requests] == ['["😀"]', '["x😀"]']
    assert outcomes(report) == [("passed", None), ("passed", None)]
    (local,) = score_all("cpp", [(program, size)])
    assert local.value == 1.0, local.reason


def test_a_compile_past_its_time_is_a_timeout_locally_too():
    # Two nested loops: g++ stops a single one after 262,144 iterations (-fconstexpr-loop-limit).
    endless = (
        "constexpr long spin() { long s = 0; for (long i = 0; i < 200000; ++i)"
        " for (long j = 0; j < 200000; ++j) s += i ^ j; return s; }\n"
        "static_assert(spin() > 0);\nint main() {}"
    )
    fields = {"tests": [{"input": "", "output": ""}, {"input": "", "output": ""}]}
    (result,) = score_all("cpp", [(endless, fields)], compile_timeout_s=2.0)
    assert [t["outcome"] for t in result.details["tests"]] == ["timeout", "timeout"]
    assert "the compiler ran past its time limit" in result.reason
