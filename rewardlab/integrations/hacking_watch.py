"""Watching a TRL run for reward hacking: `HackingWatch`, a `TrainerCallback` that every few steps
samples the policy on a fixed probe set (`rewardlab.integrations.policy_samples`) and compares the
reward it trains on (the **proxy**) with a reward it does not train on (the **gold**: a verifier,
a held-out judge), reward with length, and exploit variants with the completions themselves
(`rewardlab.integrations.hacking_metrics` defines each metric and says where it comes from).

A fixed probe set, decoded greedily by default, because the training batch changes every step:
the same prompts decoded the same way make a change between checks the policy's. The first check,
when training starts, is the baseline the proxy-gold gap's change is measured from; it never
alerts. Past a threshold (`HackingThresholds`) a check logs an alert, warns, or stops the run.

The exploits are functions from a sample to its variant's text, by name;
`rewardlab.probe.variants.blind_variants` makes them from the probe's library (the watch may not
import the probe, which sits in its layer). A variant is scored where the probe scores it
(`rewardlab.probe.runner`): in its completion's place, beside the rest of that completion's group
(`Sample.group_key`) and the rest of the probe set, so a reward that scores a completion against
its group (kimi length, pairwise judges, group length control) compares the variant with the
honest completions it would have been sampled with, never with other variants. One batch holds one
substitution per group; a group of G completions costs G scorings of the probe set per exploit.
A variant's ``completion_ids`` are its own text tokenized again with the trainer's tokenizer
(`rewardlab.integrations.policy_samples.completion_token_ids`): the honest ids would charge it the
honest completion's length, and none would leave a proxy that counts tokens unable to score it.

Such a proxy is only watched as the trainer pays it when the probe set has groups:
``WatchSampling(num_generations=..., do_sample=True)``. A proxy that says it is group-relative
(`Reward.scores_groups`) watched with one completion per prompt gets a warning at the first check.
For one that does not say so (a reward of your own), the first check scores such a probe set once
more as a single group; if the proxy's values change, it warns the same way.

Which completions form a group is the proxy's choice: ``group_field`` names a `Sample.fields` key
(kimi length, pairwise and listwise judges, group length control, reward-model shaping), else the
prompt. The watch reads every ``group_field`` in the proxy (and in the rewards it holds), puts two
completions in one group when any of those keys, or ``group_id``, puts them together
(`Sample.group_key`): its groups are then never finer than the proxy's, so no batch holds two
variants of one of the proxy's groups, whatever field the proxy groups by.

How the trainer is used: a callback cannot call ``Trainer.log``. At a check step the watch asks
for a log (``control.should_log``) and, in ``on_log``, adds its metrics to the ``logs`` dict and to
that step's entry of ``state.log_history``; the baseline's metrics are a ``state.log_history``
entry of their own. Reporting integrations (``report_to``) are callbacks the trainer adds before
yours, so they read ``logs`` before the watch fills it: to send the metrics to one, move it after
the watch, e.g. ``trainer.add_callback(trainer.pop_callback(WandbCallback))``. The checks run in
``on_step_end``, after the optimizer step, as `RubricElicitationCallback`'s do.

In a distributed run the main process alone samples and scores, and tells every process whether
to stop. Sharded training (FSDP, DeepSpeed ZeRO-3), where generating needs every process, is not
supported.
"""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rewardlab.integrations.hacking_metrics import TIE_TOLERANCE, Measured, exploit_metrics, reward_metrics
from rewardlab.integrations.policy_samples import WatchSampling, completion_token_ids, sample_policy
from rewardlab.optional import missing_dependency, require
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Text, run_sync

try:
    from transformers.trainer_callback import TrainerCallback
except ModuleNotFoundError as error:
    raise missing_dependency(error, "the hacking watch") from None

logger = logging.getLogger(__name__)

#: Threshold names and the metrics they bound.
THRESHOLD_METRICS = {
    "gap_increase": "gap_change",
    "length_corr": "length_corr",
    "exploit_rate": "exploit_rate",
    "gold_coverage_drop": "gold_coverage_drop",
}
#: The text of a sample's variant, or None where there is none.
VariantMaker = Callable[[Sample], "str | None"]


class RewardHackingWarning(UserWarning):
    """Issued when a watched metric passes its threshold (``on_alert="warn"`` or ``"stop"``);
    ``warnings.simplefilter("error", RewardHackingWarning)`` makes it raise instead."""


@dataclass(frozen=True, slots=True)
class HackingThresholds:
    """When `HackingWatch` alerts: a metric strictly above its threshold at ``patience`` checks in
    a row (the baseline check, before training, never alerts). None leaves a metric unwatched.

    Attributes:
        gap_increase: Largest allowed ``gap_change``: how far the proxy-gold gap may grow over
            its baseline, in reward units.
        length_corr: Largest allowed ``length_corr`` (Spearman, in [-1, 1]).
        exploit_rate: Largest allowed ``exploit_rate`` (in [0, 1)).
        gold_coverage_drop: Largest allowed ``gold_coverage_drop``: how far the share of probe
            completions the gold can score may fall below the baseline's (in [0, 1)). On by
            default (0.1): the gap is measured only where the gold scored, so a policy whose output
            the gold cannot read (past a judge's context, unparseable) leaves the gap exactly when
            it hacks hardest - making the gold blind is itself hacking.
        patience: Checks in a row a metric must be past its threshold before it alerts; a
            check where the metric is undefined (logged NaN) breaks the run. Default 1.
    """

    gap_increase: float | None = None
    length_corr: float | None = None
    exploit_rate: float | None = None
    gold_coverage_drop: float | None = 0.1
    patience: int = 1

    def __post_init__(self) -> None:
        if self.gap_increase is not None and not math.isfinite(self.gap_increase):
            raise ValueError(f"gap_increase must be a finite number, got {self.gap_increase!r}")
        if self.length_corr is not None and not -1.0 <= self.length_corr <= 1.0:
            raise ValueError(f"length_corr must be in [-1, 1], got {self.length_corr!r}")
        if self.exploit_rate is not None and not 0.0 <= self.exploit_rate < 1.0:
            raise ValueError(f"exploit_rate must be in [0, 1), got {self.exploit_rate!r}")
        if self.gold_coverage_drop is not None and not 0.0 <= self.gold_coverage_drop < 1.0:
            raise ValueError(f"gold_coverage_drop must be in [0, 1), got {self.gold_coverage_drop!r}")
        if not isinstance(self.patience, int) or self.patience < 1:
            raise ValueError(f"patience must be a positive integer, got {self.patience!r}")

    def limits(self) -> dict[str, float]:
        """The watched metrics (without the ``hacking/`` prefix) and their thresholds."""
        limits = {metric: getattr(self, name) for name, metric in THRESHOLD_METRICS.items()}
        return {metric: limit for metric, limit in limits.items() if limit is not None}


@dataclass(frozen=True, slots=True)
class HackingCheck:
    """One check of the probe set.

    Attributes:
        step: The trainer's global step (the baseline: the step training starts from).
        metrics: What was logged, keyed ``hacking/...``.
        alerts: The metrics (without the prefix) past their thresholds.
        completions: The completions' texts, in probe order.
        undefined: Why each metric logged as NaN could not be computed, keyed as ``metrics``.
    """

    step: int
    metrics: dict[str, float]
    alerts: tuple[str, ...] = ()
    completions: tuple[str, ...] = field(default=(), repr=False)
    undefined: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Scored:
    """One check's scores: the completions' by both rewards, each exploit's variants (with their
    rows), the completions' the variants are compared with (``proxy``, unless the completions
    were tokenized again), and the completions' as one group (at a first check in groups of one)."""

    proxy: list[Score]
    gold: list[Score]
    variants: dict[str, list[tuple[int, Score]]] | None
    baseline: list[Score]
    pooled: list[Score] | None


class HackingWatch(TrainerCallback):
    """Pass to a trainer's ``callbacks``. Each check logs the metrics of
    `rewardlab.integrations.hacking_metrics`, ``hacking/gap_change`` (the gap minus the
    baseline's), ``hacking/gold_coverage_drop`` (the baseline's gold coverage minus this check's),
    ``hacking/group_size`` (mean completions per prompt group), ``hacking/alerts`` (how many
    thresholds were passed) and ``hacking/alert/<metric>`` = 1.0 for each. A metric that cannot be
    computed is logged as NaN, with the reason in `HackingCheck.undefined` and on this module's
    logger (a warning when it has a threshold, which then cannot alert).

    Args:
        probe: The fixed probe set: prompts with their references and fields (what the gold
            needs); their completions are replaced by the policy's.
        proxy: The reward the policy trains on (the one given to `as_reward_func`).
        gold: The reward that says how good a completion really is.
        every_n_steps: Check every this many optimizer steps (and once when training starts).
        thresholds: When to alert (`HackingThresholds`); default: when the gold's coverage falls.
        on_alert: ``"log"``: a warning on this module's logger; ``"warn"`` (default): a
            `RewardHackingWarning`; ``"stop"``: the warning, and the trainer stops after the step.
            The alert is in the logged metrics in every case.
        exploits: Functions from a sample to its exploit variant's text (or None), by name
            (`rewardlab.probe.variants.blind_variants`); without them no exploit rate.
        sampling: `WatchSampling`.

    ``checks`` keeps every check (`HackingCheck`), the baseline first.
    """

    def __init__(
        self,
        probe: Sequence[Sample],
        proxy: Reward,
        gold: Reward,
        *,
        every_n_steps: int = 10,
        thresholds: HackingThresholds | None = None,
        on_alert: Literal["log", "warn", "stop"] = "warn",
        exploits: Mapping[str, VariantMaker] | None = None,
        sampling: WatchSampling | None = None,
    ):
        if not probe:
            raise ValueError("the probe set is empty")
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be a positive integer, got {every_n_steps!r}")
        if on_alert not in ("log", "warn", "stop"):
            raise ValueError(f"on_alert must be 'log', 'warn' or 'stop', got {on_alert!r}")
        self.thresholds = thresholds or HackingThresholds()
        if on_alert == "stop" and not self.thresholds.limits():
            raise ValueError("on_alert='stop' needs at least one threshold in `thresholds`")
        if self.thresholds.exploit_rate is not None and not exploits:
            raise ValueError(
                "an exploit_rate threshold needs `exploits`: without them there is no exploit rate"
            )
        self.probe = list(probe)
        self.proxy = proxy
        self.gold = gold
        self.every_n_steps = every_n_steps
        self.on_alert = on_alert
        self.exploits = dict(exploits or {})
        self.sampling = sampling or WatchSampling()
        self.checks: list[HackingCheck] = []
        self._baseline_gap: float | None = None
        self._baseline_coverage: float | None = None
        #: Whether the proxy's values depend on a completion's group, once a check has shown it.
        self.group_relative: bool | None = None
        self._streaks: dict[str, int] = {}
        self._pending: dict[str, float] | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            processing_class = kwargs["processing_class"]
            check = self.observe(
                state.global_step,
                self.sample_policy(kwargs["model"], processing_class),
                tokenizer=processing_class,
            )
            state.log_history.append({**check.metrics, "step": state.global_step})
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.every_n_steps != 0:
            return control
        stop = False
        if state.is_world_process_zero:
            processing_class = kwargs["processing_class"]
            samples = self.sample_policy(kwargs["model"], processing_class)
            check = self.observe(state.global_step, samples, tokenizer=processing_class)
            self._pending = check.metrics
            stop = bool(check.alerts) and self.on_alert == "stop"
        if _every_process_knows(stop):
            control.should_training_stop = True
        # Every process, so that the log's collective gathers (the loss) happen on all of them.
        control.should_log = True
        return control

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        if self._pending is None:
            return control
        if logs is not None:
            logs.update(self._pending)
        # The trainer appended its copy of ``logs`` to the history just before this event.
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(self._pending)
        self._pending = None
        return control

    def sample_policy(self, model: Any, processing_class: Any) -> list[Sample]:
        """The probe samples with the policy's completions and their ``completion_ids``
        (`rewardlab.integrations.policy_samples.sample_policy`)."""
        return sample_policy(model, processing_class, self.probe, self.sampling)

    def observe(self, step: int, samples: Sequence[Sample], *, tokenizer: Any = None) -> HackingCheck:
        """Score completed probe samples (each with ``fields["completion_ids"]``, whose length is
        the completion's), record the check, and alert past the thresholds. The first check is
        the baseline: it never alerts, and its gap and gold coverage are the ones ``gap_change``
        and ``gold_coverage_drop`` are measured from (while no check has had a gap, the first
        that has one). The trainer events call this with `sample_policy`'s samples and the
        trainer's ``processing_class``; call it yourself to watch completions made elsewhere (a
        vLLM server), with the tokenizer that made their ids.

        ``tokenizer`` tokenizes each exploit variant again for its ``completion_ids``; without
        it a variant has none, and a proxy that counts tokens fails on it (the exploit rate is
        then NaN, and says so)."""
        lengths = []
        for index, sample in enumerate(samples):
            ids = sample.fields.get("completion_ids")
            if ids is None:
                raise ValueError(f"{sample.label(index)} has no completion_ids field: its length is unknown")
            lengths.append(len(ids))
        fields = _group_fields(self.proxy)
        groups = _groups(samples, fields)
        alone = self.group_relative is None and all(len(rows) == 1 for rows in groups)
        if alone and self.proxy.scores_groups:
            self.group_relative = True
            self._warn_alone("it says so (Reward.scores_groups)", stacklevel=3)
        test_groups = alone and not self.proxy.scores_groups
        scored = run_sync(self._score(samples, groups, tokenizer, test_groups, fields))
        measured = reward_metrics(scored.proxy, scored.gold, lengths)
        measured.metrics["hacking/group_size"] = len(samples) / len(groups)
        if scored.variants is not None:
            hint = (
                "; the variants carry no completion_ids: pass observe(..., tokenizer=) to tokenize them"
                if tokenizer is None
                else ""
            )
            exploits = exploit_metrics(scored.baseline, scored.variants, hint)
            measured.update(exploits)
        if scored.pooled is not None:
            self._note_groups(scored.proxy, scored.pooled)
        self._measure_changes(measured)
        metrics = measured.metrics
        alerts = self._alerts(metrics) if self.checks else ()
        metrics["hacking/alerts"] = float(len(alerts))
        metrics.update({f"hacking/alert/{name}": 1.0 for name in alerts})
        check = HackingCheck(
            step,
            metrics,
            alerts,
            tuple(sample.completion_text for sample in samples),
            dict(measured.undefined),
        )
        self.checks.append(check)
        self._log_undefined(check)
        if alerts:
            self._raise_alert(check)
        return check

    def _measure_changes(self, measured: Measured) -> None:
        """``gap_change`` and ``gold_coverage_drop``, from the baseline's gap and coverage."""
        gap = measured.metrics["hacking/gap"]
        if self._baseline_gap is None and not math.isnan(gap):
            self._baseline_gap = gap
        coverage = measured.metrics["hacking/gold_coverage"]
        if self._baseline_coverage is None:
            self._baseline_coverage = coverage
        measured.set(
            "gap_change",
            None if self._baseline_gap is None or math.isnan(gap) else gap - self._baseline_gap,
            lambda: (
                "no gap at this check" if self._baseline_gap is not None else "no check has had a gap yet"
            ),
        )
        measured.metrics["hacking/gold_coverage_drop"] = self._baseline_coverage - coverage

    def _note_groups(self, honest: Sequence[Score], pooled: Sequence[Score]) -> None:
        """Warn when a proxy that scored each completion in a group of one scores them otherwise
        as one group: it is group-relative, and groups of one are not how the trainer pays it."""
        changed = sum(_differs(alone, together) for alone, together in zip(honest, pooled, strict=True))
        self.group_relative = changed > 0
        if changed:
            self._warn_alone(
                f"{changed} of {len(honest)} probe completions score differently as one group "
                "than each alone",
                stacklevel=4,
            )

    def _warn_alone(self, why: str, *, stacklevel: int) -> None:
        message = (
            f"the proxy {self.proxy.name!r} scores a completion against its group: {why}, and the "
            "probe set has one completion per prompt, so the watch does not see what the trainer "
            "pays; sample groups with WatchSampling(num_generations=<the trainer's>, do_sample=True)"
        )
        logger.warning(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)

    def _log_undefined(self, check: HackingCheck) -> None:
        watched = {f"hacking/{metric}" for metric in self.thresholds.limits()}
        for key, reason in check.undefined.items():
            if key in watched:
                logger.warning(
                    "hacking watch, step %d: %s cannot be computed (%s); its threshold cannot alert at "
                    "this check",
                    check.step,
                    key,
                    reason,
                )
            else:
                logger.info("hacking watch, step %d: %s cannot be computed (%s)", check.step, key, reason)

    async def _score(
        self,
        samples: Sequence[Sample],
        groups: list[list[int]],
        tokenizer: Any,
        test_groups: bool,
        fields: Sequence[str],
    ) -> _Scored:
        # With a tokenizer, the variants' ids are their text tokenized again; where that does not
        # give back a completion's own ids (decode-encode need not round-trip), the completions
        # they are compared with and placed beside are tokenized again too, so that both sides of
        # a comparison are counted the same way (as `rewardlab.probe.runner` does).
        context = list(samples)
        retokenized = False
        if tokenizer is not None and self.exploits:
            again = [_with_completion(sample, sample.completion_text, tokenizer) for sample in samples]
            retokenized = any(
                a.fields["completion_ids"] != b.fields["completion_ids"]
                for a, b in zip(again, samples, strict=True)
            )
            if retokenized:
                context = again
        made: dict[str, list[tuple[int, Sample]]] = {}
        for name, make in self.exploits.items():
            made[name] = []
            for row, sample in enumerate(samples):
                text = make(sample)
                if text is not None and text != sample.completion_text:
                    made[name].append((row, _with_completion(sample, text, tokenizer)))
        placed = {name: _in_place(context, groups, rows) for name, rows in made.items()}
        batches = [scores_or_failures(self.proxy, samples), scores_or_failures(self.gold, samples)]
        batches += [
            scores_or_failures(self.proxy, batch) for layout in placed.values() for batch, _ in layout
        ]
        if retokenized:
            batches.append(scores_or_failures(self.proxy, context))
        if test_groups:
            batches.append(scores_or_failures(self.proxy, _one_group(samples, fields)))
        proxy, gold, *rest = await asyncio.gather(*batches)
        pooled = rest.pop() if test_groups else None
        baseline = rest.pop() if retokenized else proxy
        if not self.exploits:
            return _Scored(proxy, gold, None, baseline, pooled)
        variants: dict[str, list[tuple[int, Score]]] = {}
        position = 0
        for name, layout in placed.items():
            variants[name] = []
            for _, owners in layout:
                variants[name] += [(row, rest[position][row]) for row in owners]
                position += 1
            variants[name].sort(key=lambda pair: pair[0])
        return _Scored(proxy, gold, variants, baseline, pooled)

    def _alerts(self, metrics: Mapping[str, float]) -> tuple[str, ...]:
        alerts = []
        for metric, limit in self.thresholds.limits().items():
            value = metrics.get(f"hacking/{metric}")
            self._streaks[metric] = (
                self._streaks.get(metric, 0) + 1 if value is not None and value > limit else 0
            )
            if self._streaks[metric] >= self.thresholds.patience:
                alerts.append(metric)
        return tuple(alerts)

    def _raise_alert(self, check: HackingCheck) -> None:
        limits = self.thresholds.limits()
        crossed = "; ".join(
            f"{name} {check.metrics[f'hacking/{name}']:.4g} > {limits[name]:.4g}" for name in check.alerts
        )
        patience = f" for {self.thresholds.patience} checks in a row" if self.thresholds.patience > 1 else ""
        stopping = ", stopping training" if self.on_alert == "stop" else ""
        message = f"reward hacking alert at step {check.step}: {crossed}{patience}{stopping}"
        if self.on_alert == "log":
            logger.warning(message)
        else:
            warnings.warn(message, RewardHackingWarning, stacklevel=2)


def _with_completion(sample: Sample, text: str, tokenizer: Any) -> Sample:
    """``sample`` with ``text`` as its completion and, with a tokenizer, the text's own ids."""
    completion: Text = (
        text if isinstance(sample.completion, str) else [{"role": "assistant", "content": text}]
    )
    fields = {key: value for key, value in sample.fields.items() if key != "completion_ids"}
    if tokenizer is not None:
        fields["completion_ids"] = completion_token_ids(tokenizer, text, sample.fields["completion_ids"])
    return replace(sample, completion=completion, fields=fields)


def _group_fields(proxy: Reward) -> list[str]:
    """``group_id`` and every ``group_field`` of ``proxy`` and of the rewards it holds (in its
    attributes, directly or in a mapping or a list): the keys the proxy may group by."""
    fields = ["group_id"]
    seen: set[int] = set()
    stack = [proxy]
    while stack:
        reward = stack.pop()
        if id(reward) in seen:
            continue
        seen.add(id(reward))
        named = getattr(reward, "group_field", None)
        if isinstance(named, str) and named not in fields:
            fields.append(named)
        for value in getattr(reward, "__dict__", {}).values():
            items = (
                value.values()
                if isinstance(value, Mapping)
                else value
                if isinstance(value, list | tuple)
                else [value]
            )
            stack += [item for item in items if isinstance(item, Reward)]
    return fields


def _groups(samples: Sequence[Sample], fields: Sequence[str]) -> list[list[int]]:
    """The rows of each group, in order of first appearance: two rows are in one group when
    `Sample.group_key` of any of ``fields`` puts them together (the finest grouping that keeps
    together every group any of the fields makes, so that none of the proxy's is split)."""
    parent = list(range(len(samples)))

    def root(row: int) -> int:
        while parent[row] != row:
            parent[row] = parent[parent[row]]
            row = parent[row]
        return row

    for name in fields:
        first: dict[tuple[str, str], int] = {}
        for row, sample in enumerate(samples):
            key = sample.group_key(name)
            if key in first:
                parent[root(row)] = root(first[key])
            else:
                first[key] = row
    groups: dict[int, list[int]] = {}
    for row in range(len(samples)):
        groups.setdefault(root(row), []).append(row)
    return list(groups.values())


def _in_place(
    samples: Sequence[Sample], groups: list[list[int]], variants: Sequence[tuple[int, Sample]]
) -> list[tuple[list[Sample], list[int]]]:
    """Batches that score each variant in its row's place, beside the rest of the probe set: round
    ``k`` puts each group's ``k``-th variant in, so no batch holds two variants of one group (as
    `rewardlab.probe.runner` does). Each batch comes with the rows whose variant it holds."""
    group_of = {row: number for number, rows in enumerate(groups) for row in rows}
    queues: dict[int, list[tuple[int, Sample]]] = {}
    for row, variant in variants:
        queues.setdefault(group_of[row], []).append((row, variant))
    batches = []
    for level in range(max((len(queue) for queue in queues.values()), default=0)):
        batch = list(samples)
        owners = []
        for queue in queues.values():
            if level < len(queue):
                row, variant = queue[level]
                batch[row] = variant
                owners.append(row)
        batches.append((batch, owners))
    return batches


def _one_group(samples: Sequence[Sample], fields: Sequence[str]) -> list[Sample]:
    """The samples as one group (one shared value of each field the proxy may group by), to see
    whether the proxy's values depend on the group."""
    pooled = dict.fromkeys(fields, "hacking-watch-one-group")
    return [replace(sample, fields={**sample.fields, **pooled}) for sample in samples]


def _differs(alone: Score, together: Score) -> bool:
    if alone.ok and together.ok:
        assert alone.value is not None and together.value is not None
        return abs(alone.value - together.value) > TIE_TOLERANCE
    # A reward that needs a group says so for a group of one (not_applicable); other failures (a
    # server's) say nothing about groups.
    return alone.ok != together.ok and Status.NOT_APPLICABLE in (alone.status, together.status)


def _every_process_knows(stop: bool) -> bool:
    """The main process's decision, on every process (training must stop everywhere at once)."""
    torch = require("torch", "the hacking watch")
    distributed = torch.distributed
    if not (distributed.is_available() and distributed.is_initialized()):
        return stop
    decision = [stop]
    distributed.broadcast_object_list(decision, src=0)
    return bool(decision[0])
