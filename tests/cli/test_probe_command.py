"""``rewardlab probe`` end to end through `main`, on real math rollouts shipped with the repository."""

from __future__ import annotations

import json

import pytest

from rewardlab.cli import main
from tests.probe.shipped_data import math_records, write_jsonl

RECORDS = math_records(120, seed=0)
UNBOXED = sum("\\boxed{" not in record["completion"] for record in RECORDS)


@pytest.fixture
def weak(tmp_path):
    """A deliberately weak 'accuracy' check - is there a box? - and rollouts with a bad line."""
    data = write_jsonl(tmp_path / "rollouts.jsonl", RECORDS)
    with data.open("a") as file:
        file.write("{not json\n")
    config = tmp_path / "weak.yaml"
    config.write_text("type: regex_match\npattern: '\\\\boxed\\{'\n")
    return config, data


def _probe(config, data, out, *extra):
    return main(
        ["probe", "--config", str(config), "--data", str(data), "--output", str(out), "--no-progress", *extra]
    )


def test_a_weak_check_fails_the_probe_with_a_report(weak, tmp_path, capsys):
    config, data = weak
    out = tmp_path / "out"
    assert _probe(config, data, out) == 1
    printed = capsys.readouterr()
    table_line = next(line for line in printed.out.splitlines() if line.startswith("format_only "))
    assert table_line.split()[-1] == "FAIL" and f"report in {out}/report.md" in printed.out
    assert "exploit 'format_only' wins on" in printed.err
    result = json.loads((out / "probe.json").read_text())
    assert "format_only" in result["failing"] and result["unreadable"] == 1 and result["rows"] == 121
    format_only = next(e for e in result["exploits"] if e["name"] == "format_only")
    assert format_only["wins"] == UNBOXED and format_only["baseline"] == "honest sample"
    report = (out / "report.md").read_text()
    for heading in [
        "# Exploit probe: regex_match",
        "## Blind exploits",
        "## Answer-aware exploits",
        "## Examples of wins",
    ]:
        assert heading in report


def test_the_threshold_decides_the_exit_status(weak, tmp_path):
    config, data = weak
    # format_only wins on the unboxed tenth of the rows, question_echo on fewer.
    assert UNBOXED / len(RECORDS) < 0.2
    assert _probe(config, data, tmp_path / "out", "--threshold", "0.2") == 0


def test_exploits_and_limit_choose_what_is_probed(weak, tmp_path):
    config, data = weak
    out = tmp_path / "out"
    _probe(config, data, out, "--exploits", "truncated,hedge", "--limit", "10")
    result = json.loads((out / "probe.json").read_text())
    assert [e["name"] for e in result["exploits"]] == ["truncated", "hedge"] and result["rows"] == 10
    assert [e["answer_aware"] for e in result["exploits"]] == [False, True]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--exploits", "truncated,nope"], "--exploits: unknown exploit 'nope'; one of:"),
        (["--threshold", "1.5"], "a win rate is at most 1"),
    ],
)
def test_mistakes_are_usage_errors(weak, tmp_path, capsys, extra, message):
    config, data = weak
    assert _probe(config, data, tmp_path / "out", *extra) == 2
    assert message in capsys.readouterr().err


def test_config_and_data_are_required_unless_listing(capsys):
    assert main(["probe", "--data", "x.jsonl"]) == 2
    assert main(["probe", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    hedge = next(line for line in listed if line.startswith("hedge "))
    assert "answer-aware" in hedge and "math" in hedge
    assert any(line.startswith("fake_verdict ") and " blind " in line for line in listed)


def test_an_imported_module_adds_exploits(weak, tmp_path, monkeypatch, capsys):
    from rewardlab.probe import registry

    monkeypatch.setattr(registry, "_EXPLOITS", dict(registry.registered_exploits()))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "probe_cli_box_exploit.py").write_text(
        "from rewardlab.probe import register_exploit\n\n"
        "@register_exploit('bare_box', kinds=['format'], description='A box and nothing else.')\n"
        "def bare_box(target):\n"
        "    return '\\\\boxed{}'\n"
    )
    config, data = weak
    out = tmp_path / "out"
    assert _probe(config, data, out, "--import", "probe_cli_box_exploit", "--exploits", "bare_box") == 1
    (bare_box,) = json.loads((out / "probe.json").read_text())["exploits"]
    assert bare_box["description"] == "A box and nothing else." and bare_box["wins"] == UNBOXED
