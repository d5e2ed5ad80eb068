"""`Fallback`: rewards tried in order, each sample going on to the next one only when the current
one could not judge it - a rule first, a judge for what the rule cannot read.

A rule verifier is exact and free where it applies, and silent where it does not: a math answer it
cannot parse, a sample without the field it checks. An LLM judge reads anything, at a price and
with a judge's errors. verifiers' ``HybridMathRubric`` (PrimeIntellect's math environments,
``math_verify_score`` then ``judge_score``) puts the two in sequence: the rule first, the judge
only for samples the rule did not pass. Where rewardlab departs from it: the judge is asked when
the rule *could not judge* the sample (its status is in ``fall_through``: by default
``not_applicable`` and ``parse_error``), not when the rule judged it wrong, so a definite 0 from
the rule is never overturned by a lenient judge; and the statuses say why each sample went where
it went.

``timeout``, ``backend_error`` and ``error`` do not fall through by default: they are failures of
the pipeline (a worker that hung, a server that is down, a bug), not something the sample is, and
hiding them behind a judge would turn an outage into a silent change of reward. Name them in
``fall_through`` to accept that. ``invalid_input`` does not either: a sample that cannot be read
is no better for the next reward.

Only the samples that fall through are sent on, as one batch per member, so a judge behind a rule
costs calls in proportion to what the rule could not settle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.errors import ConfigError
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, RewardOptions, RewardSpec, nested_path, takes_options
from rewardlab.rewards.registry import built

#: A status a sample may fall through on: any but ``ok``.
FallThroughStatus = Literal[
    "not_applicable", "parse_error", "invalid_input", "timeout", "backend_error", "error"
]
DEFAULT_FALL_THROUGH: tuple[FallThroughStatus, ...] = ("not_applicable", "parse_error")


class FallbackOptions(RewardOptions):
    """Options of `Fallback`."""

    rewards: list[RewardSpec] = Field(min_length=2)
    """The rewards in the order they are tried: configs or, from Python, `Reward` objects. Their
    names (each config's ``name``, else its type) key the breakdown and ``details``, so they must
    differ."""
    fall_through: tuple[FallThroughStatus, ...] = Field(default=DEFAULT_FALL_THROUGH, min_length=1)
    """The statuses that send a sample on to the next reward. By default ``not_applicable`` and
    ``parse_error``: the reward could not judge the sample. Pipeline failures (``timeout``,
    ``backend_error``, ``error``) fall through only when named here."""

    @model_validator(mode="after")
    def _statuses_once(self) -> FallbackOptions:
        if len(set(self.fall_through)) != len(self.fall_through):
            raise OptionError("fall_through", f"names a status twice: {self.fall_through}")
        return self


@takes_options(FallbackOptions)
class Fallback(Reward):
    """Rewards tried in order: a sample whose score has a status in ``fall_through`` is scored
    by the next reward, the last one's score standing whatever it is (see the module docstring).

    Options: `FallbackOptions` (``rewards``, ``fall_through``).

    The score is that of the reward that ``details["scored_by"]`` names, its value also in the
    breakdown under that name (so per-member means show how often each one decided), its own
    breakdown under ``<name>/``. ``details["fell_through"]`` lists, in order, each earlier reward
    with the status and reason it gave; a fall-through on a pipeline failure is also listed in
    ``details["skipped"]``, so ``rewardlab score`` still reports it. ``usage`` adds up every
    reward that ran on the sample.

    Example:
        An exact match for the rows routed to one, a pattern for the rest:

        >>> from rewardlab import Sample
        >>> fallback = Fallback([
        ...     {"type": "route", "routes": {"exact": {"type": "string_match"}}},
        ...     {"type": "regex_match", "pattern": "Paris"},
        ... ])
        >>> exact, chat = fallback.score([
        ...     Sample(completion="Paris", reference="Paris", fields={"data_source": "exact"}),
        ...     Sample(completion="It is Paris.", fields={"data_source": "chat"}),
        ... ])
        >>> exact.value, exact.details["scored_by"], chat.value, chat.details["scored_by"]
        (1.0, 'route', 1.0, 'regex_match')
        >>> chat.details["fell_through"][0]["status"]
        'not_applicable'
        >>> fallback.close()
    """

    name = "fallback"

    def __init__(
        self,
        rewards: Sequence[Reward | Mapping[str, Any]],
        *,
        fall_through: Sequence[FallThroughStatus] = DEFAULT_FALL_THROUGH,
        name: str | None = None,
    ):
        self.rewards = [built(spec, "rewards", index) for index, spec in enumerate(rewards)]
        names = [reward.name for reward in self.rewards]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ConfigError(
                nested_path("rewards"), f"more than one reward is named {twice}; give each a distinct 'name'"
            )
        self.fall_through = frozenset(Status(status) for status in fall_through)
        if name is not None:
            self.name = name
        self.io_bound = any(reward.io_bound for reward in self.rewards)
        self.uses_gpu = any(reward.uses_gpu for reward in self.rewards)
        self.scores_groups = any(reward.scores_groups for reward in self.rewards)
        self.scores_batches = any(reward.scores_batches for reward in self.rewards)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        tried: list[list[tuple[str, Score]]] = [[] for _ in samples]
        pending = list(range(len(samples)))
        for position, reward in enumerate(self.rewards):
            scores = await scores_or_failures(reward, [samples[i] for i in pending])
            last = position == len(self.rewards) - 1
            still = []
            for index, score in zip(pending, scores, strict=True):
                tried[index].append((reward.name, score))
                if not last and score.status in self.fall_through:
                    still.append(index)
            pending = still
            if not pending:
                break
        return [self._kept(attempts) for attempts in tried]

    def _kept(self, attempts: list[tuple[str, Score]]) -> Score:
        """The last attempt's score, telling which reward gave it and why the others did not."""
        name, score = attempts[-1]
        earlier = attempts[:-1]
        breakdown = (
            {name: score.value, **{f"{name}/{key}": value for key, value in score.breakdown.items()}}
            if score.value is not None
            else {}
        )
        details: dict[str, Any] = {**score.details, "scored_by": name}
        if earlier:
            details["fell_through"] = [
                {"reward": n, "status": str(s.status), "reason": s.reason} for n, s in earlier
            ]
            failed = {n: str(s.status) for n, s in earlier if s.status is not Status.NOT_APPLICABLE}
            if failed:
                details["skipped"] = failed
        reasons = [f"{n}: {s.reason}" for n, s in attempts if s.reason]
        return Score(
            value=score.value,
            status=score.status,
            steps=score.steps,
            breakdown=breakdown,
            reason="; ".join(reasons) or None,
            usage=Usage.total([s for _, s in attempts]),
            details=details,
        )

    def close(self) -> None:
        for reward in self.rewards:
            reward.close()
