"""Shaping rewards on the length and repetitiveness of a completion, not on its correctness.

They are meant as small extra terms in a `Combine` beside an accuracy reward: DAPO's soft overlong
punishment, the n-gram repetition penalty of "Demystifying Long Chain-of-Thought Reasoning", and
length rewards (a target length, a hard cap, and Kimi k1.5's group-relative length reward).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import InvalidInput
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.options import OptionError, RewardOptions, RewardSpec, takes_options
from rewardlab.rewards.registry import built
from rewardlab.rewards.rule import RuleReward
from rewardlab.rewards.visible_text import as_drawn

LengthUnit = Literal["tokens", "chars", "words"]


def _accepts_keyword(function: Any, keyword: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return keyword in parameters


class CompletionUnits:
    """Splits a completion into the units a shaping reward counts: tokens, characters or words.

    Tokens come from ``sample.fields["completion_ids"]`` (TRL passes them to reward functions), else
    from ``tokenizer.encode(completion_text)``. With neither, a token count is unknown and the sample
    is ``invalid_input``, never silently measured in characters instead. Words are separated by
    whitespace or anything drawn as blank (`rewardlab.rewards.visible_text.as_drawn`).
    """

    def __init__(self, unit: LengthUnit, tokenizer: Any | None = None):
        self.unit = unit
        self.tokenizer = tokenizer
        # transformers tokenizers add BOS/EOS by default, which are not part of the completion.
        self._encode_options = (
            {"add_special_tokens": False}
            if tokenizer is not None and _accepts_keyword(tokenizer.encode, "add_special_tokens")
            else {}
        )

    def split(self, sample: Sample) -> Sequence[Hashable]:
        """The completion as a sequence of units (token ids, characters or words)."""
        if self.unit == "chars":
            return sample.completion_text
        if self.unit == "words":
            # As drawn: a blank that is not whitespace to Python (U+2800, the Hangul filler)
            # between two words still makes them two (red-team round 22: spaces written as
            # U+2800 made a 400-word answer one word and escaped the overlong penalty).
            return as_drawn(sample.completion_text).split()
        ids = sample.fields.get("completion_ids")
        if ids is not None:
            if not isinstance(ids, Sequence) or isinstance(ids, str):
                raise InvalidInput(
                    "fields.completion_ids", f"must be a list of token ids, got {type(ids).__name__}"
                )
            return ids
        if self.tokenizer is None:
            raise InvalidInput(
                "fields.completion_ids",
                "missing; unit='tokens' needs the completion's token ids there or a tokenizer= on the reward",
            )
        return list(self.tokenizer.encode(sample.completion_text, **self._encode_options))

    def count(self, sample: Sample) -> int:
        """The completion's length in units."""
        return len(self.split(sample))


def _encodes(tokenizer: Any) -> Any:
    if not callable(getattr(tokenizer, "encode", None)):
        raise ValueError(f"should have an encode(text) method, got {type(tokenizer).__name__}")
    return tokenizer


class UnitOptions(RewardOptions):
    """Options of a shaping reward that measures a completion in units."""

    unit: LengthUnit = "tokens"
    """What a completion is measured in: ``tokens`` (from ``fields["completion_ids"]``, which TRL
    passes, else from ``tokenizer``), ``chars`` or ``words`` (whitespace-separated); see
    `CompletionUnits`."""
    tokenizer: SkipJsonSchema[Annotated[Any, AfterValidator(_encodes)]] = None
    """Anything with ``encode(text)`` (Python only), for token counts when a sample carries no
    ``fields["completion_ids"]``."""

    @model_validator(mode="after")
    def _tokenizer_counts_tokens(self) -> UnitOptions:
        if self.tokenizer is not None and self.unit != "tokens":
            raise OptionError("tokenizer", f"is only used with unit: tokens, not {self.unit!r}")
        return self


class SoftOverlongOptions(UnitOptions):
    """Options of `SoftOverlongPunishment`."""

    max_length: int = Field(gt=0)
    """:math:`L_{max}`, the length at which the punishment reaches -1; usually the generation
    limit. TRL calls it ``max_completion_len``, verl ``max_response_length``."""
    cache_length: int = Field(ge=0)
    """:math:`L_{cache}`, the width of the soft zone before ``max_length`` (TRL:
    ``soft_punish_cache``, verl: ``overlong_buffer.len``); 0 makes it a hard step."""

    @model_validator(mode="after")
    def _soft_zone_fits(self) -> SoftOverlongOptions:
        if self.cache_length > self.max_length:
            raise OptionError("cache_length", f"should be at most max_length={self.max_length}")
        return self


@takes_options(SoftOverlongOptions)
class SoftOverlongPunishment(RuleReward):
    r"""DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13): 0 for a completion within
    ``max_length - cache_length``, falling linearly to -1 over the last ``cache_length`` units, and
    -1 beyond ``max_length``:

    .. math::

        R(y) = \begin{cases}
            0 & |y| \le L_{max} - L_{cache} \\
            \frac{(L_{max} - L_{cache}) - |y|}{L_{cache}} & L_{max} - L_{cache} < |y| \le L_{max} \\
            -1 & L_{max} < |y|
        \end{cases}

    It is added to the correctness reward, so that a long answer is discouraged gradually instead of
    being cut off with a zero that tells the policy nothing about why.

    Options: `SoftOverlongOptions` (``max_length``, ``cache_length``, and the unit: tokens by
    default, as in DAPO).

    Example:
        >>> from rewardlab import Sample
        >>> reward = SoftOverlongPunishment(max_length=100, cache_length=20)
        >>> reward.score([Sample(completion="...", fields={"completion_ids": [0] * 90})])[0].value
        -0.5
    """

    name = "soft_overlong"

    def __init__(
        self,
        *,
        max_length: int,
        cache_length: int,
        unit: LengthUnit = "tokens",
        tokenizer: Any | None = None,
        name: str | None = None,
    ):
        self.max_length = max_length
        self.cache_length = cache_length
        self.units = CompletionUnits(unit, tokenizer)
        if name is not None:
            self.name = name

    def check(self, sample: Sample) -> Score:
        length = self.units.count(sample)
        soft_start = self.max_length - self.cache_length
        details = {
            "length": length,
            "unit": self.units.unit,
            "soft_start": soft_start,
            "max_length": self.max_length,
        }
        if length <= soft_start:
            return Score(0.0, details=details)
        if length <= self.max_length:
            return Score(
                (soft_start - length) / self.cache_length,
                reason=f"{length} {self.units.unit} is in the soft zone ({soft_start}, {self.max_length}]",
                details=details,
            )
        return Score(
            -1.0, reason=f"{length} {self.units.unit} is over max_length={self.max_length}", details=details
        )


class RepetitionPenaltyOptions(UnitOptions):
    """Options of `RepetitionPenalty`."""

    ngram_size: int = Field(default=3, ge=1)
    """Length of the n-grams."""
    max_penalty: float = Field(default=-1.0, le=0)
    """The largest penalty (<= 0): reached at ``max_repeats`` repeats, or without it approached by
    a completion made of one repeated n-gram."""
    max_repeats: int | None = Field(default=None, ge=1)
    """The number of repeated n-grams at which the penalty reaches ``max_penalty``. With it the
    penalty counts repeats, ``min(1, repeats / max_repeats) * max_penalty``, and added text never
    lowers it; the generation limit in ``unit`` makes it the share of the budget spent on repeats.
    Default: none, the share of the completion's own n-grams (TRL), which padding dilutes."""
    unit: LengthUnit = "words"
    """What an n-gram is made of. ``words``: whitespace-separated words, lowercased, as in the
    open-r1 implementation. ``chars``: lowercased characters, for languages written without
    spaces (Chinese, Japanese). ``tokens``: token ids, as TRL does, from
    ``fields["completion_ids"]`` or ``tokenizer``."""


@takes_options(RepetitionPenaltyOptions)
class RepetitionPenalty(RuleReward):
    """N-gram repetition penalty, on the share of repeated n-grams or on their count.

    A **repeat** is an n-gram occurrence whose n-gram came earlier in the completion, so a
    completion has ``total - unique`` of them. By default the penalty is their share,
    ``(1 - unique / total) * max_penalty``, as in TRL's and open-r1's
    ``get_repetition_penalty_reward`` (the sequence-level ``get_repetition_penalty`` of
    eddycmu/demystify-long-cot, ``openrlhf/openrlhf/reward/repetition.py``): 0.0 without a
    repeat, close to ``max_penalty`` for a completion that loops.

    A share can be diluted: fresh text appended to a repetitive answer adds unique n-grams and
    lowers it (`rewardlab probe` measured it: ``fluff_padding`` won on right math answers). With
    ``max_repeats`` the penalty counts repeats instead, ``min(1, repeats / max_repeats) *
    max_penalty``. That is the form the paper trained with (Appendix C.2 of "Demystifying Long
    Chain-of-Thought Reasoning", arXiv 2502.03373, section 4.5; the same file's
    ``RepetitionDensePenalty``): a fixed penalty on each token of each repeated n-gram, never
    divided by the length. Appending text only adds n-grams after the others, and whether an
    earlier n-gram is a repeat depends only on what precedes it, so the count never falls: text
    added after a space or a line break (token ids appended, counted in tokens) never lowers the
    penalty. Text glued onto the last word changes that word (or, composing with it, the last
    character), so it can undo at most the repeats of the n-grams that contain it: one, in
    words. Rewardlab departs from the paper in three ways: one scalar per completion, not a reward
    per token; repeats counted once per n-gram occurrence, where the dense penalty marks the
    ``ngram_size`` tokens each one covers (overlapping repeats mark a token once); and capped at
    ``max_penalty``, so that it sits beside a 0-1 accuracy.

    Text (words and characters) is read as drawn (`rewardlab.rewards.visible_text.as_drawn`):
    zero-width characters are dropped and look-alike letters folded, so that a loop whose copies
    are spelled with a Cyrillic "о" here and a zero-width space there still repeats; hidden markup
    is kept, since a loop inside an HTML comment still costs its tokens.
    Completions with fewer than ``ngram_size`` units get 0.0.

    Options: `RepetitionPenaltyOptions` (``ngram_size``, ``max_penalty``, ``max_repeats``, the
    unit: words by default).

    Example:
        >>> from rewardlab import Sample
        >>> loop = [Sample(completion="go go go go go")]  # 4 bigrams, 1 unique: 3 repeats
        >>> RepetitionPenalty(ngram_size=2).score(loop)[0].value  # the share: (1 - 1/4) * -1
        -0.75
        >>> RepetitionPenalty(ngram_size=2, max_repeats=10).score(loop)[0].value  # 3/10 * -1
        -0.3
    """

    name = "repetition_penalty"

    def __init__(
        self,
        *,
        ngram_size: int = 3,
        max_penalty: float = -1.0,
        max_repeats: int | None = None,
        unit: LengthUnit = "words",
        tokenizer: Any | None = None,
        name: str | None = None,
    ):
        self.ngram_size = ngram_size
        self.max_penalty = float(max_penalty)
        self.max_repeats = max_repeats
        self.units = CompletionUnits(unit, tokenizer)
        if name is not None:
            self.name = name

    def check(self, sample: Sample) -> Score:
        units = self._units(sample)
        total = len(units) - self.ngram_size + 1
        details: dict[str, Any] = {"unit": self.units.unit, "ngram_size": self.ngram_size}
        if self.max_repeats is not None:
            details["max_repeats"] = self.max_repeats
        if total <= 0:
            return Score(0.0, details={**details, "total_ngrams": 0, "unique_ngrams": 0})
        size = self.ngram_size
        if isinstance(units, str):  # characters: slices of the text, cheaper than tuples
            unique = len({units[i : i + size] for i in range(total)})
        else:
            unique = len({tuple(units[i : i + size]) for i in range(total)})
        details.update(total_ngrams=total, unique_ngrams=unique)
        repeats = total - unique
        if repeats == 0:
            return Score(0.0, details=details)
        # The share as TRL computes it, to the last bit.
        share = 1 - unique / total if self.max_repeats is None else min(1.0, repeats / self.max_repeats)
        return Score(
            share * self.max_penalty,
            reason=f"{repeats} of {total} {self.ngram_size}-grams are repeats",
            details=details,
        )

    def _units(self, sample: Sample) -> Sequence[Hashable]:
        if self.units.unit == "tokens":
            return self.units.split(sample)
        text = as_drawn(sample.completion_text).lower()
        return text if self.units.unit == "chars" else text.split()


class LengthOptions(UnitOptions):
    """Options of `LengthReward`."""

    mode: Literal["linear_target", "below_max", "kimi"]
    """``linear_target``, ``below_max`` or ``kimi`` (see `LengthReward`)."""
    target_length: int | None = Field(default=None, gt=0)
    """The ideal length, for ``linear_target`` (required there, refused elsewhere)."""
    max_length: int | None = Field(default=None, ge=0)
    """The largest length that scores 1.0, for ``below_max`` (required there, refused
    elsewhere)."""
    correct_field: str = "correct"
    """The `Sample.fields` key holding correctness (a bool, or 0/1) in ``kimi`` mode, used when
    there is no ``correctness`` reward."""
    correctness: RewardSpec | None = None
    """A reward that decides correctness in ``kimi`` mode, e.g. ``{type: math_answer}``."""
    correct_threshold: float = 1.0
    """The ``correctness`` value from which a response counts as correct."""
    group_field: str = "group_id"
    """The `Sample.fields` key naming a sample's group in ``kimi`` mode; samples without it are
    grouped by prompt."""

    @model_validator(mode="after")
    def _options_of_the_mode(self) -> LengthOptions:
        if self.mode == "linear_target" and self.target_length is None:
            raise OptionError("target_length", "mode: linear_target needs a positive target_length")
        if self.mode == "below_max" and self.max_length is None:
            raise OptionError("max_length", "mode: below_max needs a max_length >= 0")
        if self.mode != "linear_target" and self.target_length is not None:
            raise OptionError("target_length", f"has no meaning with mode: {self.mode}")
        if self.mode != "below_max" and self.max_length is not None:
            raise OptionError("max_length", f"has no meaning with mode: {self.mode}")
        if self.mode != "kimi" and self.correctness is not None:
            raise OptionError("correctness", f"has no meaning with mode: {self.mode}")
        return self


@takes_options(LengthOptions)
class LengthReward(RuleReward):
    """A reward on completion length alone, or on length and correctness (``mode="kimi"``).

    Modes:

    - ``"linear_target"``: ``max(0, 1 - |length - target_length| / target_length)``: 1.0 at the
      target, falling linearly to 0.0 at 0 and at twice the target.
    - ``"below_max"``: 1.0 when ``length <= max_length``, else 0.0.
    - ``"kimi"``: Kimi k1.5's length reward (arXiv 2501.12599, section 2.3.3), which favours the
      shorter of a prompt's responses. Over the responses to one prompt, with ``min_len`` and
      ``max_len`` their shortest and longest lengths,
      ``lambda = 0.5 - (length - min_len) / (max_len - min_len)``; a correct response gets ``lambda``
      and an incorrect one ``min(0, lambda)``, so a short wrong answer is never rewarded. When all
      responses have the same length (or there is one), lambda is 0.

    Kimi mode needs every response of a prompt in the same batch (as GRPO produces them): samples are
    grouped by ``fields[group_field]`` when present, else by identical prompt. Correctness comes from
    the ``correctness`` reward when one is given (e.g. ``{type: math_answer}`` in a config: a
    response is correct when it scores at least ``correct_threshold``), else from
    ``fields[correct_field]`` (a bool, or 0/1); without either the sample is ``invalid_input``.
    A sample whose length cannot be measured makes its whole group ``invalid_input``, since the
    group's length range is then unknown.

    Options: `LengthOptions` (the mode and its length, the unit, where correctness and groups
    come from).

    Example:
        >>> from rewardlab import Sample
        >>> reward = LengthReward(mode="linear_target", target_length=10, unit="words")
        >>> reward.score([Sample(completion="one two three four five")])[0].value
        0.5
    """

    name = "length"

    def __init__(
        self,
        *,
        mode: Literal["linear_target", "below_max", "kimi"],
        target_length: int | None = None,
        max_length: int | None = None,
        unit: LengthUnit = "tokens",
        tokenizer: Any | None = None,
        correct_field: str = "correct",
        correctness: Reward | Mapping[str, Any] | None = None,
        correct_threshold: float = 1.0,
        group_field: str = "group_id",
        name: str | None = None,
    ):
        self.mode = mode
        self.scores_groups = mode == "kimi"
        self.target_length = target_length
        self.max_length = max_length
        self.units = CompletionUnits(unit, tokenizer)
        self.correct_field = correct_field
        self.correctness = None if correctness is None else built(correctness, "correctness")
        self.correct_threshold = correct_threshold
        self.group_field = group_field
        if name is not None:
            self.name = name

    def close(self) -> None:
        if self.correctness is not None:
            self.correctness.close()

    def check(self, sample: Sample) -> Score:
        if self.mode == "kimi":
            raise RuntimeError("mode='kimi' scores whole groups; call score() or ascore() on the batch")
        length = self.units.count(sample)
        details: dict[str, Any] = {"length": length, "unit": self.units.unit}
        if self.mode == "below_max":
            assert self.max_length is not None  # the options require it in this mode
            details["max_length"] = self.max_length
            if length <= self.max_length:
                return Score(1.0, details=details)
            return Score(
                0.0,
                reason=f"{length} {self.units.unit} is over max_length={self.max_length}",
                details=details,
            )
        assert self.target_length is not None  # the options require it in this mode
        details["target_length"] = self.target_length
        value = max(0.0, 1 - abs(length - self.target_length) / self.target_length)
        reason = (
            None
            if length == self.target_length
            else f"{length} {self.units.unit}, target {self.target_length}"
        )
        return Score(value, reason=reason, details=details)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        if self.mode != "kimi":
            return await super().ascore(samples)
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            groups[sample.group_key(self.group_field)].append(index)
        checks = None if self.correctness is None else await scores_or_failures(self.correctness, samples)
        scores: list[Score | None] = [None] * len(samples)
        for members in groups.values():
            for index, score in self._score_group(samples, members, checks).items():
                scores[index] = score
        return scores  # type: ignore[return-value]  # every index belongs to exactly one group

    def _score_group(
        self, samples: Sequence[Sample], members: list[int], checks: list[Score] | None
    ) -> dict[int, Score]:
        scores: dict[int, Score] = {}
        lengths: dict[int, int] = {}
        for index in members:
            try:
                lengths[index] = self.units.count(samples[index])
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{samples[index].label(index)}: {error}")
        if scores:
            culprit = next(iter(scores))
            for index in lengths:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT,
                    f"{samples[index].label(index)}: the length range of its group is unknown, "
                    f"{samples[culprit].label(culprit)} has no length",
                )
            return scores
        shortest, longest = min(lengths.values()), max(lengths.values())
        for index in members:
            sample, length = samples[index], lengths[index]
            # The paper leaves lambda undefined for equal lengths; 0 adds no length signal.
            weight = 0.0 if longest == shortest else 0.5 - (length - shortest) / (longest - shortest)
            details = {
                "length": length,
                "unit": self.units.unit,
                "group_size": len(members),
                "group_min_length": shortest,
                "group_max_length": longest,
                "lambda": weight,
            }
            if checks is not None and not checks[index].ok:
                check = checks[index]
                reason = f"{sample.label(index)}: correctness unknown: {check.reason}"
                scores[index] = Score.failure(check.status, reason, details=details)
                continue
            try:
                correct = (
                    self._correct(sample)
                    if checks is None
                    else _at_least(checks[index].value, self.correct_threshold)
                )
            except InvalidInput as error:
                scores[index] = Score.failure(
                    Status.INVALID_INPUT, f"{sample.label(index)}: {error}", details=details
                )
                continue
            details["correct"] = correct
            scores[index] = Score(weight if correct else min(0.0, weight), details=details)
        return scores

    def _correct(self, sample: Sample) -> bool:
        key = f"fields.{self.correct_field}"
        if self.correct_field not in sample.fields:
            raise InvalidInput(key, "missing; mode='kimi' needs to know whether the response is correct")
        value = sample.fields[self.correct_field]
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return value == 1
        raise InvalidInput(key, f"must be a bool or 0/1, got {value!r}")


def _at_least(value: float | None, threshold: float) -> bool:
    """Whether an ok score's value reaches ``threshold`` (a failed check never gets here)."""
    assert value is not None
    return value >= threshold
