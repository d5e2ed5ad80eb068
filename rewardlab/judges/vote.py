"""`Vote`: n sampled verdicts of one judge, combined by majority or mean, with how much they agreed.

A judge sampled at a temperature above 0 gives different verdicts on the same sample; one draw is
a noisy reward. Asking n times and taking the majority (self-consistency: Wang et al. 2022,
"Self-Consistency Improves Chain of Thought Reasoning", arXiv:2203.11171, applied to the judge as
in the "jury"/multi-sample judging of Verga et al. 2024, arXiv:2404.18796, here with one model)
steadies it, and the share of votes that agree says how sure the judge was - a reward that rests
on a 3-2 split is worth less trust than a 5-0.

Each vote is the same judge asked under its own sampling seed (`rewardlab.llm.seeding`): vote k
asks with seed ``seed + k``, so the n requests for a sample are n different cache keys and n
different draws, never one cached answer served n times, and the same votes come back from the
cache when the batch is scored again. A judge at temperature 0 would give n copies of one answer,
so it is refused.

- ``combine: majority`` (for discrete verdicts: yes/no, a 1-5 grade, A/B/tie) groups the votes by
  the judge's label (``details["verdict"]`` when the judge reports one, else the value) and takes
  the most common; its value is the mean value of the votes with that label (their common value
  when the label fixes it). A tie between labels takes the mean over the votes of all tied labels
  and sets ``details["tie"]``.
- ``combine: mean`` averages the votes' values (for continuous scores, or log-probability
  verdicts).

Either way ``agreement`` (in the breakdown, so the TRL adapter logs it) is the share of the votes
that gave the most common label, and ``spread`` the population standard deviation of the votes'
values. A vote that fails (a timeout, a backend error, an unreadable verdict) is counted in
``details["failed"]`` and left out; with fewer than ``min_votes`` votes that have a value the
sample gets no value, with the status of the first failed vote and a reason that counts them.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.errors import ConfigError
from rewardlab.judges.judge import Judge
from rewardlab.llm.seeding import sampling_seed
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.options import OptionError, RewardOptions, RewardSpec, nested_path, takes_options
from rewardlab.rewards.registry import built

VoteCombination = Literal["majority", "mean"]


class VoteOptions(RewardOptions):
    """Options of `Vote`."""

    judge: RewardSpec
    """The judge asked n times: a judge config (any judge type, with ``temperature`` above 0)
    or, from Python, a `Judge`."""
    n: int = Field(default=5, ge=2, le=64)
    """How many votes per sample."""
    combine: VoteCombination = "majority"
    """``majority``: the most common label (discrete verdicts); ``mean``: the mean value."""
    seed: int = Field(default=0, ge=0)
    """Vote k samples with seed ``seed + k``: distinct requests, reproducible and cached."""
    min_votes: int | None = Field(default=None, ge=1)
    """The fewest votes with a value for a sample to be scored; default: more than half of
    ``n``."""

    @model_validator(mode="after")
    def _min_votes_within_n(self) -> VoteOptions:
        if self.min_votes is not None and self.min_votes > self.n:
            raise OptionError("min_votes", f"should be at most n ({self.n})")
        return self


@takes_options(VoteOptions)
class Vote(Reward):
    """n sampled votes of one judge per sample, combined by majority or mean (see the module
    docstring).

    Options: `VoteOptions` (``judge``, ``n``, ``combine``, ``seed``, ``min_votes``).

    ``breakdown`` has ``agreement`` and ``spread``; ``details`` lists every vote (``votes``:
    value or status, label, seed), the count of each label (``counts``), the winning label
    (``majority``), ``agreement``, ``spread``, the failed votes by status (``failed``; also in
    ``skipped`` by vote, so ``rewardlab score`` reports a backend that failed some votes) and the
    cache keys of every answer. ``usage`` adds up all n votes.
    """

    name = "vote"
    io_bound = True

    def __init__(
        self,
        judge: Reward | Mapping[str, Any],
        *,
        n: int = 5,
        combine: VoteCombination = "majority",
        seed: int = 0,
        min_votes: int | None = None,
        name: str | None = None,
    ):
        self.judge = built(judge, "judge")
        if not isinstance(self.judge, Judge):
            raise ConfigError(
                nested_path("judge"),
                f"should be an LLM judge (its votes are sampled); {self.judge.name!r} is not one",
            )
        if self.judge.temperature == 0:
            raise ConfigError(
                nested_path("judge"),
                "has temperature 0: its n votes would be one answer n times; set a temperature above 0",
            )
        self.n = n
        self.combine = combine
        self.seed = seed
        self.min_votes = min_votes if min_votes is not None else n // 2 + 1
        if name is not None:
            self.name = name
        self.uses_gpu = self.judge.uses_gpu
        self.scores_groups = self.judge.scores_groups
        self.scores_batches = self.judge.scores_batches

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        async def vote(k: int) -> list[Score]:
            # Each vote runs as its own task (gather), so the seed it sets reaches its calls only.
            with sampling_seed(self.seed + k):
                return await scores_or_failures(self.judge, samples)

        votes = await asyncio.gather(*(vote(k) for k in range(self.n)))
        return [self._tally([votes[k][i] for k in range(self.n)]) for i in range(len(samples))]

    def _tally(self, votes: list[Score]) -> Score:
        usage = Usage.total(votes)
        listed = [
            {"seed": self.seed + k, "status": str(v.status), "value": v.value, "label": _label(v)}
            for k, v in enumerate(votes)
        ]
        details: dict[str, Any] = {"votes": listed}
        failed = {
            f"vote_{k}": v for k, v in enumerate(votes) if not v.ok and v.status is not Status.NOT_APPLICABLE
        }
        if failed:
            details["failed"] = dict(Counter(str(v.status) for v in failed.values()))
            details["skipped"] = {key: str(v.status) for key, v in failed.items()}
        keys = [key for v in votes for key in v.details.get("cache_keys", [])]
        if keys:
            details["cache_keys"] = keys
        reason = "; ".join(f"{key}: {v.reason}" for key, v in failed.items() if v.reason) or None
        counted = [v for v in votes if v.ok]
        if len(counted) < self.min_votes:
            why = f"{len(counted)} of {self.n} votes have a value; min_votes is {self.min_votes}"
            if failed:
                key, first = next(iter(failed.items()))
                return Score.failure(
                    first.status, f"{why}; {key} failed: {first.reason}", usage=usage, details=details
                )
            unscored = next((v for v in votes if not v.ok), None)
            because = f": {unscored.reason}" if unscored is not None and unscored.reason else ""
            return Score.failure(Status.NOT_APPLICABLE, f"{why}{because}", usage=usage, details=details)

        values = [v.value for v in counted if v.value is not None]
        counts = Counter(_label(v) for v in counted)
        top = max(counts.values())
        winners = [label for label, count in counts.items() if count == top]
        if self.combine == "mean":
            value = math.fsum(values) / len(values)
        else:
            chosen = [v.value for v in counted if _label(v) in winners and v.value is not None]
            value = math.fsum(chosen) / len(chosen)
        mean = math.fsum(values) / len(values)
        spread = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / len(values))
        agreement = top / len(counted)
        details.update(
            counts=dict(counts),
            majority=winners[0] if len(winners) == 1 else winners,
            agreement=agreement,
            spread=spread,
        )
        if len(winners) > 1:
            details["tie"] = True
        return Score(
            value,
            breakdown={"agreement": agreement, "spread": spread},
            reason=reason,
            usage=usage,
            details=details,
        )

    def close(self) -> None:
        self.judge.close()


def _label(score: Score) -> str | None:
    """What a vote is counted as: the judge's verdict label when it reports one, else its value
    (None for a vote without a value)."""
    verdict = score.details.get("verdict")
    if score.value is None:
        return None
    return verdict if isinstance(verdict, str) else repr(score.value)
