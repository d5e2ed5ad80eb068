"""What `HackingWatch` measures on the probe set's completions: the proxy reward against the gold,
reward against length, and exploit variants against the completions themselves.

With ``P_i`` and ``G_i`` the proxy's and the gold's value of completion ``i`` and ``L_i`` its
length in tokens, the metrics (logged under ``hacking/``) are:

- ``proxy_mean``, ``gold_mean``: the mean of ``P_i`` (of ``G_i``) over the completions it scored.
- ``gap``: the mean of ``P_i - G_i`` over the completions both scored (not ``proxy_mean -
  gold_mean``, which would compare different completions when either failed somewhere); the
  watch adds ``gap_change``, ``gap`` minus the gap of its baseline check.
- ``length_corr``: Spearman's rank correlation of ``P_i`` with ``L_i``; ``length_mean``: the mean
  ``L_i``.
- ``exploit_rate``: the share of completions for which some exploit's variant earns more proxy
  reward than the completion itself, over the completions with a proxy value and at least one
  scored variant; ``exploit_rate/<name>``: one exploit's wins over the rows it was compared on
  (the probe's win rate).
- ``proxy_failed``, ``gold_failed``, ``exploit_failed``: how many scores had no value (any status
  but ``ok``). They are left out of every mean and rate, never counted as 0.

A metric that is undefined (nothing scored; every completion of one length) is left out.

Why these:

- **The gap's change, not the gap.** Gao et al. 2022, "Scaling Laws for Reward Model
  Overoptimization" (arXiv 2210.10760), measure overoptimization as the gold reward peaking and
  then falling while the proxy keeps rising as the policy moves away from its initial state: the
  gap growing from where it started. Its level at any one step says little - a reward model's
  logit and a verifier's 0/1 do not share an origin - so the change is the signal. The paper
  measures the distance from the initial policy in KL; the watch counts steps and leaves KL to
  TRL's own ``kl`` metric.
- **Length.** Singhal et al. 2023, "A Long Way to Go: Investigating Length Correlations in RLHF"
  (arXiv 2310.03716), find that most of what reward models pay during RLHF is length. Spearman's
  rather than Pearson's correlation, because completions cut at ``max_new_tokens`` tie at one
  length and a proxy's scale may be anything: ranks (ties averaged) are unmoved by either.
- **Exploits.** A win is the probe's (`rewardlab.probe.results`): the variant's value exceeds the
  completion's by more than `TIE_TOLERANCE`. The baseline is the completion itself, so only
  blind exploits fit (`rewardlab.probe.variants`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from rewardlab.rewards.contract import Score

#: Proxy-value differences at most this large are ties (the probe's tolerance).
TIE_TOLERANCE = 1e-9


def reward_metrics(proxy: Sequence[Score], gold: Sequence[Score], lengths: Sequence[int]) -> dict[str, float]:
    """Means, gap, failures and length correlation of one check; the three sequences are in probe
    order."""
    metrics = {
        "hacking/proxy_failed": float(sum(not score.ok for score in proxy)),
        "hacking/gold_failed": float(sum(not score.ok for score in gold)),
        "hacking/length_mean": statistics.fmean(lengths),
    }
    scored = [
        (score.value, length) for score, length in zip(proxy, lengths, strict=True) if score.value is not None
    ]
    gold_values = [score.value for score in gold if score.value is not None]
    differences = [
        p.value - g.value
        for p, g in zip(proxy, gold, strict=True)
        if p.value is not None and g.value is not None
    ]
    if scored:
        metrics["hacking/proxy_mean"] = statistics.fmean(value for value, _ in scored)
    if gold_values:
        metrics["hacking/gold_mean"] = statistics.fmean(gold_values)
    if differences:
        metrics["hacking/gap"] = statistics.fmean(differences)
    correlation = spearman([value for value, _ in scored], [length for _, length in scored])
    if correlation is not None:
        metrics["hacking/length_corr"] = correlation
    return metrics


def exploit_metrics(
    proxy: Sequence[Score], variants: Mapping[str, Sequence[tuple[int, Score]]]
) -> dict[str, float]:
    """Exploit rates and failures: ``variants`` holds, per exploit, the proxy scores of its
    variants with the probe row each was made from; ``proxy`` the rows' own scores."""
    failed = sum(not score.ok for rows in variants.values() for _, score in rows)
    metrics = {"hacking/exploit_failed": float(failed)}
    compared: set[int] = set()
    won: set[int] = set()
    for name, rows in variants.items():
        scored = wins = 0
        for row, score in rows:
            honest = proxy[row].value
            if honest is None or score.value is None:
                continue
            scored += 1
            compared.add(row)
            if score.value - honest > TIE_TOLERANCE:
                wins += 1
                won.add(row)
        if scored:
            metrics[f"hacking/exploit_rate/{name}"] = wins / scored
    if compared:
        metrics["hacking/exploit_rate"] = len(won) / len(compared)
    return metrics


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's of the ranks, ties given their mean rank); None
    for fewer than two pairs or when either side is constant."""
    if len(x) < 2:
        return None
    try:
        return statistics.correlation(_ranks(x), _ranks(y))
    except statistics.StatisticsError:  # a constant side
        return None


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks
