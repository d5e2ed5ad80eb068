"""``rewardlab schema``: JSON Schema for reward config files, through `main` and as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from rewardlab import available
from rewardlab.cli import main
from rewardlab.rewards.options import description

ROOT = Path(__file__).resolve().parents[2]


def schema_of(capsys, *args: str) -> dict:
    assert main(["schema", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_schema_of_any_config_checks_the_shipped_example(capsys):
    schema = schema_of(capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    example = yaml.safe_load((ROOT / "examples" / "reward.yaml").read_text())
    assert list(validator.iter_errors(example)) == []
    # One bad option deep in the example is caught.
    example["routes"]["math"]["components"]["overlong"]["unit"] = "lines"
    assert not validator.is_valid(example)
    assert {ref["$ref"] for ref in schema["oneOf"]} == {f"#/$defs/config.{kind}" for kind in available()}


def test_the_schema_of_one_type_is_for_a_file_of_that_type(capsys):
    schema = schema_of(capsys, "math_answer")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"type": "math_answer", "cas_budget_s": 2, "answer_region": "whole"})
    assert not validator.is_valid({"type": "math_answer", "cas_budget_s": -1})
    assert not validator.is_valid({"type": "math_answer", "cas_budgets": 2})
    assert not validator.is_valid({"type": "string_match"})
    described = schema["properties"]["cas_budget_s"]["description"]
    assert "budget" in described and schema["properties"]["cas_budget_s"]["default"] == 3.0


def test_list_names_every_type_with_what_it_is(capsys):
    assert main(["schema", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == available()
    for line in lines:
        kind, text = line.split(maxsplit=1)
        assert text == description(kind)


def test_an_unknown_type_exits_2_with_the_list(capsys):
    assert main(["schema", "math_anwser"]) == 2
    error = capsys.readouterr().err
    assert "unknown reward type 'math_anwser'" in error
    assert all(kind in error for kind in available())
    assert main(["schema", "math_answer", "--list"]) == 2


def test_a_user_reward_is_described_after_import(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "import rewardlab\n"
        "from rewardlab import Reward, Score\n\n"
        "@rewardlab.register('schema_cli_constant')\n"
        "class Constant(Reward):\n"
        '    """A constant.\n\n    Args:\n        value: What every sample scores.\n    """\n\n'
        "    def __init__(self, value: float = 1.0):\n"
        "        self.value = value\n\n"
        "    async def ascore(self, samples):\n"
        "        return [Score(self.value) for _ in samples]\n"
    )
    command = [
        sys.executable,
        "-m",
        "rewardlab.cli",
        "schema",
        "schema_cli_constant",
        "--import",
        "my_rewards",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["properties"]["value"] == {
        "default": 1.0,
        "description": "What every sample scores.",
        "title": "Value",
        "type": "number",
    }


@pytest.mark.parametrize("kind", ["combine", "route", "length", "monte_carlo_steps"])
def test_nested_rewards_refer_to_every_type(capsys, kind):
    schema = schema_of(capsys, kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert {f"config.{other}" for other in available()} <= set(schema["$defs"])
