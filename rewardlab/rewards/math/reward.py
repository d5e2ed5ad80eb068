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
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from rewardlab.errors import InvalidInput
from rewardlab.rewards.answer_region import AnswerRegion, Region
from rewardlab.rewards.contract import Reward, Sample, Score, Status
from rewardlab.rewards.math.answer import (
    MAX_ANSWER_CHARS,
    Answer,
    Equation,
    Hedged,
    InvalidAnswer,
    Scalar,
    is_choice_letter,
    parse_answer,
)
from rewardlab.rewards.math.cas import CasVerdict, cas_equivalent
from rewardlab.rewards.math.compare import APPROXIMATION_DIGITS, answers_equal, uses_pi
from rewardlab.rewards.math.echo import echoes_question
from rewardlab.rewards.math.evaluate import DivisionByZero, evaluate
from rewardlab.rewards.math.expression import Node, Unsupported, decimal_digits, is_literal, variables
from rewardlab.rewards.math.extract import (
    Extraction,
    Statement,
    block_in_place,
    concluding_statement,
    extract_answer,
    reference_answer,
)
from rewardlab.rewards.math.normalize import Normalized, normalize
from rewardlab.rewards.options import RuleOptions, takes_options
from rewardlab.rewards.process_pool import (
    KillableProcessPool,
    LazyPool,
    TaskFailed,
    TaskTimeout,
    WorkerCrashed,
    preload_in_workers,
)
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S, run_per_sample

CAS_WARM = "rewardlab.rewards.math.cas_warm"
Started = CasVerdict | tuple[Status, str] | concurrent.futures.Future
_VERDICT_CACHE_SIZE = 65536
#: More answers than this that only the CAS could settle are no single answer (and would cost
#: a CAS budget each).
MAX_CAS_ANSWERS = 3
#: A completion longer than this is not read (no model writes an answer this long).
MAX_COMPLETION_CHARS = 2_000_000
_OPENERS, _CLOSERS = "([{", ")]}"
#: An answer that starts with a relation or an operator that needs something before it
#: ("\\geq 5", "= 5", "* 2"), or ends in one ("5+", "3 \\cdot", "x =") or trails off ("5 + ..."),
#: is incomplete: no CAS should be asked to make a value of it.
_INCOMPLETE_START = re.compile(r"^(?:[=<>*/^_,]|\\(?:[lg]eq?|[lg]t|neq|cdot|times|div|approx)(?![a-zA-Z]))")
_INCOMPLETE_END = re.compile(
    r"(?:[-+=<>*/^_,(\[{]|\\(?:[lg]eq?|[lg]t|neq|cdot|times|div|approx|[lcv]?dots)(?![a-zA-Z])|\.\.\.?)$"
)
_DOTS = re.compile(r"\\[lcv]?dots(?![a-zA-Z])|\.\.\.")
_PLAIN_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
# A number, or a letter set to one: "7", "x = 7".
_PLAIN_VALUE = re.compile(r"(?:[a-zA-Z]\s*=\s*)?-?\d[\d,]*(?:\.\d+)?")
_OR = re.compile(r"\bor\b|\\lor(?![a-zA-Z])|\\vee(?![a-zA-Z])")
_EQUIVALENTLY = re.compile(r"^(?:equivalently|in\s+other\s+words|that\s+is|i\.e\.)[\s,:]*", re.IGNORECASE)
#: Statements read from a line rather than from an explicit answer marker.
_LINE_METHODS = frozenset({"final_line", "final_math", "restated"})


@dataclass(frozen=True, slots=True)
class _Unparsed:
    """Why the fast path could not read an answer (cached as a value, not as an exception)."""

    message: str
    too_large: bool


@dataclass(frozen=True, slots=True)
class Pending:
    """A sample that the fast path settled except for its ``unsure`` answers: the CAS decides those
    against ``gold`` (each must be equivalent for the sample to pass)."""

    details: dict[str, Any]
    gold: str
    unsure: tuple[str, ...]


def _parsed(text: str, choice_expected: bool, cleaned: Normalized) -> Answer | _Unparsed:
    try:
        return parse_answer(text, choice_expected=choice_expected, cleaned=cleaned)
    except InvalidAnswer as error:
        return _Unparsed(str(error), too_large=True)
    except (Unsupported, ValueError, ZeroDivisionError, OverflowError, RecursionError) as error:
        return _Unparsed(str(error), too_large=False)


@dataclass(frozen=True, slots=True)
class _Gold:
    """A reference answer, read once however many completions it grades."""

    cleaned: Normalized
    choice: bool
    answer: Answer | _Unparsed


@functools.lru_cache(maxsize=4096)
def _gold(gold: str) -> _Gold:
    cleaned = normalize(gold)
    choice = is_choice_letter(cleaned.text)
    return _Gold(cleaned, choice, _parsed(gold, choice, cleaned))


def _value_node(answer: Answer) -> Node | None:
    """The value an answer states: a scalar's, or the other side of ``x = ...`` / ``... = x``."""
    if isinstance(answer, Scalar):
        return answer.node
    if isinstance(answer, Equation) and answer.left[0] == "var":
        return answer.right
    if isinstance(answer, Equation) and answer.right[0] == "var":
        return answer.left
    return None


def _is_number(answer: Answer | _Unparsed) -> bool:
    node = None if isinstance(answer, _Unparsed) else _value_node(answer)
    return node is not None and not variables(node) and is_literal(node)


def _needs_a_number(gold: Answer | _Unparsed, predicted: Answer | _Unparsed) -> bool:
    """Whether only a number as written answers ``gold``: a gold that is one, except a printed
    float (it may stand for an exact value, ``4.1231056256`` for ``\\sqrt{17}``) and an angle in
    degrees answered in radians (``\\frac{\\pi}{2}`` for ``90^\\circ``)."""
    if not _is_number(gold) or isinstance(predicted, Hedged):
        return False
    assert isinstance(gold, Scalar | Equation)
    node = _value_node(gold)
    if node is None or (decimal_digits(node) or 0) >= APPROXIMATION_DIGITS:
        return False
    radians = isinstance(predicted, Scalar) and (predicted.radians or uses_pi(predicted.node))
    return not (isinstance(gold, Scalar) and gold.degrees and radians)


def _divides_by_zero(node: Node) -> bool:
    """Whether a number as written is a fraction over zero ("0/0", "\\frac{1}{0}")."""
    try:
        evaluate(node)
    except DivisionByZero:
        return True
    except (Unsupported, ValueError, OverflowError):
        return False
    return False


def _same_value_twice(gold: str, prediction: str) -> bool:
    """Whether "a or b" gives one value in two forms ("\\frac12, or 50%", "2 hours, or 120
    minutes", "10, or equivalently \\binom{5}{2}"): the first answers ``gold`` and every other one
    equals it in value. "5 or 6" and "5 or more" offer two values, or none."""
    parts = [part.strip(" ,;$()") for part in _OR.split(prediction)]
    if len(parts) < 2 or not all(parts) or fast_verdict(gold, parts[0])[0] is not True:
        return False
    first = _parsed(parts[0], False, normalize(parts[0]))
    for part in parts[1:]:
        other = _parsed(_EQUIVALENTLY.sub("", part), False, normalize(_EQUIVALENTLY.sub("", part)))
        if (
            isinstance(first, _Unparsed)
            or isinstance(other, _Unparsed)
            or answers_equal(first, other) is not True
        ):
            return False
    return True


def incomplete(cleaned: Normalized) -> str | None:
    """Why an answer is not a complete expression (unbalanced brackets, a dangling operator or
    relation, a trailing ellipsis), or None."""
    text = cleaned.text
    depth = 0
    for char in text:
        depth += (char in _OPENERS) - (char in _CLOSERS)
        if depth < 0:
            break
    if depth != 0:
        return f"{text[:80]!r} has unbalanced brackets"
    if _INCOMPLETE_START.search(text) or _INCOMPLETE_END.search(text) or _DOTS.search(text):
        return f"{text[:80]!r} is not a complete expression"
    return None


@functools.lru_cache(maxsize=_VERDICT_CACHE_SIZE)
def fast_verdict(gold: str, prediction: str) -> tuple[bool | None, str | None]:
    """(verdict or None when unsure, reason) from the fast path alone; raises `InvalidAnswer`
    for an answer too large to verify.

    A gold that is a number as written (an integer, a decimal, a fraction, scientific notation)
    is answered only by a number as written: "17 - 7", "2(16-3-4)", "|17 - 7|" and "9 \\cdot 2^1"
    are arithmetic left undone, equal in value but restating a computation instead of giving
    its result (a policy under GRPO learned to echo "The answer is 17 - 7." for "What is 17 - 7?").
    """
    expected = _gold(gold)
    gold_answer, choice_expected = expected.answer, expected.choice
    cleaned = normalize(prediction)
    if (
        cleaned == expected.cleaned
        and cleaned.text
        and not choice_expected
        and len(prediction) <= MAX_ANSWER_CHARS
    ):
        return True, None  # the reference as written: nothing to parse
    predicted = _parsed(prediction, choice_expected, cleaned)
    if isinstance(predicted, _Unparsed) and predicted.too_large:
        raise InvalidAnswer(predicted.message)
    if isinstance(predicted, Scalar) and is_literal(predicted.node) and _divides_by_zero(predicted.node):
        return False, f"{prediction!r} divides by zero: it states no value"
    if _needs_a_number(gold_answer, predicted) and not _is_number(predicted):
        value = None if isinstance(predicted, _Unparsed) else _value_node(predicted)
        if value is not None and not variables(value):
            return False, f"{prediction!r} is arithmetic left undone, not a number"
        if isinstance(predicted, _Unparsed | Scalar):
            return False, f"{prediction!r} is not a number"
        if isinstance(predicted, Equation) and variables(predicted.left) and variables(predicted.right):
            # "p(0) + p(4) = 128 - 106r": a relation between unknowns states no value at all.
            return False, f"{prediction!r} relates unknowns, it is not a number"
    if isinstance(gold_answer, _Unparsed) or isinstance(predicted, _Unparsed):
        reason = incomplete(cleaned)
        return (False, reason) if reason is not None else (None, None)
    verdict = answers_equal(gold_answer, predicted)
    if isinstance(predicted, Hedged) and not verdict and _same_value_twice(gold, prediction):
        return True, None  # "\\frac12, or 50%": one value, written two ways
    if isinstance(predicted, Hedged) and not verdict:
        return False, "the answer hedges between several values, or contradicts itself"
    return verdict, None


@functools.lru_cache(maxsize=4096)
def _echo(question: str, gold: str, prediction: str) -> bool:
    """Whether ``prediction`` restates an expression of ``question`` (`echo`)."""
    expected = _gold(gold).answer
    if not question or isinstance(expected, _Unparsed) or _PLAIN_NUMBER.fullmatch(prediction.strip()):
        return False
    predicted = _parsed(prediction, False, normalize(prediction))
    return not isinstance(predicted, _Unparsed) and echoes_question(question, expected, predicted)


def _graded(statements: Sequence[Statement], choice: bool) -> list[Statement]:
    """The distinct statements to grade. For a multiple-choice reference, an option is read from
    the sentence of an explicit statement ("Answer: (B) 42") but from the value of a final line
    (its sentence is the whole line), and a line restating a value after the answer counts only
    when it names an option ("Answer: B. The value is 42." answers B; "Answer: B.\n\nD" does not).
    A conclusion leading in to a box counts only as a plain number: a computation there is the
    working the box evaluates."""
    graded = []
    for statement in dict.fromkeys(statements):
        plain = _PLAIN_VALUE.fullmatch(statement.answer.strip())
        if statement.method == "lead_in" and not plain and not _OR.search(statement.answer):
            continue  # "the number of ways is \\binom{5}{2}" before \\boxed{10}: working, not a rival
        if not choice or statement.method not in _LINE_METHODS:
            graded.append(statement)
        elif statement.method != "restated" or is_choice_letter(normalize(statement.answer).text):
            graded.append(replace(statement, sentence=statement.answer))
    return graded


def first_pass(reward: MathAnswerReward, item: tuple[int, Sample]) -> Score | Pending:
    """Everything but the CAS for one sample (run in a rule worker, under the sample budget)."""
    index, sample = item
    try:
        return reward.first_pass(sample)
    except InvalidInput as error:
        return Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
    except Exception as error:  # noqa: BLE001 - one sample's bug must not sink the batch
        return Score.failure(Status.ERROR, f"{sample.label(index)}: {type(error).__name__}: {error}")


@functools.lru_cache(maxsize=4096)
def _reference_answer(reference: str) -> str | None:
    return reference_answer(reference)


class MathAnswerOptions(RuleOptions):
    """Options of `MathAnswerReward`."""

    use_phrases: bool = True
    """Read "the answer is X" / "Answer: X" / "#### X" / "A: X"."""
    use_final_line: bool = True
    """Without an explicit statement, read the final line."""
    last_number_fallback: bool = False
    """As a last resort take the last number in the text (off: it rewards answers that were
    never stated as answers)."""
    use_cas: bool = True
    """Send pairs the fast path cannot settle to math-verify. Without it, such pairs get status
    ``parse_error``."""
    cas_budget_s: float = Field(default=3.0, gt=0)
    """Wall-clock CAS budget of one sample, shared by the answers it states that only the CAS can
    settle; past it the worker is killed and the sample gets status ``timeout``."""
    cas_workers: int | None = Field(default=None, ge=1)
    """CAS worker processes (default: min(2, CPU count))."""
    memory_limit_mb: int = Field(default=1024, ge=1)
    """Address space a CAS worker may add to what it holds when it starts, in MiB (its
    ``RLIMIT_AS``: the same room whichever other rewards' modules its forkserver preloaded)."""
    correct_value: float = 1.0
    """The reward of a correct answer."""
    incorrect_value: float = 0.0
    """The reward of a wrong answer, or of none."""


@takes_options(MathAnswerOptions)
class MathAnswerReward(Reward):
    """1.0 when the completion commits to the reference's answer, else 0.0.

    What counts as the answer is one policy, in `extract`: the answer region (reasoning is not
    the answer), every explicit statement in it (boxes, "the answer is", "Answer:", "####",
    "A:"), else the final line. **Every** explicit statement must be the reference's answer: a
    completion that states two different answers, hedges ("5 or 6", "at least 5", "maybe 5"),
    negates its answer ("it cannot be 5") or takes it back ("Wait, I made an error.") earns
    ``incorrect_value`` with the reason.

    Options: `MathAnswerOptions` (which statements are read, the CAS and its budget, the two
    reward values), and where the answer is read and how reading runs (`RuleOptions`: in a
    killable worker by default, under ``sample_budget_s`` per sample - a real completion takes
    well under a millisecond).

    The reference may be a bare answer or a whole solution: a MATH solution with a boxed
    answer, a GSM8K solution with ``<<...>>`` annotations ending in "#### X" or "A: X". A
    completion with no answer scores ``incorrect_value`` (an ok score: the model did not
    answer); a reference with none is ``invalid_input``.

    Example:
        >>> from rewardlab import Sample
        >>> reward = MathAnswerReward()
        >>> sample = Sample(completion="So $\\boxed{\\frac{1}{2}}$.", reference="0.5")
        >>> [score.value for score in reward.score([sample])]
        [1.0]
        >>> reward.close()
    """

    name = "math_answer"

    def __init__(
        self,
        *,
        answer_region: Any = None,
        use_phrases: bool = True,
        use_final_line: bool = True,
        last_number_fallback: bool = False,
        use_cas: bool = True,
        cas_budget_s: float = 3.0,
        cas_workers: int | None = None,
        memory_limit_mb: int = 1024,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        correct_value: float = 1.0,
        incorrect_value: float = 0.0,
        name: str | None = None,
    ):
        self.answer_region = AnswerRegion.from_option(answer_region)
        self.execution = execution
        self.sample_budget_s = float(sample_budget_s)
        self.use_phrases = use_phrases
        self.use_final_line = use_final_line
        self.last_number_fallback = last_number_fallback
        self.use_cas = use_cas
        self.cas_budget_s = cas_budget_s
        self.cas_workers = cas_workers or min(2, os.cpu_count() or 1)
        self.memory_limit_mb = memory_limit_mb
        self.correct_value = correct_value
        self.incorrect_value = incorrect_value
        if name is not None:
            self.name = name
        self.io_bound = self.execution == "worker" or use_cas
        preload_in_workers(CAS_WARM, __name__)
        self._pool = LazyPool(
            functools.partial(
                KillableProcessPool,
                self.cas_workers,
                preload=[CAS_WARM],
                memory_limit_bytes=memory_limit_mb << 20,
            )
        )
        self._cas_cache: dict[tuple[str, str], CasVerdict] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a rule worker with every batch: the CAS verdicts stay here.
        return {**self.__dict__, "_cas_cache": {}}

    def close(self) -> None:
        self._pool.close()

    @property
    def pool(self) -> KillableProcessPool:
        return self._pool.get()

    def _scored(self, right: bool, reason: str | None, details: dict[str, Any]) -> Score:
        return Score(
            value=self.correct_value if right else self.incorrect_value,
            reason=None if right else reason,
            details=details,
        )

    def first_pass(self, sample: Sample) -> Score | Pending:
        """A final score, or the answers only the CAS can settle (see `Pending`)."""
        if not sample.reference or not str(sample.reference).strip():
            raise InvalidInput("reference", "a reference answer is required")
        gold = _reference_answer(str(sample.reference))
        if gold is None:
            raise InvalidInput("reference", "the reference solution states no final answer")
        region = self.answer_region.read(sample.completion_text)
        details: dict[str, Any] = {"reference_answer": gold, "answer_region": region.source}
        if region.text is None:
            return self._scored(False, region.reason, {**details, "extracted": None, "method": "none"})
        reason: str | None
        if len(region.text) > MAX_COMPLETION_CHARS:
            reason = f"the answer region is {len(region.text)} characters, over {MAX_COMPLETION_CHARS}"
            return self._scored(False, reason, {**details, "extracted": None, "method": "none"})
        extraction = self._extraction(region, sample.prompt_text)
        answers = extraction.answers
        details.update(extracted=answers[0] if len(answers) == 1 else list(answers) or None)
        details["method"] = extraction.method
        if not answers:
            return self._scored(False, extraction.refusal or "no final answer found", details)
        choice = _gold(gold).choice
        unsure = []
        for statement in _graded(extraction.statements, choice):
            try:
                verdict, reason = fast_verdict(gold, statement.sentence if choice else statement.answer)
            except InvalidAnswer as error:
                # An answer too long to be one (a 100,000-digit box) is not the reference's answer.
                verdict, reason = False, str(error)
            if verdict is not False and not choice and _echo(sample.prompt_text, gold, statement.answer):
                verdict, reason = False, f"{statement.answer!r} restates the question instead of answering it"
            if verdict is False:
                reason = reason or f"answer {statement.answer!r} is not equivalent to {gold!r}"
                if len(answers) > 1:
                    reason = f"{len(answers)} different answers stated; {reason}"
                return self._scored(False, reason, {**details, "path": "fast"})
            if verdict is None:
                unsure.append(statement.answer)
        if not unsure:
            return self._scored(True, None, {**details, "path": "fast"})
        unsure = list(dict.fromkeys(unsure))
        if len(unsure) > MAX_CAS_ANSWERS:
            # Each would cost a CAS budget: a completion stating this many answers commits to none.
            reason = f"{len(unsure)} different answers the fast path cannot settle: no single answer"
            return self._scored(False, reason, {**details, "path": "fast"})
        if not self.use_cas:
            reason = "the fast path could not decide and the CAS is disabled"
            return Score.failure(Status.PARSE_ERROR, reason, details=details)
        return Pending(details, gold, tuple(unsure))

    def _extraction(self, region: Region, question: str) -> Extraction:
        """The statements of the answer region. An answer block is read in its place when it can
        be (`block_in_place`), so that the sentence around it counts; otherwise its content is
        read alone, and what is stated outside it (an answer, a conclusion) must agree."""
        assert region.text is not None
        framing = block_in_place(region.text) if region.parts else None
        framed = region.framed(framing) if framing is not None else None
        extraction = extract_answer(
            framed if framed is not None else region.text,
            question=question,
            use_phrases=self.use_phrases,
            use_final_line=self.use_final_line,
            last_number_fallback=self.last_number_fallback,
        )
        if not region.around or not extraction.statements:
            return extraction
        stated: tuple[Statement, ...] = ()
        if framed is None:
            stated = extract_answer(region.around, question=question, use_final_line=False).statements
        if not stated and (concluded := concluding_statement(region.around, question)):
            stated = (concluded,)  # "Therefore x = 7.\n<answer>10</answer>"
        return replace(extraction, statements=extraction.statements + stated)

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        passes = await run_per_sample(
            first_pass, self, samples, execution=self.execution, budget_s=self.sample_budget_s
        )
        started: dict[tuple[str, str], Started] = {}
        for outcome in passes:
            if isinstance(outcome, Pending):
                # One CAS budget per sample, shared by its answers.
                budget_s = self.cas_budget_s / len(outcome.unsure)
                for answer in outcome.unsure:
                    if (pair := (outcome.gold, answer)) not in started:
                        # Submitted now, so the CAS works on all of them at once.
                        started[pair] = self._start_cas(pair, budget_s)
        verdicts = dict(
            zip(
                started,
                await asyncio.gather(*(self._finish_cas(p, s) for p, s in started.items())),
                strict=True,
            )
        )
        return [
            self._settled(outcome, verdicts) if isinstance(outcome, Pending) else outcome
            for outcome in passes
        ]

    def _settled(
        self, pending: Pending, verdicts: dict[tuple[str, str], CasVerdict | tuple[Status, str]]
    ) -> Score:
        details = {**pending.details, "path": "cas"}
        for answer in pending.unsure:
            outcome = verdicts[(pending.gold, answer)]
            if not isinstance(outcome, CasVerdict):
                return Score.failure(outcome[0], outcome[1], details=details)
            if not outcome.equivalent:
                reason = outcome.reason or f"answer {answer!r} is not equivalent to {pending.gold!r}"
                return self._scored(False, reason, details)
        return self._scored(True, None, details)

    def _start_cas(self, pair: tuple[str, str], budget_s: float) -> Started:
        """A cached verdict, or the running CAS comparison."""
        if pair in self._cas_cache:
            return self._cas_cache[pair]
        return self.pool.submit(cas_equivalent, *pair, budget_s=budget_s)

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
