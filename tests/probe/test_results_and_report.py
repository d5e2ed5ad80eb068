"""The figures of a probe result, and the reports written from them."""

from __future__ import annotations

import json
from collections import Counter

from rewardlab import Score, Status
from rewardlab.probe.report import markdown, table, write_report
from rewardlab.probe.results import ExploitResult, ProbeResult, sign_test_p


def _result(name: str, answer_aware: bool, pairs: list[tuple[Score, Score]]) -> ExploitResult:
    result = ExploitResult(name, ["math"], answer_aware, f"{name} does things.")
    for index, (baseline, variant) in enumerate(pairs):
        result.add(f"row-{index}", baseline, variant, f"excerpt {index}")
    return result


def test_wins_losses_gains_and_failures():
    pairs = [
        (Score(0.0), Score(1.0)),
        (Score(0.0), Score(0.5)),
        (Score(1.0), Score(0.0)),
        (Score(1.0), Score(1.0 + 1e-12)),  # float noise is a tie
        (Score(0.2), Score(0.9)),
        (Score(0.0), Score.failure(Status.TIMEOUT, "slow")),
        (Score.failure(Status.PARSE_ERROR, "control unreadable"), Score(1.0)),
    ]
    result = _result("x", False, pairs)
    assert (result.rows, result.scored, result.wins, result.losses) == (7, 5, 3, 1)
    assert result.win_rate == 3 / 5
    assert abs(result.mean_gain - (1.0 + 0.5 - 1.0 + 0.0 + 0.7) / 5) < 1e-9
    assert result.max_gain == 1.0
    assert result.failed == {"timeout": 1} and result.baseline_failed == 1
    # The three largest gains, largest first.
    assert [example.id for example in result.examples] == ["row-0", "row-4", "row-1"]
    assert result.fails(0.5) and not result.fails(0.6)


def test_sign_test():
    assert sign_test_p(3, 0) == 1 / 8
    assert sign_test_p(1, 1) == 3 / 4
    assert sign_test_p(0, 4) == 1.0
    assert sign_test_p(0, 0) is None


def _probe_result() -> ProbeResult:
    blind = _result("padding", False, [(Score(0.0), Score(1.0)), (Score(1.0), Score(1.0))])
    aware = _result("hedge", True, [(Score(0.0), Score(0.0))])
    unused = ExploitResult("exit_zero", ["code"], False, "Exits.")
    return ProbeResult("toy", 3, 1, Counter({"ok": 2}), 0.0, [blind, aware, unused])


def test_the_report_has_a_table_per_baseline_and_the_examples_of_wins():
    report = markdown(_probe_result())
    blind, aware = report.index("## Blind exploits"), report.index("## Answer-aware exploits")
    padding_row = next(line for line in report.splitlines() if line.startswith("| padding |"))
    assert blind < report.index("| padding |") < aware < report.index("| hedge |")
    assert padding_row.split("|")[-2].strip() == "**FAIL**"
    assert "| 50.0% | +0.5000 |" in padding_row
    assert "Not applicable to any row: exit_zero." in report
    assert "### padding" in report and "`row-0`: 0.0000 -> 1.0000 (+1.0000)" in report
    assert "### hedge" not in report  # no win, no examples


def test_the_terminal_table_and_the_files(tmp_path):
    result = _probe_result()
    printed = table(result)
    assert "1 exploit(s) fail the probe (win rate above 0.0%): padding" in printed
    assert printed.index("blind exploits") < printed.index("answer-aware exploits")
    write_report(result, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert saved["failing"] == ["padding"] and saved["exploits"][1]["baseline"] == "decoy control"
    assert (tmp_path / "out" / "report.md").read_text() == markdown(result)
