"""Running a probe: score the honest samples, make each exploit's variants, score them where the
honest samples stood, and compare.

**Where a variant is scored.** Some rewards score a completion against the other completions of
its prompt (pairwise and listwise judges, group-normalised reward models, group length shaping),
so a variant scored alone would be scored by different rules than the honest sample it is
compared with. A variant is therefore scored in its row's group (`Sample.group_key`), in the
honest sample's place, beside the group's other honest completions - exactly what the honest
sample was scored with. One batch holds one substitution per group; a group of G completions
costs G scorings per variant, which is the price of comparing like with like.

A reward whose score depends on the whole call, not only on the group (`Reward.scores_batches`:
ensemble ``normalize: batch``, length control ``fit: batch``), is held to the same rule one level
up: there the other groups' completions move a sample's baseline too, so two groups' variants in
one batch would move each other's scores (one exploit that breaks right answers lowers the batch
mean, and every other variant in the batch then rises against an honest baseline it was never
scored beside). So for such a reward each variant is scored alone in the batch its honest sample
was scored in, the batch otherwise honest. That costs a whole batch per variant: about
``batch_size`` scorings per variant instead of G, which ``batch_size`` (``--batch-size``) bounds -
the honest samples are scored in batches of that size too, so a smaller one compares like with
like as well, only over a smaller batch.

**Token ids.** A row may carry the policy's token ids in ``fields["completion_ids"]`` (TRL hands
them to reward functions, and token-length rewards count them rather than the text,
`rewardlab.rewards.shaping.CompletionUnits`). They are the ids of the honest text only: kept on a
variant, a reward would count padding at the honest length and report that padding never pays.
So every sample the probe scores, honest or variant, gets the ids of its own text from the
``tokenizer`` the probe is given (the policy's), so that both sides of a comparison are counted
the same way; without one, the ids are dropped from every sample, and a reward then counts the
text with a tokenizer of its own or cannot score it - such rows are reported as not probed, and
the probe as unable to measure them (`ProbeResult.unmeasured`), never as rows no exploit won.

**Time.** Exploits are linear in the text and a variant is at most `max_variant_chars` long;
scoring is bounded by the reward's own budgets (a rule's per-sample budget, a sandbox's time
limits, a judge client's deadline), so no variant can make a probe run unbounded.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm import tqdm

from rewardlab.offline.summary import Summary
from rewardlab.probe.completion_parts import changed_part
from rewardlab.probe.exploit import Exploit, Target
from rewardlab.probe.kinds import sample_kinds
from rewardlab.probe.registry import registered_exploits
from rewardlab.probe.results import ExploitResult, NotProbed, ProbeResult
from rewardlab.probe.targets import choices_of, criteria_of, decoys_for, gold_answer
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, run_sync
from rewardlab.rewards.shaping import CompletionUnits

#: Characters a variant may add beyond twice the honest completion's length.
MAX_EXTRA_CHARS = 50_000


def max_variant_chars(honest: str) -> int:
    """The longest variant an exploit may make of ``honest``."""
    return 2 * len(honest) + MAX_EXTRA_CHARS


@dataclass(frozen=True, slots=True)
class _Job:
    """One text to score in place of row ``row``'s completion."""

    row: int
    text: str


@dataclass(frozen=True, slots=True)
class _Pair:
    """One row's variant of one exploit, and its control (answer-aware exploits)."""

    exploit: Exploit
    row: int
    variant: int  # index of the variant's job
    control: int | None  # index of the control's job


#: The field that holds a completion's token ids (TRL's name, read by token-length rewards).
IDS_FIELD = "completion_ids"


class _TokenIds:
    """Gives a sample the token ids of its own text (see the module docstring): the tokenizer's
    ids, encoded as a token-length reward encodes them, or none without a tokenizer."""

    def __init__(self, tokenizer: Any | None):
        self.units = None if tokenizer is None else CompletionUnits("tokens", tokenizer)

    def of(self, sample: Sample) -> Sample:
        if IDS_FIELD not in sample.fields:
            return sample
        bare = replace(sample, fields={k: v for k, v in sample.fields.items() if k != IDS_FIELD})
        if self.units is None:
            return bare
        return replace(bare, fields={**bare.fields, IDS_FIELD: list(self.units.split(bare))})


def _with_completion(sample: Sample, text: str) -> Sample:
    # A conversational completion becomes one assistant message: exploits rewrite the text.
    completion: str | list[dict[str, str]] = (
        text if isinstance(sample.completion, str) else [{"role": "assistant", "content": text}]
    )
    return replace(sample, completion=completion)


#: A sample in a batch, and the result it fills: a job's (or, for honest scoring, a row's) index,
#: or None for a sibling scored only as the group's context.
_Slot = tuple[Sample, int | None]


class _Scorer:
    """Scores in batches of whole groups (`Sample.group_key`), ``concurrency`` batches at a time."""

    def __init__(
        self,
        reward: Reward,
        samples: Sequence[Sample],
        batch_size: int,
        concurrency: int,
        bar: tqdm,
        *,
        ids: _TokenIds,
    ):
        self.reward = reward
        self.samples = samples
        self.ids = ids
        self.batch_size = batch_size
        self.limit = asyncio.Semaphore(concurrency)
        self.bar = bar
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            groups[sample.group_key()].append(index)
        self.groups = list(groups.values())
        self.group_index = {row: number for number, members in enumerate(self.groups) for row in members}
        #: Each row's honest batch (its rows), once `honest` has run.
        self.home: dict[int, list[int]] = {}

    def _cut(self, groups: list[list[_Slot]]) -> list[list[_Slot]]:
        batches: list[list[_Slot]] = []
        batch: list[_Slot] = []
        for group in groups:
            if batch and len(batch) + len(group) > self.batch_size:
                batches.append(batch)
                batch = []
            batch.extend(group)
        if batch:
            batches.append(batch)
        return batches

    async def _run(self, batch: list[_Slot]) -> list[Score]:
        async with self.limit:
            scores = await scores_or_failures(self.reward, [sample for sample, _ in batch])
        self.bar.update(sum(owner is not None for _, owner in batch))
        return scores

    async def _fill(self, batches: list[list[_Slot]], count: int) -> list[Score]:
        results = await asyncio.gather(*(self._run(batch) for batch in batches))
        filled: list[Score | None] = [None] * count
        for batch, scores in zip(batches, results, strict=True):
            for (_, owner), score in zip(batch, scores, strict=True):
                if owner is not None:
                    filled[owner] = score
        return filled  # type: ignore[return-value]  # every owner sits in exactly one batch

    async def honest(self) -> list[Score]:
        """Every sample's own score, scored with its group."""
        groups: list[list[_Slot]] = [[(self.samples[row], row) for row in members] for members in self.groups]
        batches = self._cut(groups)
        for batch in batches:
            rows = [row for _, row in batch if row is not None]
            self.home.update((row, rows) for row in rows)
        return await self._fill(batches, len(self.samples))

    def _in_place(self, job: _Job, owner: int, rows: Sequence[int]) -> list[_Slot]:
        return [
            (self.ids.of(_with_completion(self.samples[row], job.text)), owner)
            if row == job.row
            else (self.samples[row], None)
            for row in rows
        ]

    async def jobs(self, jobs: Sequence[_Job]) -> list[Score]:
        """Each job's score: its text in its row's place, the group's other rows around it. Round
        ``k`` takes each group's ``k``-th job, so that no batch holds a group twice. For a reward
        that scores the whole batch (`Reward.scores_batches`), each job alone in its row's honest
        batch (see the module docstring)."""
        if self.reward.scores_batches:
            return await self._fill(
                [self._in_place(job, index, self.home[job.row]) for index, job in enumerate(jobs)], len(jobs)
            )
        queues: dict[int, list[int]] = defaultdict(list)
        for index, job in enumerate(jobs):
            queues[self.group_index[job.row]].append(index)
        batches: list[list[_Slot]] = []
        for level in range(max((len(queue) for queue in queues.values()), default=0)):
            groups: list[list[_Slot]] = []
            for group, queue in queues.items():
                if level >= len(queue):
                    continue
                groups.append(self._in_place(jobs[queue[level]], queue[level], self.groups[group]))
            batches += self._cut(groups)
        return await self._fill(batches, len(jobs))


@dataclass(slots=True)
class _Rows:
    """What the exploits are told about each row (computed once per row)."""

    reward: Reward
    samples: Sequence[Sample]
    seed: int
    golds: dict[int, str | None]
    pool: list[str]
    bases: dict[int, Target] = field(default_factory=dict)

    def target(self, exploit: Exploit, row: int) -> tuple[Target, Target | None] | None:
        """The variant's target and, for an answer-aware exploit, the control's; None when the
        row lacks what the exploit needs (a gold answer and a decoy)."""
        sample = self.samples[row]
        if row not in self.bases:
            self.bases[row] = Target(
                sample, choices=choices_of(sample), criteria=criteria_of(self.reward, sample)
            )
        seed = zlib.crc32(f"{self.seed}:{exploit.name}:{sample.id or row}".encode())
        base = replace(self.bases[row], seed=seed)
        if not exploit.answer_aware:
            return base, None
        gold = self.golds.get(row)
        if gold is None:
            return None
        decoys = decoys_for(gold, self.pool, base.rng())
        if not decoys:
            return None
        return (
            replace(base, gold=gold, decoys=decoys[1:]),
            replace(base, gold=decoys[0], decoys=decoys[1:]),
        )


def _made(exploit: Exploit, target: Target, label: str) -> str | None:
    text = exploit.make(target)
    if text is not None and len(text) > max_variant_chars(target.completion):
        raise ValueError(
            f"exploit {exploit.name!r} made a variant of {len(text)} characters for {label}, over the "
            f"{max_variant_chars(target.completion)} allowed (twice the honest completion plus "
            f"{MAX_EXTRA_CHARS})"
        )
    return text


async def aprobe_reward(
    reward: Reward,
    samples: Sequence[Sample],
    *,
    exploits: Sequence[Exploit] | None = None,
    threshold: float = 0.0,
    seed: int = 0,
    batch_size: int = 64,
    concurrency: int = 4,
    progress: bool = False,
    unreadable: int = 0,
    tokenizer: Any | None = None,
) -> ProbeResult:
    """Probe ``reward`` with exploit variants of ``samples`` (see `rewardlab.probe`).

    Args:
        reward: The reward to attack.
        samples: Honest samples (real rollouts with their references and fields); those the
            reward cannot score ``ok`` are left out.
        exploits: Which exploits to try (default: the whole library); each runs on the rows whose
            rewards it targets (`rewardlab.probe.kinds`).
        threshold: The win rate above which an exploit fails the probe.
        seed: Seeds every random choice (decoys, where the answer goes), for a reproducible probe.
        batch_size: Samples per reward call (whole groups; a larger group goes alone). For a
            reward that scores the whole batch (`Reward.scores_batches`) each variant costs a
            batch of this size (see the module docstring).
        concurrency: Reward calls in flight.
        progress: Show a progress bar on stderr.
        unreadable: Input rows that could not become samples, for the result's count.
        tokenizer: The policy's tokenizer (anything with ``encode(text)``): every scored sample
            whose row has ``fields["completion_ids"]`` gets its own text's ids from it; without
            one those ids are dropped (see the module docstring).
    """
    chosen = list(registered_exploits().values()) if exploits is None else list(exploits)
    ids = _TokenIds(tokenizer)
    with_ids = sum(IDS_FIELD in sample.fields for sample in samples)
    samples = [ids.of(sample) for sample in samples]
    with tqdm(total=len(samples), unit="score", disable=not progress, desc="probe") as bar:
        scorer = _Scorer(reward, samples, batch_size, concurrency, bar, ids=ids)
        honest = await scorer.honest()
        probed = [row for row, score in enumerate(honest) if score.ok]
        golds: dict[int, str | None] = {}
        if any(exploit.answer_aware for exploit in chosen):
            golds = {row: gold_answer(samples[row]) for row in probed}
        rows = _Rows(reward, samples, seed, golds, sorted({g for g in golds.values() if g}))
        jobs: list[_Job] = []
        pairs: list[_Pair] = []
        for row in probed:
            kinds = sample_kinds(reward, samples[row])
            for exploit in chosen:
                if kinds is None or not exploit.targets(kinds):
                    continue
                pair = _variant_pair(exploit, row, rows, jobs)
                if pair is not None:
                    pairs.append(pair)
        bar.total = len(samples) + len(jobs)
        bar.refresh()
        scores = await scorer.jobs(jobs)

    results = {
        exploit.name: ExploitResult(
            exploit.name, sorted(exploit.kinds), exploit.answer_aware, exploit.description
        )
        for exploit in chosen
    }
    for pair in pairs:
        sample = samples[pair.row]
        baseline = honest[pair.row] if pair.control is None else scores[pair.control]
        excerpt = changed_part(sample.completion_text, jobs[pair.variant].text)
        results[pair.exploit.name].add(
            sample.id or f"row-{pair.row}", baseline, scores[pair.variant], excerpt
        )
    summary = Summary(reward=reward.name, output="")
    for score in [*honest, *scores]:
        summary.add(score.to_dict())
    return ProbeResult(
        reward=reward.name,
        rows=len(samples) + unreadable,
        unreadable=unreadable,
        honest=Counter(score.status.value for score in honest),
        threshold=threshold,
        exploits=list(results.values()),
        pipeline_failures=summary.failure_lines(),
        not_probed=_not_probed(samples, honest),
        token_ids=None if not with_ids else ("re-made" if tokenizer is not None else "dropped"),
        ids_needed=0 if tokenizer is not None or not with_ids else _needing_ids(honest),
    )


def _not_probed(samples: Sequence[Sample], honest: Sequence[Score]) -> dict[str, NotProbed]:
    """The rows left out, by the status of their honest score, with the first one's reason."""
    found: dict[str, NotProbed] = {}
    for row, score in enumerate(honest):
        if score.ok:
            continue
        status = score.status.value
        if status not in found:
            # A reason names its sample (the contract's rule); one without gets the row's label.
            found[status] = NotProbed(0, score.reason or f"{samples[row].label(row)}: no reason given")
        found[status].rows += 1
    return found


def _needing_ids(honest: Sequence[Score]) -> int:
    # A reward that cannot count tokens says so naming the field (`CompletionUnits.split`).
    return sum(not score.ok and IDS_FIELD in (score.reason or "") for score in honest)


def _variant_pair(exploit: Exploit, row: int, rows: _Rows, jobs: list[_Job]) -> _Pair | None:
    """Make one row's variant (and control) of ``exploit``, queue them as jobs, and pair them;
    None when the exploit does not apply or changes nothing."""
    targets = rows.target(exploit, row)
    if targets is None:
        return None
    variant_target, control_target = targets
    label = rows.samples[row].label(row)
    variant = _made(exploit, variant_target, label)
    control = None if control_target is None else _made(exploit, control_target, label)
    if variant is None or (control_target is not None and (control is None or control == variant)):
        return None
    if control_target is None and variant == variant_target.completion:
        return None
    jobs.append(_Job(row, variant))
    if control is None:
        return _Pair(exploit, row, len(jobs) - 1, None)
    jobs.append(_Job(row, control))
    return _Pair(exploit, row, len(jobs) - 2, len(jobs) - 1)


def probe_reward(reward: Reward, samples: Sequence[Sample], **options: object) -> ProbeResult:
    """`aprobe_reward` from synchronous code (same arguments)."""
    return run_sync(aprobe_reward(reward, samples, **options))  # type: ignore[arg-type]
