"""A benchmark result written for people: JSON, a markdown table, and plots as PNG.

``result.json`` holds every figure and the plot data; ``report.md`` the headline figures, one row
per subset and the notes; the PNGs are drawn only from data the result has: a bar per subset,
best-of-N curves, chosen-vs-rejected score histograms, and a calibration (reliability) curve
where the scores are probabilities. matplotlib (the ``bench`` extra) draws them off-screen.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rewardlab.benchmarks.items import Result
from rewardlab.optional import require

CALIBRATION_BINS = 10


def calibration_bins(
    pairs: Sequence[tuple[float, bool]], bins: int = CALIBRATION_BINS
) -> list[tuple[float, float, int]]:
    """(mean probability, observed frequency, count) for each non-empty bin of equal width over
    [0, 1]; a probability of exactly 1 falls in the last bin."""
    grouped: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for probability, outcome in pairs:
        grouped[min(int(probability * bins), bins - 1)].append((probability, outcome))
    return [
        (sum(p for p, _ in group) / len(group), sum(o for _, o in group) / len(group), len(group))
        for group in grouped
        if group
    ]


def expected_calibration_error(pairs: Sequence[tuple[float, bool]], bins: int = CALIBRATION_BINS) -> float:
    """The count-weighted mean gap between confidence and frequency over `calibration_bins`."""
    return sum(
        count * abs(mean - frequency) for mean, frequency, count in calibration_bins(pairs, bins)
    ) / len(pairs)


def _figure(value: float, name: str = "") -> str:
    if name == "items":  # a count, whatever type a metric gave it
        return str(int(value))
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def markdown(result: Result, plots: Sequence[str] = ()) -> str:
    """The report as markdown: headline figures, a row per subset, notes, plots."""
    lines = [f"# {result.benchmark}", "", "| figure | value |", "|---|---|"]
    lines += [f"| {name} | {_figure(value)} |" for name, value in result.metrics.items()]
    lines.append(f"| failed candidates | {result.failed} |")
    if result.calibration:
        lines.append(f"| expected calibration error | {expected_calibration_error(result.calibration):.4f} |")
    if result.subsets:
        columns = list(dict.fromkeys(name for figures in result.subsets.values() for name in figures))
        lines += ["", "| subset | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for subset, figures in result.subsets.items():
            cells = [_figure(figures[name], name) if name in figures else "-" for name in columns]
            lines.append(f"| {subset} | " + " | ".join(cells) + " |")
    if result.notes:
        lines += ["", *(f"- {note}" for note in result.notes)]
    if plots:
        lines += ["", *(f"![{Path(plot).stem}]({plot})" for plot in plots)]
    return "\n".join(lines) + "\n"


def _plot_subsets(result: Result, plt, path: Path) -> bool:
    values = {
        name: figures[result.subset_figure]
        for name, figures in result.subsets.items()
        if result.subset_figure in figures
    }
    if not values:
        return False
    figure, axes = plt.subplots(figsize=(max(4.0, 0.6 * len(values) + 2), 3.5))
    axes.bar(list(values), list(values.values()), color="tab:blue")
    axes.set_ylabel(result.subset_figure)
    axes.set_title(f"{result.benchmark}: {result.subset_figure} per subset")
    axes.tick_params(axis="x", labelrotation=45)
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return True


def _plot_curves(result: Result, plt, path: Path) -> bool:
    if not result.curves:
        return False
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for name, ys in result.curves.items():
        axes.plot(range(1, len(ys) + 1), ys, marker="o", label=name)
    axes.set_xlabel("n (candidates)")
    axes.set_ylabel("accuracy")
    axes.set_title(f"{result.benchmark}: best-of-n")
    axes.legend()
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return True


def _plot_distributions(result: Result, plt, path: Path) -> bool:
    groups = {name: values for name, values in result.distributions.items() if values}
    if not groups:
        return False
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for name, values in groups.items():
        axes.hist(values, bins=30, alpha=0.5, label=f"{name} ({len(values)})")
    axes.set_xlabel("score")
    axes.set_ylabel("candidates")
    axes.set_title(f"{result.benchmark}: score distributions")
    axes.legend()
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return True


def _plot_calibration(result: Result, plt, path: Path) -> bool:
    if not result.calibration:
        return False
    bins = calibration_bins(result.calibration)
    figure, axes = plt.subplots(figsize=(4, 4))
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect")
    axes.plot(
        [mean for mean, _, _ in bins], [frequency for _, frequency, _ in bins], marker="o", label="reward"
    )
    axes.set_xlabel("predicted probability")
    axes.set_ylabel("observed frequency")
    axes.set_title(f"{result.benchmark}: calibration")
    axes.legend()
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return True


PLOTS = {
    "subsets.png": _plot_subsets,
    "best_of_n.png": _plot_curves,
    "distributions.png": _plot_distributions,
    "calibration.png": _plot_calibration,
}


def write_report(result: Result, output: Path) -> list[Path]:
    """Write ``result.json``, ``report.md`` and the plots the result has data for into
    ``output``; returns the files written."""
    matplotlib = require("matplotlib", "benchmark plots")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "benchmark plots")
    output.mkdir(parents=True, exist_ok=True)
    plots = [name for name, draw in PLOTS.items() if draw(result, plt, output / name)]
    for stale in PLOTS.keys() - set(plots):  # from an earlier run of the same output
        (output / stale).unlink(missing_ok=True)
    data = {
        **result.to_dict(),
        "distributions": result.distributions,
        "calibration": [list(pair) for pair in result.calibration],
    }
    (output / "result.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (output / "report.md").write_text(markdown(result, plots), encoding="utf-8")
    return [output / "result.json", output / "report.md", *(output / plot for plot in plots)]
