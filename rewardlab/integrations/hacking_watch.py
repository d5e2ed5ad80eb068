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
import the probe, which sits in its layer). Each exploit's variants are scored as one batch, one
per probe row, so a reward that scores completions against the rest of their prompt's group never
sees two variants of one row together (the probe's rule, `rewardlab.probe.runner`). A variant has
no ``completion_ids`` field: the honest ones would give it the honest completion's length.

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

from rewardlab.integrations.hacking_metrics import exploit_metrics, reward_metrics
from rewardlab.integrations.policy_samples import WatchSampling, sample_policy
from rewardlab.optional import missing_dependency, require
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Text, run_sync

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
        patience: Checks in a row a metric must be past its threshold before it alerts; a
            check where the metric is undefined breaks the run. Default 1.
    """

    gap_increase: float | None = None
    length_corr: float | None = None
    exploit_rate: float | None = None
    patience: int = 1

    def __post_init__(self) -> None:
        if self.gap_increase is not None and not math.isfinite(self.gap_increase):
            raise ValueError(f"gap_increase must be a finite number, got {self.gap_increase!r}")
        if self.length_corr is not None and not -1.0 <= self.length_corr <= 1.0:
            raise ValueError(f"length_corr must be in [-1, 1], got {self.length_corr!r}")
        if self.exploit_rate is not None and not 0.0 <= self.exploit_rate < 1.0:
            raise ValueError(f"exploit_rate must be in [0, 1), got {self.exploit_rate!r}")
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
    """

    step: int
    metrics: dict[str, float]
    alerts: tuple[str, ...] = ()
    completions: tuple[str, ...] = field(default=(), repr=False)


class HackingWatch(TrainerCallback):
    """Pass to a trainer's ``callbacks``. Each check logs the metrics of
    `rewardlab.integrations.hacking_metrics`, ``hacking/gap_change`` (the gap minus the
    baseline's), ``hacking/alerts`` (how many thresholds were passed) and ``hacking/alert/<metric>``
    = 1.0 for each.

    Args:
        probe: The fixed probe set: prompts with their references and fields (what the gold
            needs); their completions are replaced by the policy's.
        proxy: The reward the policy trains on (the one given to `as_reward_func`).
        gold: The reward that says how good a completion really is.
        every_n_steps: Check every this many optimizer steps (and once when training starts).
        thresholds: When to alert (`HackingThresholds`); default: never.
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
        self.probe = list(probe)
        self.proxy = proxy
        self.gold = gold
        self.every_n_steps = every_n_steps
        self.on_alert = on_alert
        self.exploits = dict(exploits or {})
        self.sampling = sampling or WatchSampling()
        self.checks: list[HackingCheck] = []
        self._baseline_gap: float | None = None
        self._streaks: dict[str, int] = {}
        self._pending: dict[str, float] | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            check = self.observe(
                state.global_step, self.sample_policy(kwargs["model"], kwargs["processing_class"])
            )
            state.log_history.append({**check.metrics, "step": state.global_step})
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.every_n_steps != 0:
            return control
        stop = False
        if state.is_world_process_zero:
            samples = self.sample_policy(kwargs["model"], kwargs["processing_class"])
            check = self.observe(state.global_step, samples)
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

    def observe(self, step: int, samples: Sequence[Sample]) -> HackingCheck:
        """Score completed probe samples (each with ``fields["completion_ids"]``, whose length is
        the completion's), record the check, and alert past the thresholds. The first check is
        the baseline: it never alerts, and its gap is the one ``gap_change`` is measured from
        (while no check has had a gap, the first that has one). The
        trainer events call this with `sample_policy`'s samples; call it yourself to watch
        completions made elsewhere (a vLLM server)."""
        lengths = []
        for index, sample in enumerate(samples):
            ids = sample.fields.get("completion_ids")
            if ids is None:
                raise ValueError(f"{sample.label(index)} has no completion_ids field: its length is unknown")
            lengths.append(len(ids))
        proxy, gold, variants = run_sync(self._score(samples))
        metrics = reward_metrics(proxy, gold, lengths)
        if variants is not None:
            metrics.update(exploit_metrics(proxy, variants))
        gap = metrics.get("hacking/gap")
        if self._baseline_gap is None and gap is not None:
            self._baseline_gap = gap
        if self._baseline_gap is not None and gap is not None:
            metrics["hacking/gap_change"] = gap - self._baseline_gap
        alerts = self._alerts(metrics) if self.checks else ()
        metrics["hacking/alerts"] = float(len(alerts))
        metrics.update({f"hacking/alert/{name}": 1.0 for name in alerts})
        check = HackingCheck(step, metrics, alerts, tuple(sample.completion_text for sample in samples))
        self.checks.append(check)
        if alerts:
            self._raise_alert(check)
        return check

    async def _score(
        self, samples: Sequence[Sample]
    ) -> tuple[list[Score], list[Score], dict[str, list[tuple[int, Score]]] | None]:
        made: dict[str, list[tuple[int, Sample]]] = {}
        for name, make in self.exploits.items():
            made[name] = []
            for row, sample in enumerate(samples):
                text = make(sample)
                if text is not None and text != sample.completion_text:
                    made[name].append((row, _with_completion(sample, text)))
        batches = [scores_or_failures(self.proxy, samples), scores_or_failures(self.gold, samples)]
        batches += [
            scores_or_failures(self.proxy, [variant for _, variant in rows]) for rows in made.values()
        ]
        proxy, gold, *variant_scores = await asyncio.gather(*batches)
        if not self.exploits:
            return proxy, gold, None
        variants = {
            name: [(row, score) for (row, _), score in zip(rows, scores, strict=True)]
            for (name, rows), scores in zip(made.items(), variant_scores, strict=True)
        }
        return proxy, gold, variants

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


def _with_completion(sample: Sample, text: str) -> Sample:
    completion: Text = (
        text if isinstance(sample.completion, str) else [{"role": "assistant", "content": text}]
    )
    fields = {key: value for key, value in sample.fields.items() if key != "completion_ids"}
    return replace(sample, completion=completion, fields=fields)


def _every_process_knows(stop: bool) -> bool:
    """The main process's decision, on every process (training must stop everywhere at once)."""
    torch = require("torch", "the hacking watch")
    distributed = torch.distributed
    if not (distributed.is_available() and distributed.is_initialized()):
        return stop
    decision = [stop]
    distributed.broadcast_object_list(decision, src=0)
    return bool(decision[0])
