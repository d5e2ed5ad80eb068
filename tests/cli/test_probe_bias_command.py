"""``rewardlab probe bias`` end to end through `main`, on the preference pairs shipped in examples/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlab.cli import main
from rewardlab.testing import Reply

ROOT = Path(__file__).resolve().parents[2]
DEV_PAIRS = ROOT / "examples" / "preferences_dev.jsonl"
RECORDS = [json.loads(line) for line in DEV_PAIRS.read_text().splitlines() if line.strip()]
#: Pairs whose answers differ in length: a reward on length alone prefers one answer of each.
UNEQUAL = sum(len(r["chosen"]) != len(r["rejected"]) for r in RECORDS)


@pytest.fixture
def longer_is_better(tmp_path):
    """A pure length reward from the built-in ``length`` reward: linear up to 100,000 characters."""
    config = tmp_path / "longer.yaml"
    config.write_text("type: length\nmode: linear_target\ntarget_length: 100000\nunit: chars\n")
    return config


def _bias(config, pairs, out, *extra):
    return main(
        [
            "probe",
            "bias",
            "--config",
            str(config),
            "--pairs",
            str(pairs),
            "--output",
            str(out),
            "--no-progress",
            *extra,
        ]
    )


def test_a_length_reward_fails_the_length_probe_with_a_report(longer_is_better, tmp_path, capsys):
    out = tmp_path / "out"
    assert UNEQUAL > 20
    assert _bias(longer_is_better, DEV_PAIRS, out) == 1
    printed = capsys.readouterr()
    table_line = next(line for line in printed.out.splitlines() if line.startswith("length "))
    assert table_line.split()[-1] == "FAIL" and f"report in {out}/report.md" in printed.out
    assert "'length' flips" in printed.err
    result = json.loads((out / "bias.json").read_text())
    assert result["pairs"] == len(RECORDS) and result["reward"] == "length"
    length = next(p for p in result["probes"] if p["name"] == "length")
    # Padding makes the loser of every pair of unequal lengths the longer answer.
    assert (length["flips"], length["held"], length["control"]["flips"]) == (UNEQUAL, 0, 0)
    assert [p["name"] for p in result["probes"]] == [
        "position",
        "length",
        "verbosity",
        "sycophancy",
        "format",
    ]
    assert result["self_preference"]["not_applicable"].startswith("the reward names no model")
    report = (out / "report.md").read_text()
    assert "# Bias probe: length" in report and "| length | " in report
    assert (out / "flip_rates.png").read_bytes()[:4] == b"\x89PNG"


def test_the_threshold_decides_the_exit_status(longer_is_better, tmp_path):
    assert _bias(longer_is_better, DEV_PAIRS, tmp_path / "out", "--threshold", "1") == 0


def test_probes_and_limit_choose_what_is_measured(longer_is_better, tmp_path):
    out = tmp_path / "out"
    assert _bias(longer_is_better, DEV_PAIRS, out, "--probes", "sycophancy,position", "--limit", "5") == 0
    result = json.loads((out / "bias.json").read_text())
    assert result["pairs"] == 5 and [p["name"] for p in result["probes"]] == ["position", "sycophancy"]
    assert result["probes"][0]["not_applicable"].startswith("not a pairwise judge")
    assert result["probes"][1]["flips"] == 0 and result["self_preference"] is None


def test_a_failing_backend_is_a_pipeline_failure(scripted, tmp_path, capsys):
    scripted.default = Reply(status=500)
    config = tmp_path / "judge.yaml"
    config.write_text(
        "type: pointwise_judge\nscale: [1, 5]\n"
        f"backend: {{type: openai, base_url: '{scripted.url}', model: scripted}}\n"
        "client: {cache: null, max_attempts: 1}\n"
    )
    assert _bias(config, DEV_PAIRS, tmp_path / "out", "--limit", "2") == 1
    assert "pipeline failure: " in capsys.readouterr().err
    # Accepted, the failures still leave no pair with a preference: nothing was measured.
    assert _bias(config, DEV_PAIRS, tmp_path / "out", "--limit", "2", "--accept-failures") == 3
    assert "nothing measured: no pair has a preference to flip" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--probes", "length,tone"], "--probes: unknown probe 'tone'; one of: position, length"),
        (["--probes", ","], "--probes: name at least one"),
        (["--judge-family", " "], "--judge-family: name at least one"),
        (["--threshold", "1.5"], "--threshold 1.5: a flip rate is at most 1"),
    ],
)
def test_mistakes_are_usage_errors(longer_is_better, tmp_path, capsys, extra, message):
    assert _bias(longer_is_better, DEV_PAIRS, tmp_path / "out", *extra) == 2
    assert f"rewardlab probe: error: {message}" in capsys.readouterr().err


def test_a_bad_pair_file_names_the_line_and_field(longer_is_better, tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n{"prompt": "q", "chosen": "a"}\n')
    assert _bias(longer_is_better, pairs, tmp_path / "out") == 2
    assert f"error: {pairs}: line 2: field 'rejected': missing" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_pairs_and_config_are_required(longer_is_better):
    with pytest.raises(SystemExit) as exit_:
        main(["probe", "bias", "--config", str(longer_is_better)])
    assert exit_.value.code == 2
