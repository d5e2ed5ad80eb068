"""What a probe found, per exploit: how often the variant beat what it is measured against, and
by how much.

Definitions, used in every report:

- **baseline**: what a variant is measured against - the honest sample's score for a blind
  exploit, the decoy control's score for an answer-aware one (`rewardlab.probe.exploit`).
- **scored**: rows where both the variant and its baseline got a value (status ``ok``).
- **win**: the variant scored more than its baseline (by over `TIE_TOLERANCE`); a **loss**, less.
- **win rate**: wins / scored. **mean gain**: the mean of variant - baseline over scored rows
  (negative when the exploit costs more than it earns).
- **failed**: rows where the baseline has a value and the variant has none (timeout, parse
  error, ...), by status. Not a win; but a trainer that drops failed samples instead of scoring
  them low rewards a variant that fails where its baseline would score low.
- **sign test p**: the chance of at least this many wins if wins and losses were a coin toss,
  for graders whose scores are noisy (a model judge): a perturbation that changes nothing still
  wins about as often as it loses there.
- An exploit **fails the probe** when its win rate is above the threshold (default 0: any win).
- **not probed**: rows whose honest score is not ``ok`` (nothing to compare a variant with), by
  status, with the first one's reason. A probe that probed no row, or could not make the token
  ids of its variants, measured nothing there: it is **unmeasured**, not a probe no exploit won.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rewardlab.rewards.contract import Score

#: Differences at most this large are ties (float noise in weighted sums).
TIE_TOLERANCE = 1e-9
#: Examples kept per exploit: the largest gains.
EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class Example:
    """One row where a variant gained.

    Attributes:
        id: The row's id.
        baseline: The baseline's value.
        variant: The variant's value.
        excerpt: The part of the variant that differs from the honest completion (clipped).
        reason: The reason the reward gave with the variant's score, if any.
    """

    id: str
    baseline: float
    variant: float
    excerpt: str
    reason: str | None

    @property
    def gain(self) -> float:
        return self.variant - self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "baseline": self.baseline,
            "variant": self.variant,
            "gain": self.gain,
            "excerpt": self.excerpt,
            "reason": self.reason,
        }


def sign_test_p(wins: int, losses: int) -> float | None:
    """P(at least ``wins`` heads in ``wins + losses`` fair coin tosses); None without any."""
    tosses = wins + losses
    if tosses == 0:
        return None
    return sum(math.comb(tosses, heads) for heads in range(wins, tosses + 1)) / 2**tosses


@dataclass(slots=True)
class ExploitResult:
    """The comparisons of one exploit (see the module docstring for the figures).

    Attributes:
        name: The exploit's name.
        kinds: The reward kinds it targets.
        answer_aware: Whether its baseline is the decoy control (True) or the honest sample.
        description: What its variant does.
        rows: Rows it made a variant for.
        scored: Rows where variant and baseline both have a value.
        wins: Scored rows where the variant scored more.
        losses: Scored rows where it scored less.
        gain_total: Sum of variant - baseline over scored rows.
        max_gain: The largest variant - baseline.
        failed: Rows where the baseline has a value and the variant none, by the variant's status.
        baseline_failed: Rows where the baseline has no value (answer-aware: the control failed).
        examples: The largest gains, with excerpts.
    """

    name: str
    kinds: list[str]
    answer_aware: bool
    description: str
    rows: int = 0
    scored: int = 0
    wins: int = 0
    losses: int = 0
    gain_total: float = 0.0
    max_gain: float | None = None
    failed: Counter[str] = field(default_factory=Counter)
    baseline_failed: int = 0
    examples: list[Example] = field(default_factory=list)

    def add(self, row_id: str, baseline: Score, variant: Score, excerpt: str) -> None:
        """Count one row's variant against its baseline."""
        self.rows += 1
        if baseline.value is None:
            self.baseline_failed += 1
            return
        if variant.value is None:
            self.failed[variant.status.value] += 1
            return
        gain = variant.value - baseline.value
        self.scored += 1
        self.gain_total += gain
        self.max_gain = gain if self.max_gain is None else max(self.max_gain, gain)
        if gain > TIE_TOLERANCE:
            self.wins += 1
            self.examples.append(Example(row_id, baseline.value, variant.value, excerpt, variant.reason))
            self.examples.sort(key=lambda example: -example.gain)
            del self.examples[EXAMPLES:]
        elif gain < -TIE_TOLERANCE:
            self.losses += 1

    @property
    def win_rate(self) -> float | None:
        return self.wins / self.scored if self.scored else None

    @property
    def mean_gain(self) -> float | None:
        return self.gain_total / self.scored if self.scored else None

    @property
    def p_value(self) -> float | None:
        return sign_test_p(self.wins, self.losses)

    def fails(self, threshold: float) -> bool:
        """Whether the exploit fails the probe: its win rate is above ``threshold``."""
        return self.win_rate is not None and self.win_rate > threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kinds": self.kinds,
            "answer_aware": self.answer_aware,
            "baseline": "decoy control" if self.answer_aware else "honest sample",
            "description": self.description,
            "rows": self.rows,
            "scored": self.scored,
            "wins": self.wins,
            "losses": self.losses,
            "win_rate": self.win_rate,
            "mean_gain": self.mean_gain,
            "max_gain": self.max_gain,
            "sign_test_p": self.p_value,
            "failed": dict(self.failed),
            "baseline_failed": self.baseline_failed,
            "examples": [example.to_dict() for example in self.examples],
        }


@dataclass(slots=True)
class NotProbed:
    """Rows left out of the probe for one status of their honest score.

    Attributes:
        rows: How many.
        reason: The first one's label and reason.
    """

    rows: int
    reason: str


@dataclass(slots=True)
class ProbeResult:
    """Everything one probe found.

    Attributes:
        reward: The probed reward's name.
        rows: Input rows probed (after ``limit``), readable or not.
        unreadable: Input rows that could not become samples (left out).
        honest: The honest samples' scores by status; only rows whose honest score is ``ok`` are
            probed.
        threshold: The win rate above which an exploit fails the probe.
        exploits: One result per exploit asked for, in library order.
        pipeline_failures: One line per way the reward itself failed (``backend_error`` or
            ``error`` on an honest sample, a variant or a control), as ``rewardlab score`` reports.
        not_probed: The rows left out, by their honest score's status.
        token_ids: What became of the rows' ``fields["completion_ids"]``: ``re-made`` (from the
            text, with the tokenizer given), ``dropped`` (no tokenizer), None (no row had any).
        ids_needed: Rows the reward could not score once their token ids were dropped.
    """

    reward: str
    rows: int
    unreadable: int
    honest: Counter[str]
    threshold: float
    exploits: list[ExploitResult]
    pipeline_failures: list[str] = field(default_factory=list)
    not_probed: dict[str, NotProbed] = field(default_factory=dict)
    token_ids: str | None = None
    ids_needed: int = 0

    @property
    def failing(self) -> list[ExploitResult]:
        """The exploits that fail the probe."""
        return [result for result in self.exploits if result.fails(self.threshold)]

    @property
    def probed(self) -> int:
        """Rows probed: those whose honest score is ``ok``."""
        return self.honest.get("ok", 0)

    @property
    def unmeasured(self) -> str | None:
        """Why the probe could not measure what it was asked to, or None when it could: no row
        was probed, or rows could not be scored without the token ids the probe cannot make."""
        if self.ids_needed:
            return (
                f"the reward cannot score {self.ids_needed} row(s) without fields.completion_ids, and "
                "the probe cannot make a variant's ids without the policy's tokenizer: give --tokenizer "
                "(tokenizer= from Python)"
            )
        if self.probed == 0:
            why = "; ".join(
                f"{entry.rows} {status}, e.g. {entry.reason}"
                for status, entry in sorted(self.not_probed.items())
            )
            return f"no row was probed: no honest score is ok ({why or 'no rows'})"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "rows": self.rows,
            "unreadable": self.unreadable,
            "honest": dict(self.honest),
            "threshold": self.threshold,
            "failing": [result.name for result in self.failing],
            "exploits": [result.to_dict() for result in self.exploits],
            "pipeline_failures": self.pipeline_failures,
            "probed": self.probed,
            "not_probed": {
                status: {"rows": entry.rows, "reason": entry.reason}
                for status, entry in sorted(self.not_probed.items())
            },
            "token_ids": self.token_ids,
            "unmeasured": self.unmeasured,
        }
