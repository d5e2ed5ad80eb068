"""`MathAnswerReward`: is the final answer in a completion equivalent to the reference answer?

Two paths. The fast path (`compare`) parses both answers with a small exact evaluator and settles
the common cases in microseconds. What it cannot settle goes to the CAS path (math-verify in a
pool of killable worker processes, one wall-clock budget per comparison). Verdicts are cached by
(reference answer, predicted answer), so the G rollouts of one prompt that agree on an answer
cost one comparison.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.rewards.contract import InvalidInput, Reward, Sample, Score, Status
from rewardlab.rewards.math.answer import Answer, Hedged, InvalidAnswer, is_choice_letter, parse_answer
from rewardlab.rewards.math.cas import CasVerdict, cas_equivalent
from rewardlab.rewards.math.compare import answers_equal
from rewardlab.rewards.math.expression import Unsupported
from rewardlab.rewards.math.extract import BoxChoice, extract_answer, reference_answer
from rewardlab.rewards.math.normalize import normalize
from rewardlab.rewards.process_pool import (
    KillableProcessPool,
    LazyPool,
    TaskFailed,
    TaskTimeout,
    WorkerCrashed,
)

Started = CasVerdict | tuple[Status, str] | concurrent.futures.Future
_VERDICT_CACHE_SIZE = 65536
#: Plain numbers (thousands separated or not, each maybe in brackets) joined by +, -, *, times,
#: cdot or div and nothing else: "17 - 7", "(9+1)", "6 \\times 7", "2 \\times (3+2)". Not
#: "3 \\times 10^5" nor "\\frac{100 \\cdot 101}{2}" (compared by value), nor "1/2" (a fraction).
_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_OPERAND = rf"[({{]*{_NUMBER}[)}}]*"
_OPERATOR = r"(?:[-+*\u2212\u2013\u00d7\u00b7\u00f7]|\\times|\\cdot|\\div)"
_UNDONE_ARITHMETIC = re.compile(rf"{_OPERAND}(?:\s*{_OPERATOR}\s*{_OPERAND})+")
#: A normalized gold that is one number (normalizing drops thousands separators).
_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class _Unparsed:
    """Why the fast path could not read an answer (cached as a value, not as an exception)."""

    message: str
    too_large: bool


@functools.lru_cache(maxsize=_VERDICT_CACHE_SIZE)
def _parsed(text: str, choice_expected: bool) -> Answer | _Unparsed:
    try:
        return parse_answer(text, choice_expected=choice_expected)
    except InvalidAnswer as error:
        return _Unparsed(str(error), too_large=True)
    except (Unsupported, ValueError, ZeroDivisionError, OverflowError, RecursionError) as error:
        return _Unparsed(str(error), too_large=False)


@functools.lru_cache(maxsize=_VERDICT_CACHE_SIZE)
def fast_verdict(gold: str, prediction: str) -> tuple[bool | None, str | None]:
    """(verdict or None when unsure, reason) from the fast path alone; raises `InvalidAnswer`
    for an answer too large to verify."""
    if _arithmetic_left_undone(gold, prediction):
        return False, f"{prediction!r} is arithmetic left undone, not a value"
    choice_expected = is_choice_letter(normalize(gold).text)
    gold_answer = _parsed(gold, choice_expected)
    predicted = _parsed(prediction, choice_expected)
    if isinstance(predicted, _Unparsed) and predicted.too_large:
        raise InvalidAnswer(predicted.message)
    if normalize(gold) == normalize(prediction) and not choice_expected:
        return True, None
    if isinstance(gold_answer, _Unparsed) or isinstance(predicted, _Unparsed):
        return None, None
    verdict = answers_equal(gold_answer, predicted)
    if isinstance(predicted, Hedged) and not verdict:
        return False, "the answer hedges between several values, or contradicts itself"
    return verdict, None


def _arithmetic_left_undone(gold: str, prediction: str) -> bool:
    """Whether a plain number is answered by a computation on numbers not carried out ("17 - 7"
    for 10). Equal in value, it restates the question rather than answering it: a policy under
    RL was seen to learn exactly this, echoing "The answer is 17 - 7." for "What is 17 - 7?".
    Only an answer made of nothing but plain numbers and those operators counts (see
    ``_UNDONE_ARITHMETIC``); an equation ("17 - 7 = 10") states its value and is compared."""
    return (
        _PLAIN_NUMBER.fullmatch(normalize(gold).text) is not None
        and _UNDONE_ARITHMETIC.fullmatch(normalize(prediction).text) is not None
    )


class MathAnswerReward(Reward):
    """1.0 when the completion's final answer equals the reference answer, else 0.0.

    Args:
        box_choice: Which ``\\boxed{}`` counts when there are several: ``"final_paragraph"``
            (default: every distinct box of the last paragraph, as a list, so that hedging with
            several boxes never matches a single answer), ``"last"`` or ``"first"``.
        use_phrases: Accept "the answer is X" / "Answer: X" when nothing is boxed (default True).
        use_final_line: Accept a math span on the final line, or a short final line (default True).
        last_number_fallback: As a last resort take the last number in the text (default False:
            it rewards answers that were never stated as answers).
        use_cas: Send pairs the fast path cannot settle to math-verify (default True). Without it,
            such pairs get status ``parse_error``.
        cas_budget_s: Wall-clock budget per CAS comparison; past it the worker is killed and the
            sample gets status ``timeout`` (default 3.0).
        cas_workers: CAS worker processes (default: min(2, CPU count)).
        memory_limit_mb: Address-space limit per CAS worker (default 1024).
        correct_value / incorrect_value: The two reward values (default 1.0 / 0.0).
        name: Name in logs and breakdowns.

    The reference may be a bare answer, a solution with a boxed answer, or a GSM8K solution
    ending in "#### answer". A completion with no findable answer scores ``incorrect_value``
    (an ok score: the model did not answer); a reference that cannot be read is a failure status.

    Example:
        >>> from rewardlab import Sample
        >>> reward = MathAnswerReward()
        >>> sample = Sample(completion="So $\\\\boxed{\\\\frac{1}{2}}$.", reference="0.5")
        >>> [score.value for score in reward.score([sample])]
        [1.0]
    """

    def __init__(
        self,
        *,
        box_choice: BoxChoice = "final_paragraph",
        use_phrases: bool = True,
        use_final_line: bool = True,
        last_number_fallback: bool = False,
        use_cas: bool = True,
        cas_budget_s: float = 3.0,
        cas_workers: int | None = None,
        memory_limit_mb: int = 1024,
        correct_value: float = 1.0,
        incorrect_value: float = 0.0,
        name: str = "math_answer",
    ):
        if box_choice not in ("final_paragraph", "last", "first"):
            raise ValueError(f"box_choice must be 'final_paragraph', 'last' or 'first', got {box_choice!r}")
        if cas_budget_s <= 0:
            raise ValueError("cas_budget_s must be positive")
        self.box_choice = box_choice
        self.use_phrases = use_phrases
        self.use_final_line = use_final_line
        self.last_number_fallback = last_number_fallback
        self.use_cas = use_cas
        self.cas_budget_s = cas_budget_s
        self.cas_workers = cas_workers or min(2, os.cpu_count() or 1)
        self.memory_limit_mb = memory_limit_mb
        self.correct_value = correct_value
        self.incorrect_value = incorrect_value
        self.name = name
        self._pool = LazyPool(
            functools.partial(
                KillableProcessPool,
                self.cas_workers,
                preload=["rewardlab.rewards.math.cas_warm"],
                memory_limit_bytes=memory_limit_mb << 20,
            )
        )
        self._cas_cache: dict[tuple[str, str], CasVerdict] = {}

    def close(self) -> None:
        self._pool.close()

    @property
    def pool(self) -> KillableProcessPool:
        return self._pool.get()

    def _verdict_score(self, verdict: bool, reason: str | None, details: dict[str, Any]) -> Score:
        value = self.correct_value if verdict else self.incorrect_value
        if not verdict and reason is None:
            reason = f"answer {details['extracted']!r} is not equivalent to {details['reference_answer']!r}"
        return Score(value=value, reason=None if verdict else reason, details=details)

    def _fast(self, sample: Sample, index: int) -> Score | tuple[str, str, dict[str, Any]]:
        """A final score, or the (gold, prediction, details) the CAS has to settle."""
        if not sample.reference or not str(sample.reference).strip():
            raise InvalidInput("reference", "a reference answer is required")
        gold = reference_answer(str(sample.reference))
        extraction = extract_answer(
            sample.completion_text,
            box_choice=self.box_choice,
            use_phrases=self.use_phrases,
            use_final_line=self.use_final_line,
            last_number_fallback=self.last_number_fallback,
        )
        details: dict[str, Any] = {
            "extracted": extraction.answer,
            "method": extraction.method,
            "reference_answer": gold,
        }
        if extraction.answer is None:
            return Score(value=self.incorrect_value, reason="no final answer found", details=details)
        try:
            verdict, reason = fast_verdict(gold, extraction.answer)
        except InvalidAnswer as error:
            return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}", details=details)
        if verdict is not None:
            return self._verdict_score(verdict, reason, {**details, "path": "fast"})
        return gold, extraction.answer, details

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        scores: list[Score | None] = [None] * len(samples)
        waiting: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
        started: dict[tuple[str, str], Started] = {}
        for index, sample in enumerate(samples):
            try:
                outcome = self._fast(sample, index)
            except InvalidInput as error:
                scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
                continue
            except Exception as error:  # noqa: BLE001 - one sample's bug must not sink the batch
                reason = f"{sample.label(index)}: {type(error).__name__}: {error}"
                scores[index] = Score.failure(Status.ERROR, reason)
                continue
            if isinstance(outcome, Score):
                scores[index] = outcome
                continue
            gold, prediction, details = outcome
            pair = (gold, prediction)
            if pair not in started:
                # Submitted now, so the CAS works while the fast path goes through the rest.
                started[pair] = self._start_cas(pair)
            waiting.setdefault(pair, []).append((index, details))
        outcomes = await asyncio.gather(*(self._finish_cas(pair, started[pair]) for pair in waiting))
        for pair, outcome in zip(waiting, outcomes, strict=True):
            for index, details in waiting[pair]:
                if isinstance(outcome, CasVerdict):
                    scores[index] = self._verdict_score(
                        outcome.equivalent, outcome.reason, {**details, "path": "cas"}
                    )
                else:
                    status, reason = outcome
                    scores[index] = Score.failure(status, reason, details=details)
        return scores  # type: ignore[return-value]  # every slot is filled above

    def _start_cas(self, pair: tuple[str, str]) -> Started:
        """A cached verdict, a reason there will be none, or the running CAS comparison."""
        if not self.use_cas:
            return Status.PARSE_ERROR, "the fast path could not decide and the CAS is disabled"
        if pair in self._cas_cache:
            return self._cas_cache[pair]
        return self.pool.submit(cas_equivalent, *pair, budget_s=self.cas_budget_s)

    async def _finish_cas(self, pair: tuple[str, str], started: Started) -> CasVerdict | tuple[Status, str]:
        if not isinstance(started, concurrent.futures.Future):
            return started
        try:
            verdict = await asyncio.wrap_future(started)
        except TaskTimeout as error:
            return Status.TIMEOUT, f"CAS comparison {error}"
        except TaskFailed as error:
            return (Status.PARSE_ERROR if "ReferenceNotParsed" in str(error) else Status.ERROR), str(error)
        except WorkerCrashed as error:
            return Status.ERROR, f"CAS worker crashed: {error}"
        if len(self._cas_cache) >= _VERDICT_CACHE_SIZE:
            del self._cas_cache[next(iter(self._cas_cache))]  # oldest first: dicts keep insertion order
        self._cas_cache[pair] = verdict
        return verdict
