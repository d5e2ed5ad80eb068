"""Online rubric elicitation (OnlineRubrics): rubrics that grow during training.

At each step, for each prompt, the current policy's rollouts are compared pairwise with responses
from a reference (control) policy, and a judge proposes criteria that explain the differences.
A proposal close to an existing criterion is merged into it (logged, not added); the rest are
added with weights from their category and provenance ``elicited@step:N``. Guard rails:

- a cap on active criteria per prompt (proposals beyond it are dropped, and logged);
- retirement of criteria that no longer discriminate: an elicited criterion whose verdicts were
  the same (within ``flat_tolerance``) for every rollout of the prompt for ``retire_after`` of
  the prompt's steps in a row leaves the rubric (hand-written and generated criteria stay,
  unless ``retire_only_elicited`` is off);
- every change goes to the `RubricStore`'s log, as a new rubric version; proposals that could
  not be read are logged in the step's report.

Closeness is the Jaccard overlap of the criteria's word sets (at or above ``similarity``), never
across a differing number or negation: cheap, deterministic, and enough to catch the rewordings
a judge produces without merging a criterion into its opposite. Retirement counters live in the
elicitor, for the length of one run.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rewardlab.judges.judge import Judge
from rewardlab.rubrics.elicit_options import ElicitationOptions
from rewardlab.rubrics.generate import read_generated_criteria
from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.rubrics.store import Change, RubricStore


@dataclass(slots=True)
class PromptRollouts:
    """One prompt's material for one step.

    Attributes:
        prompt_id: The prompt's id in the store.
        prompt: The prompt as the judge sees it.
        policy: The current policy's responses.
        reference: Reference (control) policy responses.
        verdicts: Each criterion's satisfaction over the policy responses, by criterion id.
        base: The rubric the responses were graded with (seeds the store for a new prompt).
    """

    prompt_id: str
    prompt: str
    policy: list[str]
    reference: list[str]
    verdicts: dict[str, list[float]] = field(default_factory=dict)
    base: Rubric | None = None


@dataclass(slots=True)
class StepReport:
    """What one elicitation step did: changes made (per prompt) and proposals that failed."""

    step: int
    changes: dict[str, list[Change]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)


# Words that turn a criterion into its opposite: two criteria differing in one of them (or in a
# number) are not rewordings of each other, however many words they share.
NEGATIONS = frozenset({"not", "no", "never", "without", "none", "nor", "avoid", "avoids", "fails", "t"})


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of two texts' word sets."""
    left, right = words(a), words(b)
    return len(left & right) / len(left | right) if left | right else 1.0


def same_criterion(a: str, b: str, threshold: float) -> bool:
    """Whether ``b`` rewords ``a``: word overlap at or above ``threshold``, and no number or
    negation that one has and the other lacks ("the answer is 12" is not "the answer is 13")."""
    differing = words(a) ^ words(b)
    if any(word.isdigit() or word in NEGATIONS for word in differing):
        return False
    return similarity(a, b) >= threshold


class RubricElicitor:
    """Grows and prunes the rubrics in ``store`` (see the module docstring).

    Args:
        judge: The judge that compares responses and proposes criteria (a `RubricReward` works:
            its backend, cache and templates).
        store: The live rubric store the rubric reward reads.
        options: `ElicitationOptions`.
    """

    def __init__(self, judge: Judge, store: RubricStore, options: ElicitationOptions | None = None):
        self.judge = judge
        self.store = store
        self.options = options or ElicitationOptions()
        self.prompt = judge.prompt_named("elicit_criteria.jinja")
        self._flat_steps: dict[tuple[str, str], int] = {}

    async def step(self, step: int, prompts: Sequence[PromptRollouts]) -> StepReport:
        """Elicit for every prompt of one training step, and record the changes."""
        report = StepReport(step)
        async with self.judge.session():
            results = await asyncio.gather(*(self._prompt(step, rollouts, report) for rollouts in prompts))
        for rollouts, (changes, version) in zip(prompts, results, strict=True):
            if changes:
                report.changes[rollouts.prompt_id] = changes
            if version is not None:
                report.versions[rollouts.prompt_id] = version
        return report

    async def _prompt(
        self, step: int, rollouts: PromptRollouts, report: StepReport
    ) -> tuple[list[Change], int | None]:
        current = self.store.rubric(rollouts.prompt_id) or rollouts.base
        active = list(current.criteria) if current is not None else []
        changes = self._retirements(rollouts, active)
        retired = {change.criterion_id for change in changes}
        active = [c for c in active if c.id not in retired]
        for proposal in await self._proposals(step, rollouts, active, report):
            matches = [c for c in active if same_criterion(c.text, proposal.text, self.options.similarity)]
            closest = max(matches, key=lambda c: similarity(c.text, proposal.text), default=None)
            if closest is not None:
                score = similarity(closest.text, proposal.text)
                changes.append(
                    Change("merge", proposal, closest.id, f"word overlap {score:.2f} with {closest.id}")
                )
            elif len(active) >= self.options.max_active:
                report.failures.append(
                    f"{rollouts.prompt_id}: dropped {proposal.id} ({proposal.text!r}): "
                    f"the rubric has the maximum of {self.options.max_active} active criteria"
                )
            else:
                changes.append(Change("add", proposal, reason=f"elicited at step {step}"))
                active.append(proposal)
                self._flat_steps.pop((rollouts.prompt_id, proposal.id), None)  # a fresh start
        if not changes:
            return [], None
        if self.store.rubric(rollouts.prompt_id) is None:
            if rollouts.base is None and not any(c.action == "add" for c in changes):
                return [], None
            if rollouts.base is not None:
                self.store.put(
                    rollouts.prompt_id,
                    rollouts.base,
                    step=step,
                    reason="the rubric in use when elicitation began",
                )
        updated = self.store.apply(rollouts.prompt_id, changes, step=step)
        return changes, None if updated is None else updated.version

    def _retirements(self, rollouts: PromptRollouts, active: list[Criterion]) -> list[Change]:
        changes: list[Change] = []
        for criterion in active:
            verdicts = rollouts.verdicts.get(criterion.id, [])
            key = (rollouts.prompt_id, criterion.id)
            if len(verdicts) < 2:
                continue
            flat = max(verdicts) - min(verdicts) <= self.options.flat_tolerance
            self._flat_steps[key] = self._flat_steps.get(key, 0) + 1 if flat else 0
            retirable = not self.options.retire_only_elicited or criterion.provenance.startswith("elicited")
            remaining = len(active) - len(changes)
            if retirable and self._flat_steps[key] >= self.options.retire_after and remaining > 1:
                reason = (
                    f"the same verdict (about {sum(verdicts) / len(verdicts):.2g}) for every rollout for "
                    f"{self._flat_steps[key]} of the prompt's steps in a row"
                )
                changes.append(Change("retire", criterion_id=criterion.id, reason=reason))
        return changes

    async def _proposals(
        self, step: int, rollouts: PromptRollouts, active: list[Criterion], report: StepReport
    ) -> list[Criterion]:
        if not rollouts.policy or not rollouts.reference:
            return []
        pairs = list(zip(rollouts.policy, itertools.cycle(rollouts.reference)))[
            : self.options.pairs_per_prompt
        ]
        provenance = f"elicited@step:{step}"
        listed = await asyncio.gather(
            *(
                self.judge.ask_list(
                    {
                        "prompt": rollouts.prompt,
                        "response_a": policy,
                        "response_b": reference,
                        "existing": [c.text for c in active],
                        "max_new": self.options.max_new_per_pair,
                    },
                    lambda text, fences: read_generated_criteria(
                        text, fences, provenance, (0, self.options.max_new_per_pair)
                    ),
                    prompt=self.prompt,
                )
                for policy, reference in pairs
            )
        )
        proposals: list[Criterion] = []
        for judgement in listed:
            if not judgement.ok:
                failure = judgement.failure(f"{rollouts.prompt_id}: elicitation")
                report.failures.append(failure.reason or "elicitation failed")
                continue
            for proposal in judgement.values or []:
                if not any(same_criterion(p.text, proposal.text, self.options.similarity) for p in proposals):
                    proposals.append(replace(proposal, provenance=provenance))
        return proposals
