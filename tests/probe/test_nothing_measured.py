"""A probe that could measure nothing says so and exits 3 - neither a pass (0) nor a finding (1):
``rewardlab probe`` when no row's honest score is ok, ``rewardlab probe bias`` when no pair has a
preference or no rewrite could test one. Every report says how many rows were left out, and why."""

from __future__ import annotations

import json
from pathlib import Path

from rewardlab.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROWS = [
    {"id": "r1", "prompt": "What is 6*7?", "completion": "It is $\\boxed{42}$.", "gt": "42"},
    {"id": "r2", "prompt": "What is 2+3?", "completion": "It is $\\boxed{5}$.", "gt": "5"},
]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_probe_of_no_row_exits_3_and_says_why(tmp_path, capsys):
    # The reference is in a column the reader does not know ("gt"): math_answer cannot score a row.
    data = _write(tmp_path / "rollouts.jsonl", ROWS)
    config = tmp_path / "math.yaml"
    config.write_text("type: math_answer\n")
    out = tmp_path / "out"
    argv = ["probe", "--config", str(config), "--data", str(data), "--output", str(out), "--no-progress"]
    assert main(argv) == 3
    printed = capsys.readouterr()
    assert "no exploit's win rate" not in printed.out
    assert "NOTHING MEASURED: no row was probed" in printed.out
    assert "probed: 0 rows; not probed: 2 invalid_input (e.g. sample 'r1': reference:" in printed.out
    assert "rewardlab probe: could not score: no row was probed" in printed.err
    result = json.loads((out / "probe.json").read_text())
    assert (result["probed"], result["not_probed"]["invalid_input"]["rows"], result["failing"]) == (0, 2, [])
    assert result["unmeasured"].startswith("no row was probed: no honest score is ok (2 invalid_input")
    assert "- probed: 0 rows; not probed: 2 invalid_input" in (out / "report.md").read_text()


def test_a_probe_says_what_it_left_out_when_it_probed_some_rows(tmp_path, capsys):
    rows = [{**row, "answer": row["gt"]} for row in ROWS] + [
        {"id": "r3", "prompt": "Hi?", "completion": "Hi."}
    ]
    data = _write(tmp_path / "rollouts.jsonl", rows)
    config = tmp_path / "math.yaml"
    config.write_text("type: math_answer\n")
    argv = ["probe", "--config", str(config), "--data", str(data), "--output", str(tmp_path / "out")]
    assert main([*argv, "--no-progress", "--exploits", "truncated"]) == 0
    assert (
        "probed: 2 rows; not probed: 1 invalid_input (e.g. sample 'r3': reference:" in capsys.readouterr().out
    )


def test_a_bias_probe_of_ties_only_exits_3(tmp_path, capsys):
    config = tmp_path / "const.yaml"
    config.write_text("type: length\nmode: below_max\nmax_length: 100000\nunit: chars\n")
    pairs = EXAMPLES / "preferences_dev.jsonl"
    count = sum(1 for line in pairs.read_text().splitlines() if line.strip())
    out = tmp_path / "out"
    argv = [
        "probe",
        "bias",
        "--config",
        str(config),
        "--pairs",
        str(pairs),
        "--output",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 3
    printed = capsys.readouterr()
    assert "no probe flips" not in printed.out
    assert "NOTHING MEASURED: no pair has a preference to flip" in printed.out
    assert f"not probed: {count} pairs ({count} tie): no preference, so no loser to rewrite" in printed.out
    assert "rewardlab probe bias: nothing measured:" in printed.err
    assert json.loads((out / "bias.json").read_text())["not_probed"] == count


def test_a_bias_probe_whose_padding_falls_short_counts_the_pair_apart(tmp_path, capsys):
    config = tmp_path / "longer.yaml"
    config.write_text("type: length\nmode: linear_target\ntarget_length: 100000\nunit: chars\n")
    far = {"id": "far", "prompt": "Tell me.", "chosen": "y" * 6_000, "rejected": "Short."}
    near = {"id": "near", "prompt": "Tell me.", "chosen": "y" * 1_000, "rejected": "Short."}
    out = tmp_path / "out"

    def bias(*rows):
        pairs = _write(tmp_path / "pairs.jsonl", list(rows))
        argv = ["probe", "bias", "--config", str(config), "--pairs", str(pairs), "--output", str(out)]
        return main([*argv, "--probes", "length", "--no-progress"])

    assert bias(far) == 3  # the one pair was not tested: nothing measured, not "held"
    assert (
        "length: 1 pairs not tested (left out of the rate), e.g. far: 4,000 characters"
        in capsys.readouterr().out
    )
    assert bias(far, near) == 1  # the other flips
    (length,) = json.loads((out / "bias.json").read_text())["probes"]
    assert (length["flips"], length["held"], length["not_tested"]) == (1, 0, 1)
