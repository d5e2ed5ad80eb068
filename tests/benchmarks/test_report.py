import json

import pytest

from rewardlab.benchmarks.items import Result
from rewardlab.benchmarks.report import calibration_bins, expected_calibration_error, markdown, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def full_result():
    return Result(
        benchmark="demo",
        metrics={"accuracy": 0.625, "items": 8},
        subsets={
            "chat": {"accuracy": 0.5, "items": 4},
            "math": {"accuracy": 0.75, "items": 4.0, "extra": 1.0},
        },
        failed=2,
        distributions={"chosen": [0.9, 0.8, 0.4], "rejected": [0.1, 0.5, 0.3]},
        curves={"best-of-n": [0.5, 0.6, 0.7], "pass@n": [0.5, 0.8, 0.9]},
        calibration=[(0.9, True), (0.8, True), (0.2, False), (0.3, True)],
        notes=["threshold 0.5"],
    )


def test_calibration_bins_and_error_by_hand():
    pairs = [(0.05, False), (0.15, True), (0.12, False), (1.0, True), (0.95, False)]
    bins = calibration_bins(pairs)
    # Bins [0, .1): 0.05 -> freq 0. [.1, .2): 0.15, 0.12 -> mean .135, freq .5. [.9, 1]: 1.0, .95 -> .975, .5.
    assert bins == [
        (pytest.approx(0.05), 0.0, 1),
        (pytest.approx(0.135), 0.5, 2),
        (pytest.approx(0.975), 0.5, 2),
    ]
    # (1 * .05 + 2 * .365 + 2 * .475) / 5
    assert expected_calibration_error(pairs) == pytest.approx((0.05 + 0.73 + 0.95) / 5)


def test_markdown_has_the_headline_a_row_per_subset_and_the_notes():
    text = markdown(full_result(), ["subsets.png"])
    assert "| accuracy | 0.6250 |" in text and "| items | 8 |" in text
    assert "| failed candidates | 2 |" in text
    assert "| subset | accuracy | items | extra |" in text
    assert "| chat | 0.5000 | 4 | - |" in text  # a figure a subset lacks is a dash
    assert "| math | 0.7500 | 4 | 1.0000 |" in text
    assert "- threshold 0.5" in text and "![subsets](subsets.png)" in text


def test_the_report_writes_json_markdown_and_every_plot_it_has_data_for(tmp_path):
    written = write_report(full_result(), tmp_path)
    names = sorted(path.name for path in written)
    assert names == sorted(
        ["result.json", "report.md", "subsets.png", "best_of_n.png", "distributions.png", "calibration.png"]
    )
    for path in written:
        if path.suffix == ".png":
            assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 5000
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["metrics"]["accuracy"] == 0.625
    assert data["curves"]["pass@n"] == [0.5, 0.8, 0.9]
    assert data["calibration"][0] == [0.9, True]


def test_plots_without_data_are_not_drawn_and_stale_ones_are_removed(tmp_path):
    write_report(full_result(), tmp_path)
    written = write_report(Result(benchmark="bare", metrics={"accuracy": 1.0}), tmp_path)
    assert sorted(p.name for p in written) == ["report.md", "result.json"]
    assert not list(tmp_path.glob("*.png"))
