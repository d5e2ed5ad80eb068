"""A running summary of an offline scoring run, built from the output records themselves.

The summary folds in every record of the output file - those already there when a run resumes
and those it writes - so that after a resume it still describes the whole file, while the
throughput figures describe only the rows scored by this run.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Statuses that mean the pipeline itself failed (a backend down, a missing dependency, a bug),
#: not the row: a run with any of them did not really work.
SYSTEMIC_STATUSES = frozenset({"backend_error", "error"})


@dataclass(slots=True)
class Failure:
    """Rows where one part of the pipeline failed the same way, and the first reason given."""

    count: int
    reason: str


def failed_components(details: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    """(where, status) for each component a combination skipped because it failed, at any depth:
    `Combine` lists them in ``details["skipped"]``, a `Route` names its route in ``"route"``."""
    where = f"{path}/{details['route']}" if isinstance(details.get("route"), str) else path
    skipped = details.get("skipped")
    if isinstance(skipped, Mapping):
        for name, status in skipped.items():
            yield f"{where}/{name}".lstrip("/"), str(status)
    for name, nested in details.items():
        if isinstance(nested, Mapping) and name != "skipped":
            yield from failed_components(nested, f"{where}/{name}")


def _reason_of(component: str, reason: str | None) -> str:
    """The part of a combined reason ("a: ...; b: ...") that a component gave."""
    name = component.rsplit("/", 1)[-1]
    for part in (reason or "").split("; "):
        if part.startswith(f"{name}: "):
            return part[len(name) + 2 :]
    return reason or "no reason given"


def summary_path(output: Path) -> Path:
    """Where the JSON summary of ``output`` goes: ``<output>.summary.json`` beside it."""
    return output.with_name(output.name + ".summary.json")


@dataclass(slots=True)
class _Mean:
    total: float = 0.0
    count: int = 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    @property
    def value(self) -> float | None:
        return self.total / self.count if self.count else None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(slots=True)
class Summary:
    """Counts and means over an output file, and the throughput of the run that wrote it.

    Attributes:
        reward: The reward's name.
        output: The output file.
        rows: Records in the output.
        statuses: Records per score status.
        row_errors: Records for input rows that could not be read (a subset of ``invalid_input``).
        resumed: Records already in the output when the run started.
        skipped: Input rows skipped because their id was already in the output.
        scored: Rows scored (or reported as row errors) by this run.
        duplicate_ids: Input rows whose id repeats an earlier row's.
        model_calls: Model calls the scores needed (judges), with ``cached_calls`` of them
            answered by the cache; tokens and cost of the rest.
        wall_s: Wall time of this run.
        failures: Pipeline failures (`SYSTEMIC_STATUSES`), by ``"<where>: <status>"``: failed
            rows, and components a combination skipped because they failed.
    """

    reward: str
    output: str
    rows: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    row_errors: int = 0
    resumed: int = 0
    skipped: int = 0
    scored: int = 0
    duplicate_ids: int = 0
    wall_s: float = 0.0
    model_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failures: dict[str, Failure] = field(default_factory=dict)
    _value: _Mean = field(default_factory=_Mean, init=False, repr=False)
    _components: dict[str, _Mean] = field(default_factory=dict, init=False, repr=False)

    def add(self, record: Mapping[str, Any]) -> None:
        """Fold one output record in: ``{"id", "value", "status", "breakdown", "details", ...}``."""
        self.rows += 1
        status = record.get("status")
        self.statuses[str(status)] += 1
        if status == "ok" and _finite(record.get("value")):
            self._value.add(record["value"])
        for name, value in (record.get("breakdown") or {}).items():
            if _finite(value):
                self._components.setdefault(name, _Mean()).add(value)
        details = record.get("details") or {}
        if "row_error" in details:
            self.row_errors += 1
        if status in SYSTEMIC_STATUSES:
            where = (
                f"{self.reward}/{details['route']}" if isinstance(details.get("route"), str) else self.reward
            )
            self._failed(f"{where}: {status}", record.get("reason") or "no reason given")
        for where, component_status in failed_components(details):
            if component_status in SYSTEMIC_STATUSES:
                reason = _reason_of(where, record.get("reason"))
                self._failed(f"{self.reward}/{where}: {component_status}", reason)
        usage = record.get("usage")
        if isinstance(usage, Mapping):
            self.model_calls += int(usage.get("calls") or 0)
            self.cached_calls += int(usage.get("cached_calls") or 0)
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
            self.cost_usd += float(usage.get("cost_usd") or 0.0)

    def _failed(self, key: str, reason: str) -> None:
        if key in self.failures:
            self.failures[key].count += 1
        else:
            self.failures[key] = Failure(1, reason[:300])

    def failure_lines(self) -> list[str]:
        """One line per way the pipeline failed: where, the status, how many rows, the first reason."""
        return [
            f"{key} in {failure.count} rows, e.g. {failure.reason}"
            for key, failure in sorted(self.failures.items(), key=lambda item: -item[1].count)
        ]

    @property
    def mean_value(self) -> float | None:
        """Mean value over ``ok`` scores."""
        return self._value.value

    @property
    def breakdown_means(self) -> dict[str, float]:
        """Mean of each breakdown component over the scores that have it."""
        return {name: mean.total / mean.count for name, mean in sorted(self._components.items())}

    @property
    def rows_per_s(self) -> float | None:
        return self.scored / self.wall_s if self.wall_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "output": self.output,
            "rows": self.rows,
            "statuses": dict(sorted(self.statuses.items())),
            "row_errors": self.row_errors,
            "mean_value": self.mean_value,
            "breakdown_means": self.breakdown_means,
            "resumed": self.resumed,
            "skipped": self.skipped,
            "scored": self.scored,
            "duplicate_ids": self.duplicate_ids,
            "model_calls": self.model_calls,
            "cache_hits": self.cached_calls,
            "cache_misses": self.model_calls - self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "wall_s": self.wall_s,
            "rows_per_s": self.rows_per_s,
            "failures": {
                key: {"rows": f.count, "reason": f.reason} for key, f in sorted(self.failures.items())
            },
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def table(self) -> str:
        """A small aligned text table for a terminal."""
        entries: list[tuple[str, str]] = [("reward", self.reward), ("output", self.output)]
        entries.append(("rows", f"{self.rows} ({self.scored} scored now, {self.resumed} already written)"))
        entries += [(f"  {status}", str(count)) for status, count in sorted(self.statuses.items())]
        entries.append(("row errors", str(self.row_errors)))
        entries.append(("mean value", "-" if self.mean_value is None else f"{self.mean_value:.4f}"))
        entries += [(f"  {name}", f"{mean:.4f}") for name, mean in self.breakdown_means.items()]
        if self.model_calls:
            misses = self.model_calls - self.cached_calls
            entries.append(
                ("model calls", f"{self.model_calls} ({self.cached_calls} cache hits, {misses} misses)")
            )
            tokens = f"{self.prompt_tokens} prompt + {self.completion_tokens} completion"
            entries.append(("tokens", f"{tokens}, ${self.cost_usd:.4f}"))
        rate = "-" if self.rows_per_s is None else f"{self.rows_per_s:.1f} rows/s"
        entries.append(("throughput", f"{rate} over {self.wall_s:.2f} s"))
        if self.skipped:
            entries.append(("skipped (resume)", str(self.skipped)))
        width = max(len(label) for label, _ in entries)
        lines = [f"{label.ljust(width)}  {value}" for label, value in entries]
        if self.duplicate_ids:
            lines.append(
                f"warning: {self.duplicate_ids} input rows repeat an earlier id; all were scored, but "
                "--resume counts an id as done once any of its rows is written"
            )
        return "\n".join(lines)
