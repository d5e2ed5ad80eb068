"""A bias probe's result for people: a table for the terminal, ``report.md``, ``bias.json``, and
``flip_rates.png`` - each probe's flip rate with its 95% interval - where matplotlib (the
``bench`` extra, which draws the benchmark plots) is installed; without it the report says so.
`rewardlab.probe.bias_results` defines every figure.
"""

from __future__ import annotations

import json
from pathlib import Path

from rewardlab.errors import MissingDependency
from rewardlab.optional import require
from rewardlab.probe.bias_results import BiasResult, FlipCount, ProbeFlips, SelfPreference, wilson_interval

REPORT_FILE = "report.md"
RESULT_FILE = "bias.json"
PLOT_FILE = "flip_rates.png"
_COLUMNS = (
    "probe",
    "pairs",
    "flips",
    "held",
    "ties",
    "failed",
    "skipped",
    "flip rate",
    "95% interval",
    "control",
    "result",
)
_SELF_COLUMNS = (
    "family",
    "pairs",
    "own wins",
    "other wins",
    "ties, failed",
    "own win rate",
    "95% interval",
    "labels' own win rate",
)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(interval: tuple[float, float] | None) -> str:
    return "-" if interval is None else f"{interval[0]:.1%} - {interval[1]:.1%}"


def _verdict(probe: ProbeFlips, threshold: float) -> str:
    if probe.not_applicable:
        return "n/a"
    if probe.flips.decided == 0:
        return "no pairs"
    return "FAIL" if probe.fails(threshold) else "ok"


def _control(control: FlipCount | None) -> str:
    if control is None or control.rate is None:
        return "-"
    return f"{control.rate:.1%} ({control.flips}/{control.decided})"


def _cells(probe: ProbeFlips, threshold: float) -> list[str]:
    if probe.not_applicable:
        return [probe.name, *["-"] * (len(_COLUMNS) - 2), "n/a"]
    flips = probe.flips
    failed = ", ".join(f"{count} {status}" for status, count in sorted(flips.failed.items())) or "0"
    return [
        probe.name,
        str(flips.pairs),
        str(flips.flips),
        str(flips.held),
        str(flips.ties),
        failed,
        str(flips.skipped),
        _rate(flips.rate),
        _interval(flips.interval),
        _control(probe.control),
        _verdict(probe, threshold),
    ]


def _self_cells(result: SelfPreference) -> list[str]:
    return [
        ",".join(result.family),
        str(result.pairs),
        str(result.own_wins),
        str(result.other_wins),
        f"{result.ties}, {result.failed}",
        _rate(result.own_win_rate),
        _interval(wilson_interval(result.own_wins, result.decided)),
        f"{_rate(result.label_own_win_rate)} of {result.labelled}" if result.labelled else "-",
    ]


def _headline(result: BiasResult) -> list[str]:
    original = ", ".join(f"{count} {key}" for key, count in sorted(result.original.items()))
    agreeing, decided = result.agreement
    failing = result.failing
    lines = [
        f"reward: {result.reward}",
        f"pairs: {result.pairs} ({result.wall_s:.1f} s); original preference: {original}",
    ]
    if decided:
        lines.append(
            f"agrees with the labels on {agreeing} of {decided} decided labelled pairs "
            f"({agreeing / decided:.1%})"
        )
    if failing:
        lines.append(
            f"{len(failing)} probe(s) flip more often than {result.threshold:.1%}: "
            + ", ".join(p.name for p in failing)
        )
    elif result.unmeasured:
        lines.append(f"NOTHING MEASURED: {result.unmeasured}")
    else:
        lines.append(f"no probe flips more often than {result.threshold:.1%}")
    if result.pipeline_failures:
        lines.append("pipeline failures: " + "; ".join(result.pipeline_failures))
    return lines


def _left_out(result: BiasResult) -> list[str]:
    """Pairs left out of the flip rates, and why: those with no preference, and per probe those
    its rewrite fell short on (not tested)."""
    kinds = ", ".join(
        f"{count} {key}" for key, count in sorted(result.original.items()) if key not in ("a", "b")
    )
    lines = [
        f"not probed: {result.not_probed} pairs ({kinds}): no preference, so no loser to rewrite"
        if result.not_probed
        else "not probed: none (every pair has a preference)"
    ]
    for probe in result.probes:
        for label, count in (("", probe.flips), (" control", probe.control)):
            if count is not None and count.not_tested:
                lines.append(
                    f"{probe.name}{label}: {count.not_tested} pairs not tested (left out of the rate), "
                    f"e.g. {count.not_tested_reason}"
                )
    return lines


def _text_rows(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def table(result: BiasResult) -> str:
    """The result as plain text, for the terminal."""
    lines = [*_headline(result), ""]
    lines += _text_rows([list(_COLUMNS), *(_cells(probe, result.threshold) for probe in result.probes)])
    lines += _left_out(result)
    self_preference = result.self_preference
    if self_preference is not None:
        lines.append("")
        if self_preference.not_applicable:
            lines.append(f"self_preference: n/a ({self_preference.not_applicable})")
        else:
            lines.append("self_preference (original pairs)")
            lines += _text_rows([list(_SELF_COLUMNS), _self_cells(self_preference)])
    return "\n".join(lines) + "\n"


def _markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 2) + "---|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def markdown(result: BiasResult, plot: str | None = None) -> str:
    """The report: headline, the flip table, self-preference, what each probe does, definitions."""
    lines = [f"# Bias probe: {result.reward}", "", *(f"- {line}" for line in _headline(result)), ""]
    rows = []
    for probe in result.probes:
        cells = _cells(probe, result.threshold)
        cells[-1] = "**FAIL**" if cells[-1] == "FAIL" else cells[-1]
        rows.append(cells)
    lines += _markdown_table(_COLUMNS, rows)
    lines += ["", *(f"- {line}" for line in _left_out(result))]
    position = next((p for p in result.probes if p.name == "position" and p.first_position is not None), None)
    if position is not None and position.flips.flips:
        lines += [
            "",
            f"Position flips where the answer shown first won in both orders: {position.first_position} "
            f"of {position.flips.flips}.",
        ]
    if plot is not None:
        lines += ["", f"![flip rates]({plot})"]
    elif any(not p.not_applicable and p.flips.decided for p in result.probes):
        lines += ["", "No plot: matplotlib is not installed (pip install 'rewardlab[bench]')."]
    self_preference = result.self_preference
    if self_preference is not None:
        lines += ["", "## Self-preference", ""]
        if self_preference.not_applicable:
            lines.append(f"n/a: {self_preference.not_applicable}.")
        else:
            model = f" (judge model: {self_preference.judge_model})" if self_preference.judge_model else ""
            lines += [
                f"Pairs with exactly one answer by the judge's family{model}: how often the reward "
                "prefers that answer, beside how often the labels do.",
                "",
                *_markdown_table(_SELF_COLUMNS, [_self_cells(self_preference)]),
            ]
    lines += ["", "## Probes", ""]
    lines += [f"- `{probe.name}`: {probe.description}." for probe in result.probes]
    lines += ["", "## Flipped pairs", ""]
    flipped = [probe for probe in result.probes if probe.flips.examples]
    lines += [
        f"- `{probe.name}`: " + ", ".join(f"`{pair}`" for pair in probe.flips.examples) for probe in flipped
    ] or ["None."]
    lines += [
        "",
        "## Definitions",
        "",
        "- preference: the answer with the higher value; a perturbation rewrites the pair so the loser "
        "should not gain, and the pair is scored again.",
        "- flip: the loser is now preferred (position: the winner changed with the order); held: it is "
        "not; ties and failed pairs are left out of the flip rate, flips / (flips + held).",
        "- 95% interval: Wilson's score interval. skipped: pairs the probe could not rewrite; not "
        "tested: pairs its rewrite fell short on (padding that leaves the loser shorter), left out.",
        "- control: the same rewrite applied to the winner instead, flips over decided pairs; a reward "
        "whose verdicts are noise flips about as often there, one that pays for the change seldom.",
        f"- A probe fails when its flip rate is above the threshold ({result.threshold:.1%}).",
    ]
    return "\n".join(lines) + "\n"


def _bars(axes, counts: list[FlipCount], offset: float, label: str, color: str) -> None:
    rates = [count.rate or 0.0 for count in counts]
    intervals = [count.interval or (0.0, 0.0) for count in counts]
    errors = [
        [rate - low for rate, (low, _) in zip(rates, intervals, strict=True)],
        [high - rate for rate, (_, high) in zip(rates, intervals, strict=True)],
    ]
    places = [index + offset for index in range(len(counts))]
    axes.barh(places, rates, height=0.4, xerr=errors, color=color, capsize=3, label=label)


def _plot(result: BiasResult, path: Path) -> bool:
    shown = [p for p in result.probes if not p.not_applicable and p.flips.decided]
    if not shown:
        return False
    matplotlib = require("matplotlib", "bias probe plots")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "bias probe plots")
    figure, axes = plt.subplots(figsize=(5.5, 0.6 * len(shown) + 1.5))
    _bars(axes, [p.flips for p in shown], -0.2, "flips", "tab:blue")
    _bars(axes, [p.control or FlipCount() for p in shown], 0.2, "control (winner rewritten)", "tab:grey")
    axes.set_yticks(range(len(shown)), [p.name for p in shown])
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize="small", frameon=False)
    axes.axvline(result.threshold, linestyle="--", color="grey")
    axes.set_xlim(0, 1)
    axes.invert_yaxis()
    axes.set_xlabel("flip rate (95% Wilson interval)")
    axes.set_title(f"{result.reward}: bias probes")
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return True


def write_bias_report(result: BiasResult, output: Path) -> list[Path]:
    """Write ``report.md``, ``bias.json`` and, with matplotlib, ``flip_rates.png`` into the
    folder ``output`` (made if missing); returns the files written."""
    output.mkdir(parents=True, exist_ok=True)
    try:
        plotted = _plot(result, output / PLOT_FILE)
    except MissingDependency:
        plotted = False
    if not plotted:
        (output / PLOT_FILE).unlink(missing_ok=True)  # from an earlier run of the same output
    (output / REPORT_FILE).write_text(markdown(result, PLOT_FILE if plotted else None), encoding="utf-8")
    (output / RESULT_FILE).write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return [output / RESULT_FILE, output / REPORT_FILE, *([output / PLOT_FILE] if plotted else [])]
