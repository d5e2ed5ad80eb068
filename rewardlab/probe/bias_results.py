"""What a bias probe found: per probe, how often the reward's preference flipped, with a 95%
confidence interval.

Definitions, used in every report:

- **preference** of a pair: the answer with the higher value (by more than `TIE_TOLERANCE`),
  else a **tie**. A pairwise judge scores a pair in both orders, so its values are its own
  comparison (the win probability averaged over the orders).
- A perturbation probe rewrites the pair so that the loser should not gain (`bias_probes`) and
  scores it again. **flip**: the loser is now preferred; **held**: the winner still is; **tie**:
  neither; **failed**: a rewritten pair got no value (by status). Pairs whose original
  preference is a tie or failed have no loser and are not probed (see the result's
  ``original``); **skipped** pairs had a loser the probe could not rewrite (empty, no prompt);
  **not tested** pairs were rewritten short of the change the probe is about (padding that leaves
  the loser the shorter answer), so whether they held says nothing - counted apart from all.
- **control**: the same rewrite applied to the winner instead; a flip there is the winner losing
  its lead. A reward that pays for the change flips often when the loser gets it and seldom when
  the winner does; one whose verdicts are noise flips about as often either way (compare the two
  rates, not the first with 0); one that penalises the change flips more in the control.
- **position**: the pairwise judge's verdict with the answers in one order and in the other;
  a flip is a pair whose winner changed with the order (the same position won both times), a tie
  one where either order was a tie.
- **flip rate**: flips / (flips + held), with Wilson's 95% score interval (`wilson_interval`).
- **self_preference**: over pairs with exactly one answer by the judge's model family, how often
  the reward prefers that answer (ties apart), beside how often the labels do.
- A bias probe is **unmeasured** when no probe asked for has a decided pair (every pair tied,
  failed, was skipped or not tested, or no probe applies) and self-preference has none either:
  not a probe that found no bias.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

#: Differences at most this large are ties (float noise in weighted sums).
TIE_TOLERANCE = 1e-9
#: The normal quantile of a two-sided 95% interval.
Z_95 = NormalDist().inv_cdf(0.975)
#: Pair ids kept per probe, as examples of flips.
EXAMPLES = 5
#: A pair's verdict under one rewrite (else the status of a failure).
FLIP, HELD, TIE, SKIPPED, NOT_TESTED = "flip", "held", "tie", "skipped", "not_tested"


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson's score interval for a binomial proportion (Wilson 1927, "Probable inference, the
    law of succession, and statistical inference", JASA 22: 209-212), without continuity
    correction: ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``. The same as
    ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``. None without trials."""
    if trials == 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes in {trials} trials")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # At 0 or at every trial one bound is exactly 0 or 1; computed, it can miss by a rounding error.
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == trials else centre + half
    return low, high


def _interval_dict(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [interval[0], interval[1]]


@dataclass(slots=True)
class FlipCount:
    """Pairs counted by what one rewrite did to their preference (see the module docstring).

    Attributes:
        flips: Pairs whose preference moved to the other answer.
        held: Pairs whose preference stayed.
        ties: Pairs that became a tie (position: a tie in either order).
        failed: Pairs where a rewritten pair got no value, by status.
        skipped: Pairs the probe could not rewrite (an empty answer, no prompt).
        not_tested: Pairs whose rewrite fell short of the change the probe is about.
        not_tested_reason: The first such pair's id and why.
        examples: Ids of the first flipped pairs.
    """

    flips: int = 0
    held: int = 0
    ties: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    not_tested: int = 0
    not_tested_reason: str | None = None
    examples: list[str] = field(default_factory=list)

    def add(self, pair_id: str, verdict: str, reason: str | None = None) -> None:
        """Count one pair's verdict: ``flip``, ``held``, ``tie``, ``skipped``, ``not_tested``
        (with its ``reason``), or the status of a failure."""
        if verdict == FLIP:
            self.flips += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(pair_id)
        elif verdict == HELD:
            self.held += 1
        elif verdict == TIE:
            self.ties += 1
        elif verdict == SKIPPED:
            self.skipped += 1
        elif verdict == NOT_TESTED:
            self.not_tested += 1
            if self.not_tested_reason is None:
                self.not_tested_reason = f"{pair_id}: {reason}"
        else:
            self.failed[verdict] += 1

    @property
    def decided(self) -> int:
        """Pairs with a preference both before and after: the flip rate's denominator."""
        return self.flips + self.held

    @property
    def pairs(self) -> int:
        """Pairs rewritten and scored."""
        return self.decided + self.ties + sum(self.failed.values())

    @property
    def rate(self) -> float | None:
        """flips / (flips + held); None without a decided pair."""
        return self.flips / self.decided if self.decided else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.flips, self.decided)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "decided": self.decided,
            "flips": self.flips,
            "held": self.held,
            "ties": self.ties,
            "failed": dict(self.failed),
            "skipped": self.skipped,
            "not_tested": self.not_tested,
            "not_tested_reason": self.not_tested_reason,
            "flip_rate": self.rate,
            "interval_95": _interval_dict(self.interval),
            "examples": self.examples,
        }


@dataclass(slots=True)
class ProbeFlips:
    """One probe's figures.

    Attributes:
        name: The probe's name.
        description: What it changes.
        not_applicable: Why the probe does not apply to this reward or these pairs; None when it
            does.
        flips: The probe's flips: the loser rewritten (position: the two orders).
        control: The same rewrite applied to the winner instead; None for position.
        first_position: Position only: flips where the answer shown first won in both orders.
    """

    name: str
    description: str
    not_applicable: str | None = None
    flips: FlipCount = field(default_factory=FlipCount)
    control: FlipCount | None = None
    first_position: int | None = None

    def fails(self, threshold: float) -> bool:
        """Whether the flip rate is above ``threshold``."""
        return self.flips.rate is not None and self.flips.rate > threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "not_applicable": self.not_applicable,
            **self.flips.to_dict(),
            **({"first_position": self.first_position} if self.first_position is not None else {}),
            "control": None if self.control is None else self.control.to_dict(),
        }


@dataclass(slots=True)
class SelfPreference:
    """How the reward treats answers written by the judge's own model family.

    Attributes:
        family: The keywords a writer's name is matched against (one family's models).
        judge_model: The judge's model, when the reward names one.
        not_applicable: Why there is nothing to measure; None when there is.
        own_wins: Pairs where the reward preferred the own-family answer.
        other_wins: Pairs where it preferred the other answer.
        ties: Pairs it tied.
        failed: Pairs it could not score.
        labelled: Labelled pairs among those with one own-family answer.
        label_own_wins: Labelled pairs whose chosen answer is the own-family one.
    """

    family: tuple[str, ...] = ()
    judge_model: str | None = None
    not_applicable: str | None = None
    own_wins: int = 0
    other_wins: int = 0
    ties: int = 0
    failed: int = 0
    labelled: int = 0
    label_own_wins: int = 0

    @property
    def decided(self) -> int:
        return self.own_wins + self.other_wins

    @property
    def pairs(self) -> int:
        return self.decided + self.ties + self.failed

    @property
    def own_win_rate(self) -> float | None:
        return self.own_wins / self.decided if self.decided else None

    @property
    def label_own_win_rate(self) -> float | None:
        return self.label_own_wins / self.labelled if self.labelled else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": list(self.family),
            "judge_model": self.judge_model,
            "not_applicable": self.not_applicable,
            "pairs": self.pairs,
            "own_wins": self.own_wins,
            "other_wins": self.other_wins,
            "ties": self.ties,
            "failed": self.failed,
            "own_win_rate": self.own_win_rate,
            "interval_95": _interval_dict(wilson_interval(self.own_wins, self.decided)),
            "labelled": self.labelled,
            "label_own_win_rate": self.label_own_win_rate,
            "label_interval_95": _interval_dict(wilson_interval(self.label_own_wins, self.labelled)),
        }


@dataclass(slots=True)
class BiasResult:
    """Everything one bias probe found.

    Attributes:
        reward: The probed reward's name.
        pairs: Pairs read.
        original: The pairs' original preferences: ``a``, ``b``, ``tie``, or a failure status.
        agreement: Labelled pairs whose original preference is decided, and how many of those
            prefer the chosen answer: (agreeing, decided).
        threshold: The flip rate above which a probe fails.
        probes: One tally per probe asked for, in report order.
        self_preference: The self-preference figures, when asked for.
        pipeline_failures: One line per way the reward itself failed (``backend_error`` or
            ``error``), as ``rewardlab score`` reports them.
        wall_s: Seconds the probe took.
        outcomes: Per pair, in input order: its ``id``, its ``original`` preference, and each
            probe's verdict (``flip``, ``held``, ``tie``, ``skipped``, ``not_tested`` or a failure's
            status) under
            ``<probe>`` and ``<probe>/control``.
    """

    reward: str
    pairs: int
    original: Counter[str]
    agreement: tuple[int, int]
    threshold: float
    probes: list[ProbeFlips]
    self_preference: SelfPreference | None = None
    pipeline_failures: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    outcomes: list[dict[str, str]] = field(default_factory=list)

    @property
    def failing(self) -> list[ProbeFlips]:
        """The probes whose flip rate is above the threshold."""
        return [probe for probe in self.probes if probe.fails(self.threshold)]

    @property
    def not_probed(self) -> int:
        """Pairs with no original preference (a tie or a failure): no loser to rewrite."""
        return sum(count for key, count in self.original.items() if key not in ("a", "b"))

    @property
    def unmeasured(self) -> str | None:
        """Why nothing was measured (see the module docstring), or None when something was."""
        if any(not probe.not_applicable and probe.flips.decided for probe in self.probes):
            return None
        if self.self_preference is not None and self.self_preference.decided:
            return None
        if self.pairs and self.not_probed == self.pairs:
            return "no pair has a preference to flip: every original verdict is a tie or failed"
        return "no probe has a pair whose preference held or flipped"

    def to_dict(self) -> dict[str, Any]:
        agreeing, decided = self.agreement
        return {
            "reward": self.reward,
            "pairs": self.pairs,
            "original": dict(self.original),
            "label_agreement": {"agreeing": agreeing, "decided": decided},
            "threshold": self.threshold,
            "failing": [probe.name for probe in self.failing],
            "probes": [probe.to_dict() for probe in self.probes],
            "self_preference": None if self.self_preference is None else self.self_preference.to_dict(),
            "pipeline_failures": self.pipeline_failures,
            "not_probed": self.not_probed,
            "unmeasured": self.unmeasured,
            "wall_s": round(self.wall_s, 3),
            "outcomes": self.outcomes,
        }
