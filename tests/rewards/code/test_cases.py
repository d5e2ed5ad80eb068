import json

import pytest

from rewardlab import InvalidInput
from rewardlab.rewards.code.cases import AssertTests, CallTests, StdioTests, read_tests

HUMANEVAL_TEST = """
METADATA = {}

def check(candidate):
    assert candidate(1, 2) == 3
    for x in range(3):
        assert candidate(x, 0) == x
    value = 5
    assert candidate(value, value) == 10
"""


def test_humaneval_counts_each_top_level_assert_and_loop():
    tests = read_tests({"test": HUMANEVAL_TEST, "entry_point": "add"}, prompt="def add(a, b):\n    pass\n")
    assert isinstance(tests, AssertTests) and tests.has_check and tests.count == 3
    assert tests.setup.startswith("def add")  # the prompt is code: it provides the helpers


def test_mbpp_asserts_infer_the_function_and_keep_setup_code():
    fields = {
        "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
        "test_setup_code": "import math",
    }
    tests = read_tests(fields)
    assert (tests.entry_point, tests.has_check, tests.count, tests.setup) == ("add", False, 2, "import math")


def test_apps_input_output_json_string_with_and_without_fn_name():
    stdio = read_tests(
        {"input_output": json.dumps({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7"]})}
    )
    assert stdio == StdioTests((("1 2\n", "3\n"), ("3\n4", "7")))
    calls = read_tests({"input_output": {"fn_name": "f", "inputs": [[1, 2]], "outputs": [[3]]}})
    assert calls == CallTests("f", (([1, 2], [3]),))


def test_plain_tests_list():
    assert read_tests({"tests": [{"input": "x", "output": "y"}]}).count == 1
    calls = read_tests({"tests": [{"input": [2], "output": 4}], "fn_name": "square"})
    assert isinstance(calls, CallTests) and calls.fn_name == "square"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "fields"),
        ({"test": "def check(c):\n    assert c()"}, "fields.entry_point"),
        ({"test": "def check(:", "entry_point": "f"}, "fields.test"),
        ({"test": "x = 1", "entry_point": "f"}, "fields.test"),
        ({"input_output": "{not json"}, "fields.input_output"),
        ({"input_output": {"inputs": [1], "outputs": []}}, "fields.input_output"),
        ({"tests": [{"output": 1}]}, "fields.tests"),
        ({"test_list": []}, "fields.test_list"),
        ({"tests": [{"input": 3, "output": 4}]}, "fields.tests"),
    ],
)
def test_bad_tests_name_the_field(fields, field):
    with pytest.raises(InvalidInput) as raised:
        read_tests(fields)
    assert raised.value.field_name == field
