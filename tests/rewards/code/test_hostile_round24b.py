"""Red-team round 24b (the round-24 call harnesses and class lookups): correct programs that
scored 0, and failure reasons that left out the error.

- The JavaScript call harness declares only ``__rewardlab_`` names, so a program's function
  named ``solution``, ``target``, ``method``, ``own`` or ``args`` is the one called; it reads its
  arguments without ``require``, so a program with ``import``/``export`` (an ES module to node)
  runs (`languages`).
- The Java main-class lookup skips annotations with array arguments before it looks for where
  the last declaration ended, and reads ``case'{':`` as a character literal (`languages.code_only`).
- A failed run's reason shows its error line, not the middle of its stack (`harness`).
"""

import pytest

from rewardlab.rewards.code import harness
from rewardlab.rewards.code.languages import LANGUAGES, code_only
from tests.rewards.code.test_hostile_round24 import calls, score_all

# --- Finding 1: harness names shadowing the program's ---------------------------------------

HARNESS_NAMES = ["solution", "target", "method", "own", "args"]


def test_a_javascript_function_may_have_any_of_the_harness_s_old_names():
    programs = []
    for name in HARNESS_NAMES:
        adds = calls(name, ([2, 3], 5), ([-1, 1], 0))
        programs.append((f"function {name}(a, b) {{ return a + b; }}", adds))
        programs.append((f"class Solution {{ {name}(a, b) {{ return a + b; }} }}", adds))
    results = score_all("javascript", programs)
    assert [r.value for r in results] == [1.0] * len(programs), [r.reason for r in results]


def test_the_harness_still_refuses_a_name_the_program_does_not_define():
    (result,) = score_all(
        "javascript", [("function add(a, b) { return a + b; }", calls("solution", ([1, 2], 3)))]
    )
    assert result.value == 0.0 and "no function named 'solution' in the program" in result.reason


# --- Finding 2: ES modules -----------------------------------------------------------------

ADD = calls("add", ([2, 3], 5), ([10, -4], 6))


def test_a_javascript_es_module_passes_call_tests():
    programs = [
        ("export function add(a, b) { return a + b; }", ADD),
        (
            "import { strict as assert } from 'assert';\n"
            "function add(a, b) { assert.ok(true); return a + b; }",
            ADD,
        ),
        (
            "import { strict as assert } from 'assert';\n"
            "export class Solution { add(a, b) { return a + b; } }",
            ADD,
        ),
    ]
    results = score_all("javascript", programs)
    assert [r.value for r in results] == [1.0] * 3, [r.reason for r in results]


# --- Finding 3: Java main class ------------------------------------------------------------

BODY = (
    "public static void main(String[] a) { java.util.Scanner s = new java.util.Scanner(System.in);"
    " System.out.println(s.nextInt() + s.nextInt()); }"
)
JAVA_PROGRAMS = [
    f'@SuppressWarnings(value = {{"unchecked", "rawtypes"}})\npublic class Adder {{ {BODY} }}',
    f'@SuppressWarnings({{"unchecked", "rawtypes"}})\npublic class Adder {{ {BODY} }}',
    "class Helper { static int f(char c) { switch (c) { case'{': return 1; default: return 0; } } }\n"
    f"public class Adder {{ {BODY} }}",
    f"class Helper {{ static char close() {{ return'}}'; }} }}\npublic class Adder {{ {BODY} }}",
]


@pytest.mark.parametrize("source", JAVA_PROGRAMS)
def test_java_main_class_past_annotation_arrays_and_keyword_quotes(source):
    assert LANGUAGES["java"].main_class(source) == "Adder"


def test_java_programs_with_annotation_arrays_and_keyword_quotes_compile_and_pass():
    results = score_all(
        "java", [(source, {"tests": [{"input": "2 3\n", "output": "5"}]}) for source in JAVA_PROGRAMS]
    )
    assert [r.value for r in results] == [1.0] * len(JAVA_PROGRAMS), [r.reason for r in results]


def test_code_only_keeps_digit_separators_and_blanks_character_literals_after_keywords():
    # A quote within a number is a C++14 digit separator; after a keyword it opens a literal.
    assert code_only("long x = 1'000'000 + 0xFF'FF + 1e+5;") == "long x = 1'000'000 + 0xFF'FF + 1e+5;"
    assert code_only("case'{': return'}';") == "case   : return   ;"
    assert code_only("auto c = u8'\"'; struct Solution {};") == "auto c = u8   ; struct Solution {};"


# --- Finding 8: the reason names the error --------------------------------------------------


def test_a_failing_javascript_call_names_its_error():
    (result,) = score_all("javascript", [("function f(a) { return a.b.c; }", calls("f", ([{}], 1)))])
    assert result.value == 0.0
    assert "TypeError: Cannot read properties of undefined (reading 'c')" in result.reason, result.reason


def test_the_reason_of_a_failed_run_starts_at_its_last_error_line():
    # What node writes: the source line it failed on (long), the error, then the stack.
    source_line = "/tmp/program/main.js:1\n" + "x" * 250 + "\n    ^\n\n"
    stack = "".join(f"    at frame{i} (node:internal/modules/cjs/loader:{i}:1)\n" for i in range(8))
    stderr = source_line + "RangeError: Maximum call stack size exceeded\n" + stack + "\nNode.js v20\n"
    reason = harness._exit_reason({"exit_code": 1, "stderr": stderr})
    assert reason.startswith(
        "exited with code 1: ...RangeError: Maximum call stack size exceeded\n    at frame0"
    )
    assert len(reason) < 260
    # Nothing that reads as an error: the end of stderr, where a runtime says why it stopped.
    plain = "line\n" * 100 + "the end"
    assert harness._exit_reason({"exit_code": 2, "stderr": plain}).endswith("line\nthe end")
    # A short stderr is shown whole.
    assert harness._exit_reason({"exit_code": 3, "stderr": "oops\n"}) == "exited with code 3: oops\n"


# --- Finding 4: an overloaded C++ function name ----------------------------------------------

REMOVE = calls("remove", ([[1, 2, 1], 1], [2]))
SUM = calls("sum", ([[1, 2, 3]], 6))
CPP_OVERLOADED = [
    # <cstdio>, which the harness includes, declares ::remove(const char *) too.
    (
        "#include <vector>\nstd::vector<int> remove(std::vector<int> v, int x) {\n"
        "  std::vector<int> out; for (int y : v) if (y != x) out.push_back(y); return out; }",
        REMOVE,
    ),
    # The recursive-helper pattern, as a method.
    (
        "#include <vector>\nclass Solution { public:\n  int sum(std::vector<int> v) { return sum(v, 0); }\n"
        "  int sum(std::vector<int> &v, size_t i) { return i == v.size() ? 0 : v[i] + sum(v, i + 1); } };",
        SUM,
    ),
]


def test_an_overloaded_cpp_function_name_is_a_compile_error_that_says_so():
    free, method = score_all("cpp", CPP_OVERLOADED)
    assert free.value == 0.0 and method.value == 0.0
    assert "fn_name 'remove' is overloaded: there is more than one function of that name" in free.reason, (
        free.reason
    )
    assert "fn_name 'sum' is overloaded: Solution has more than one method" in method.reason, method.reason
    # Any other compile error keeps the compiler's own words first.
    (other,) = score_all("cpp", [("int sum(std::vector<int> v) { return missing; }", SUM)])
    assert other.reason.startswith("compile_error: main.cpp: In function"), other.reason
    assert "not declared in this scope" in other.reason and "overloaded" not in other.reason
