"""Shaping rewards on the length and repetitiveness of a completion, not on its correctness.

They are meant as small extra terms in a `Combine` beside an accuracy reward: DAPO's soft overlong
punishment, the n-gram repetition penalty of "Demystifying Long Chain-of-Thought Reasoning", and
length rewards (a target length, a hard cap, and Kimi k1.5's group-relative length reward).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

from rewardlab.errors import InvalidInput
from rewardlab.rewards.combine import scores_or_failures
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.registry import build, construct
from rewardlab.rewards.rule import RuleReward

LengthUnit = Literal["tokens", "chars", "words"]
_UNITS = ("tokens", "chars", "words")


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
    is ``invalid_input``, never silently measured in characters instead. Words are whitespace-separated.
    """

    def __init__(self, unit: LengthUnit, tokenizer: Any | None = None):
        if unit not in _UNITS:
            raise ValueError(f"unit must be one of {', '.join(_UNITS)}, got {unit!r}")
        if tokenizer is not None:
            if unit != "tokens":
                raise ValueError(f"a tokenizer is only used with unit='tokens', not {unit!r}")
            if not callable(getattr(tokenizer, "encode", None)):
                raise ValueError(
                    f"tokenizer must have an encode(text) method, got {type(tokenizer).__name__}"
                )
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
            return sample.completion_text.split()
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

    Args:
        max_length: :math:`L_{max}`, the length at which the punishment reaches -1; usually the
            generation limit. TRL calls it ``max_completion_len``, verl ``max_response_length``.
        cache_length: :math:`L_{cache}`, the width of the soft zone before ``max_length``
            (TRL: ``soft_punish_cache``, verl: ``overlong_buffer.len``). 0 makes it a hard step.
        unit: ``"tokens"`` (default, as in DAPO), ``"chars"`` or ``"words"``. See `CompletionUnits`.
        tokenizer: Anything with ``encode(text)``, used for token counts when a sample carries no
            ``fields["completion_ids"]``.
        name: Stable name for logs and metrics.

    Example:
        >>> from rewardlab import Sample
        >>> reward = SoftOverlongPunishment(max_length=100, cache_length=20)
        >>> reward.score([Sample(completion="...", fields={"completion_ids": [0] * 90})])[0].value
        -0.5
    """

    def __init__(
        self,
        *,
        max_length: int,
        cache_length: int,
        unit: LengthUnit = "tokens",
        tokenizer: Any | None = None,
        name: str = "soft_overlong",
    ):
        if max_length <= 0:
            raise ValueError(f"max_length must be positive, got {max_length}")
        if not 0 <= cache_length <= max_length:
            raise ValueError(
                f"cache_length must be between 0 and max_length={max_length}, got {cache_length}"
            )
        self.max_length = max_length
        self.cache_length = cache_length
        self.units = CompletionUnits(unit, tokenizer)
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


class RepetitionPenalty(RuleReward):
    """N-gram repetition penalty: ``(1 - unique n-grams / total n-grams) * max_penalty``.

    From Appendix C.2 of "Demystifying Long Chain-of-Thought Reasoning" (arXiv 2502.03373), as in
    TRL's ``get_repetition_penalty_reward``: 0.0 for a completion without a repeated n-gram, close to
    ``max_penalty`` for one that loops. Completions with fewer than ``ngram_size`` units get 0.0.

    Args:
        ngram_size: Length of the n-grams (default 3).
        max_penalty: The penalty of a completion made of one repeated n-gram, in the limit
            (default -1.0); must be <= 0.
        unit: What an n-gram is made of. ``"words"`` (default): whitespace-separated words, lowercased,
            as in the open-r1 implementation. ``"chars"``: lowercased characters, for languages written
            without spaces (Chinese, Japanese). ``"tokens"``: token ids, as TRL does, from
            ``fields["completion_ids"]`` or ``tokenizer``.
        tokenizer: Anything with ``encode(text)``, for ``unit="tokens"`` when samples carry no ids.
        name: Stable name for logs and metrics.

    Example:
        >>> from rewardlab import Sample
        >>> reward = RepetitionPenalty(ngram_size=2)
        >>> reward.score([Sample(completion="go go go go go")])[0].value  # 4 bigrams, 1 unique
        -0.75
    """

    def __init__(
        self,
        *,
        ngram_size: int = 3,
        max_penalty: float = -1.0,
        unit: LengthUnit = "words",
        tokenizer: Any | None = None,
        name: str = "repetition_penalty",
    ):
        if ngram_size < 1:
            raise ValueError(f"ngram_size must be at least 1, got {ngram_size}")
        if max_penalty > 0:
            raise ValueError(f"max_penalty must be <= 0 (it is a penalty), got {max_penalty}")
        self.ngram_size = ngram_size
        self.max_penalty = float(max_penalty)
        self.units = CompletionUnits(unit, tokenizer)
        self.name = name

    def check(self, sample: Sample) -> Score:
        units = self.units.split(sample)
        if self.units.unit != "tokens":
            units = [unit.lower() for unit in units]
        total = len(units) - self.ngram_size + 1
        details: dict[str, Any] = {"unit": self.units.unit, "ngram_size": self.ngram_size}
        if total <= 0:
            return Score(0.0, details={**details, "total_ngrams": 0, "unique_ngrams": 0})
        unique = len({tuple(units[i : i + self.ngram_size]) for i in range(total)})
        details.update(total_ngrams=total, unique_ngrams=unique)
        if unique == total:
            return Score(0.0, details=details)
        return Score(
            (1 - unique / total) * self.max_penalty,
            reason=f"{total - unique} of {total} {self.ngram_size}-grams are repeats",
            details=details,
        )


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

    Args:
        mode: ``"linear_target"``, ``"below_max"`` or ``"kimi"``.
        target_length: The ideal length, for ``"linear_target"`` only.
        max_length: The largest length that scores 1.0, for ``"below_max"`` only.
        unit: ``"tokens"`` (default), ``"chars"`` or ``"words"``. See `CompletionUnits`.
        tokenizer: Anything with ``encode(text)``, for token counts when samples carry no
            ``fields["completion_ids"]``.
        correct_field: The `Sample.fields` key holding correctness in ``"kimi"`` mode (default
            ``"correct"``), used when there is no ``correctness`` reward.
        correctness: A reward that decides correctness in ``"kimi"`` mode.
        correct_threshold: The ``correctness`` value from which a response counts as correct.
        group_field: The `Sample.fields` key naming a sample's group in ``"kimi"`` mode (default
            ``"group_id"``).
        name: Stable name for logs and metrics.

    Example:
        >>> from rewardlab import Sample
        >>> reward = LengthReward(mode="linear_target", target_length=10, unit="words")
        >>> reward.score([Sample(completion="one two three four five")])[0].value
        0.5
    """

    def __init__(
        self,
        *,
        mode: Literal["linear_target", "below_max", "kimi"],
        target_length: int | None = None,
        max_length: int | None = None,
        unit: LengthUnit = "tokens",
        tokenizer: Any | None = None,
        correct_field: str = "correct",
        correctness: Reward | None = None,
        correct_threshold: float = 1.0,
        group_field: str = "group_id",
        name: str = "length",
    ):
        if correctness is not None and mode != "kimi":
            raise ValueError(f"correctness has no meaning with mode={mode!r}")
        if mode not in ("linear_target", "below_max", "kimi"):
            raise ValueError(f"mode must be 'linear_target', 'below_max' or 'kimi', got {mode!r}")
        if mode == "linear_target" and (target_length is None or target_length <= 0):
            raise ValueError(f"mode='linear_target' needs a positive target_length, got {target_length!r}")
        if mode == "below_max" and (max_length is None or max_length < 0):
            raise ValueError(f"mode='below_max' needs a max_length >= 0, got {max_length!r}")
        if mode != "linear_target" and target_length is not None:
            raise ValueError(f"target_length has no meaning with mode={mode!r}")
        if mode != "below_max" and max_length is not None:
            raise ValueError(f"max_length has no meaning with mode={mode!r}")
        self.mode = mode
        self.target_length = target_length
        self.max_length = max_length
        self.units = CompletionUnits(unit, tokenizer)
        self.correct_field = correct_field
        self.correctness = correctness
        self.correct_threshold = correct_threshold
        self.group_field = group_field
        self.name = name

    @classmethod
    def from_config(cls, options: dict[str, Any], *, path: str) -> LengthReward:
        """Build from a config; ``correctness`` may be a nested reward config."""
        options = dict(options)
        if isinstance(options.get("correctness"), Mapping):
            options["correctness"] = build(options["correctness"], path=f"{path}.correctness".lstrip("."))
        return construct(cls, options, path=path)

    def close(self) -> None:
        if self.correctness is not None:
            self.correctness.close()

    def check(self, sample: Sample) -> Score:
        if self.mode == "kimi":
            raise RuntimeError("mode='kimi' scores whole groups; call score() or ascore() on the batch")
        length = self.units.count(sample)
        details: dict[str, Any] = {"length": length, "unit": self.units.unit}
        if self.mode == "below_max":
            details["max_length"] = self.max_length
            if length <= self.max_length:
                return Score(1.0, details=details)
            return Score(
                0.0,
                reason=f"{length} {self.units.unit} is over max_length={self.max_length}",
                details=details,
            )
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
                    self._correct(sample) if checks is None else checks[index].value >= self.correct_threshold
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
