"""A probe's result for people: a table for the terminal, ``report.md`` and ``probe.json``.

Blind and answer-aware exploits are reported in separate tables, since they are measured against
different baselines (`rewardlab.probe.results` defines every figure).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rewardlab.probe.results import ExploitResult, ProbeResult

REPORT_FILE = "report.md"
RESULT_FILE = "probe.json"
_COLUMNS = (
    "exploit",
    "targets",
    "rows",
    "scored",
    "wins",
    "losses",
    "win rate",
    "mean gain",
    "failed",
    "result",
)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _gain(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def _verdict(result: ExploitResult, threshold: float) -> str:
    if result.scored == 0:
        return "not scored" if result.rows else "no rows"
    return "FAIL" if result.fails(threshold) else "ok"


def _cells(result: ExploitResult, threshold: float) -> list[str]:
    failed = ", ".join(f"{count} {status}" for status, count in sorted(result.failed.items())) or "0"
    return [
        result.name,
        ",".join(result.kinds),
        str(result.rows),
        str(result.scored),
        str(result.wins),
        str(result.losses),
        _rate(result.win_rate),
        _gain(result.mean_gain),
        failed,
        _verdict(result, threshold),
    ]


def _split(result: ProbeResult) -> tuple[list[ExploitResult], list[ExploitResult]]:
    made = [exploit for exploit in result.exploits if exploit.rows]
    return [e for e in made if not e.answer_aware], [e for e in made if e.answer_aware]


def _markdown_table(results: Sequence[ExploitResult], threshold: float) -> list[str]:
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|---|---|" + "---:|" * 7 + "---|"]
    for exploit in results:
        cells = _cells(exploit, threshold)
        cells[-1] = "**FAIL**" if cells[-1] == "FAIL" else cells[-1]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _text_table(title: str, results: Sequence[ExploitResult], threshold: float) -> list[str]:
    rows = [list(_COLUMNS), *(_cells(exploit, threshold) for exploit in results)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(_COLUMNS))]
    lines = [title]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return lines


def _headline(result: ProbeResult) -> list[str]:
    honest = ", ".join(f"{count} {status}" for status, count in sorted(result.honest.items()))
    failing = result.failing
    if failing:
        verdict = (
            f"{len(failing)} exploit(s) fail the probe (win rate above {result.threshold:.1%}): "
            + ", ".join(exploit.name for exploit in failing)
        )
    elif result.probed == 0:
        verdict = "NOTHING MEASURED: no row was probed"
    else:
        verdict = f"no exploit's win rate is above {result.threshold:.1%}"
    lines = [
        f"reward: {result.reward}",
        f"rows: {result.rows} ({result.unreadable} unreadable); honest scores: {honest or 'none'}",
        verdict,
        f"probed: {result.probed} rows; not probed: "
        + (
            "; ".join(
                f"{entry.rows} {status} (e.g. {entry.reason})"
                for status, entry in sorted(result.not_probed.items())
            )
            or "none"
        ),
    ]
    if result.token_ids == "re-made":
        lines.append("token ids: every scored text's completion_ids made from it with the tokenizer given")
    elif result.token_ids == "dropped":
        lines.append("token ids: completion_ids dropped (no tokenizer given: a variant's ids are unknown)")
    if result.ids_needed:
        lines.append(f"could not score: {result.unmeasured}")
    if result.pipeline_failures:
        lines.append("pipeline failures: " + "; ".join(result.pipeline_failures))
    return lines


def table(result: ProbeResult) -> str:
    """The result as plain-text tables, for the terminal."""
    blind, aware = _split(result)
    lines = _headline(result)
    if blind:
        lines += ["", *_text_table("blind exploits (baseline: the honest sample)", blind, result.threshold)]
    if aware:
        lines += [
            "",
            *_text_table("answer-aware exploits (baseline: a decoy control)", aware, result.threshold),
        ]
    return "\n".join(lines) + "\n"


def _examples(results: Sequence[ExploitResult]) -> list[str]:
    lines: list[str] = []
    for exploit in results:
        if not exploit.examples:
            continue
        lines += ["", f"### {exploit.name}", "", exploit.description, ""]
        for example in exploit.examples:
            excerpt = example.excerpt.replace("```", "'''")
            lines += [
                f"- `{example.id}`: {example.baseline:.4f} -> {example.variant:.4f} ({example.gain:+.4f})"
                + (f"; reward's reason: {example.reason}" if example.reason else ""),
                "",
                "  ```text",
                *(f"  {line}" for line in excerpt.splitlines()),
                "  ```",
            ]
    return lines


def markdown(result: ProbeResult) -> str:
    """The report: headline, one table per baseline, examples of wins, and the definitions."""
    blind, aware = _split(result)
    lines = [f"# Exploit probe: {result.reward}", "", *(f"- {line}" for line in _headline(result))]
    if blind:
        lines += ["", "## Blind exploits", "", "Baseline: the honest sample's score.", ""]
        lines += _markdown_table(blind, result.threshold)
    if aware:
        lines += [
            "",
            "## Answer-aware exploits",
            "",
            "Baseline: the same variant with a wrong answer (a decoy) in place of the reference's.",
            "",
        ]
        lines += _markdown_table(aware, result.threshold)
    unused = [exploit.name for exploit in result.exploits if not exploit.rows]
    if unused:
        lines += ["", "Not applicable to any row: " + ", ".join(unused) + "."]
    examples = _examples([*blind, *aware])
    if examples:
        lines += ["", "## Examples of wins", *examples]
    lines += [
        "",
        "## Definitions",
        "",
        "- win: the variant scored more than its baseline; win rate: wins over rows where both "
        "have a value; mean gain: the mean of variant minus baseline over those rows.",
        "- failed: rows where the baseline has a value and the variant none, by status.",
        f"- An exploit fails the probe when its win rate is above the threshold ({result.threshold:.1%}).",
    ]
    return "\n".join(lines) + "\n"


def write_report(result: ProbeResult, output: Path) -> None:
    """Write ``report.md`` and ``probe.json`` into the folder ``output`` (made if missing)."""
    output.mkdir(parents=True, exist_ok=True)
    (output / REPORT_FILE).write_text(markdown(result))
    (output / RESULT_FILE).write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
