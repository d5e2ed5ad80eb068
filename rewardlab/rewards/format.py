"""Rule rewards on the surface of a completion: its tag structure, a regular expression, an exact string.

These are the cheap checks that sit beside an accuracy reward (a format bonus, a gate) or stand in for
one when the gold answer is a short string.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rewardlab.rewards.answer_region import AnswerRegion, Region
from rewardlab.rewards.contract import Sample, Score
from rewardlab.rewards.details import clipped
from rewardlab.rewards.math.extract import bare_answer, extract_answer, offers_another
from rewardlab.rewards.math.spans import boxes
from rewardlab.rewards.math.text import reader_text, without_invisible
from rewardlab.rewards.options import OptionError, RuleOptions, TagName, WorkerOptions, takes_options
from rewardlab.rewards.rule import RuleReward, reference_answers
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S


class ThinkAnswerFormatOptions(WorkerOptions):
    """Options of `ThinkAnswerFormatReward`."""

    think_tag: TagName = "think"
    """Name of the reasoning tag."""
    answer_tag: TagName = "answer"
    """Name of the answer tag."""
    require_answer_tag: bool = True
    """The answer must sit in an answer block. False: whatever follows the think block is the
    answer, as in TRL's ``think_format_reward``; an answer block is still allowed, and then it
    must be well formed."""
    allow_text_outside: bool = False
    """False (strict, like the DeepSeek-R1 format reward and TRL's ``think_format_reward``): the
    completion starts with the think block and, when it has an answer block, ends with it, with
    only whitespace in between. True only checks the tags, for policies that may add a preamble
    or a closing remark."""
    think_opened_in_prompt: bool = False
    """The chat template already ends the prompt with the opening think tag (DeepSeek-R1 and some
    Qwen3 templates): the completion then starts inside the think block, and an opening tag in it
    would start a second block."""

    @model_validator(mode="after")
    def _tags_differ(self) -> ThinkAnswerFormatOptions:
        if self.think_tag == self.answer_tag:
            raise OptionError("answer_tag", f"must differ from think_tag, both are {self.think_tag!r}")
        return self


@takes_options(ThinkAnswerFormatOptions)
class ThinkAnswerFormatReward(RuleReward):
    """1.0 when the completion has the reasoning-then-answer tag structure, else 0.0.

    The default is DeepSeek-R1's format: ``<think>reasoning</think>`` then ``<answer>answer</answer>``
    and nothing else. The rules, checked in this order; the first one broken is named in
    ``details["failed_rule"]`` and explained in ``reason``:

    - ``one_think_block``: exactly one opening and one closing think tag.
    - ``think_order``: the think block opens before it closes.
    - ``one_answer_block``: exactly one answer block (at most one with ``require_answer_tag=False``).
    - ``answer_order``: the answer block opens before it closes.
    - ``answer_after_think``: the answer block starts after the think block ends, so it is neither
      inside nor before it.
    - ``text_before_think``, ``text_between_blocks``, ``text_after_answer`` (strict mode only): only
      whitespace outside the blocks.
    - ``empty_answer``: the answer holds some text. An empty ``<answer></answer>`` cannot be graded,
      and paying a format bonus for it invites the policy to stop answering.

    Options: `ThinkAnswerFormatOptions` (the tag names, how strict the layout is).

    Example:
        >>> from rewardlab import Sample
        >>> reward = ThinkAnswerFormatReward()
        >>> [s.value for s in reward.score([
        ...     Sample(completion="<think>2+2 is 4</think>\\n<answer>4</answer>"),
        ...     Sample(completion="The answer is 4."),
        ... ])]
        [1.0, 0.0]
    """

    name = "think_answer_format"

    def __init__(
        self,
        *,
        think_tag: str = "think",
        answer_tag: str = "answer",
        require_answer_tag: bool = True,
        allow_text_outside: bool = False,
        think_opened_in_prompt: bool = False,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        # The format is the whole completion's: its tags are what is checked.
        self.configure_rule(answer_region="whole", execution=execution, sample_budget_s=sample_budget_s)
        self.think_tag = think_tag
        self.answer_tag = answer_tag
        self.require_answer_tag = require_answer_tag
        self.allow_text_outside = allow_text_outside
        self.think_opened_in_prompt = think_opened_in_prompt
        if name is not None:
            self.name = name

    def check(self, sample: Sample) -> Score:
        text = sample.completion_text
        if self.think_opened_in_prompt:
            # Put back the tag the template wrote, so that one set of rules covers both cases.
            text = f"<{self.think_tag}>{text}"
        broken = self._first_broken_rule(text)
        details: dict[str, Any] = {
            "failed_rule": None if broken is None else broken[0],
            "think_opened_in_prompt": self.think_opened_in_prompt,
        }
        if broken is not None:
            return Score(0.0, reason=broken[1], details=details)
        return Score(1.0, details=details)

    def _first_broken_rule(self, text: str) -> tuple[str, str] | None:
        think_open, think_close = f"<{self.think_tag}>", f"</{self.think_tag}>"
        answer_open, answer_close = f"<{self.answer_tag}>", f"</{self.answer_tag}>"

        opens, closes = text.count(think_open), text.count(think_close)
        if opens != 1 or closes != 1:
            return (
                "one_think_block",
                f"expected one {think_open}...{think_close} block, found {opens} {think_open} "
                f"and {closes} {think_close}",
            )
        think_start, think_end = text.index(think_open), text.index(think_close)
        if think_end < think_start:
            return "think_order", f"{think_close} comes before {think_open}"
        after_think = think_end + len(think_close)

        opens, closes = text.count(answer_open), text.count(answer_close)
        uses_answer_block = self.require_answer_tag or opens > 0 or closes > 0
        if uses_answer_block:
            if opens != 1 or closes != 1:
                return (
                    "one_answer_block",
                    f"expected one {answer_open}...{answer_close} block, found {opens} {answer_open} "
                    f"and {closes} {answer_close}",
                )
            answer_start, answer_end = text.index(answer_open), text.index(answer_close)
            if answer_end < answer_start:
                return "answer_order", f"{answer_close} comes before {answer_open}"
            if answer_start < after_think:
                return "answer_after_think", f"the answer block does not follow the {think_open} block"
            answer = text[answer_start + len(answer_open) : answer_end]
        else:
            answer = text[after_think:]

        if not self.allow_text_outside:
            if text[:think_start].strip():
                return "text_before_think", f"text before {think_open}"
            if uses_answer_block:
                if text[after_think:answer_start].strip():
                    return "text_between_blocks", f"text between {think_close} and {answer_open}"
                if text[answer_end + len(answer_close) :].strip():
                    return "text_after_answer", f"text after {answer_close}"
        if not answer.strip():
            return "empty_answer", "the answer is empty"
        return None


def _refuse_region_markers(pattern: str, region: AnswerRegion) -> None:
    """A pattern that names the markers the answer region removes could never match: say so now
    rather than score every completion 0."""
    if region.whole:
        return
    named = [m for pair in (*region.reasoning, *region.answers) for m in pair if m in pattern]
    if named:
        raise ValueError(
            f"the pattern names {named[0]!r}, which the answer region removes before matching; "
            "set answer_region: whole to match the format of the whole completion"
        )


_REGEX_FLAGS = {
    "IGNORECASE": re.IGNORECASE,
    "DOTALL": re.DOTALL,
    "MULTILINE": re.MULTILINE,
    "VERBOSE": re.VERBOSE,
    "ASCII": re.ASCII,
}
RegexFlag = Literal["IGNORECASE", "DOTALL", "MULTILINE", "VERBOSE", "ASCII"]
# Matched text is copied into details for inspection; a fullmatch of a long completion would
# otherwise copy the whole completion into every output row.
_DETAIL_CHARS = 1000


def _clipped(text: str | None) -> str | None:
    return clipped(text, _DETAIL_CHARS)


def _compiled(pattern: str, flags: Sequence[str] | str) -> re.Pattern[str]:
    combined = re.NOFLAG
    for flag in [flags] if isinstance(flags, str) else flags:
        combined |= _REGEX_FLAGS[flag]
    try:
        return re.compile(pattern, combined)
    except re.error as error:
        raise ValueError(f"invalid regular expression {pattern!r}: {error}") from None


class RegexMatchOptions(RuleOptions):
    """Options of `RegexMatchReward`."""

    pattern: str
    """The regular expression (Python ``re`` syntax); one that does not compile is a config
    error, not a failure of every sample."""
    mode: Literal["search", "fullmatch"] = "search"
    """``search``: the pattern matches anywhere. ``fullmatch``: it must match the whole answer
    region, the right choice for a format that allows nothing else."""
    flags: list[RegexFlag] | RegexFlag = ()  # type: ignore[assignment]
    """Names of ``re`` flags: ``IGNORECASE``, ``DOTALL``, ``MULTILINE``, ``VERBOSE``, ``ASCII``."""
    max_chars: int = Field(default=200_000, gt=0)
    """Answer regions longer than this are not matched and score 0.0 (the model wrote them; a
    failure status would drop them from training): a pattern with nested quantifiers can take
    exponential time, and a runaway rollout should not stall the batch (``sample_budget_s``
    bounds the rest)."""

    @field_validator("flags", mode="before")
    @classmethod
    def _upper_case(cls, flags: Any) -> Any:
        if isinstance(flags, str):
            return flags.upper()
        if isinstance(flags, Sequence):
            return [flag.upper() if isinstance(flag, str) else flag for flag in flags]
        return flags

    @model_validator(mode="after")
    def _usable(self) -> RegexMatchOptions:
        try:
            _compiled(self.pattern, self.flags)
            _refuse_region_markers(self.pattern, AnswerRegion.from_option(self.answer_region))
        except ValueError as error:
            raise OptionError("pattern", str(error)) from None
        return self


@takes_options(RegexMatchOptions)
class RegexMatchReward(RuleReward):
    """1.0 when a regular expression matches the completion, else 0.0.

    Options: `RegexMatchOptions` (the pattern, ``search`` or ``fullmatch``, flags, a length
    bound), and where the answer is read and how checks run (`RuleOptions`).

    The pattern is matched against the answer region: set ``answer_region: whole`` for a pattern
    that checks the format of the whole completion, reasoning tags included. An answer block is
    read in its place: the words around it can negate or take it back, as around a box.

    ``details`` holds the match span, the matched text and the groups (each clipped to 1,000
    characters).

    Example:
        >>> from rewardlab import Sample
        >>> reward = RegexMatchReward(r"Answer: (\\d+)", flags=["IGNORECASE"])
        >>> score = reward.score([Sample(completion="so the answer: 42")])[0]
        >>> score.value, score.details["groups"]
        (1.0, ['42'])
    """

    name = "regex_match"

    def __init__(
        self,
        pattern: str,
        *,
        mode: Literal["search", "fullmatch"] = "search",
        flags: Sequence[RegexFlag] | RegexFlag = (),
        max_chars: int = 200_000,
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)
        self.regex = _compiled(pattern, flags)
        self.pattern = pattern
        self.mode = mode
        self.flags = [flags] if isinstance(flags, str) else list(flags)
        self.max_chars = max_chars
        if name is not None:
            self.name = name

    def check(self, sample: Sample) -> Score:
        region = self.answer(sample)
        details: dict[str, Any] = {"pattern": self.pattern, "mode": self.mode, "answer_region": region.source}
        if region.text is None:
            return Score(0.0, reason=region.reason, details=details)
        text = region.text
        if len(text) > self.max_chars:
            # The model wrote it: a 0 it earns, not a failure that drops the sample from training.
            reason = (
                f"the answer region is {len(text)} characters, over max_chars={self.max_chars}; not matched, "
                "to bound the time a backtracking pattern can take"
            )
            return Score(0.0, reason=reason, details=details)
        if not _block_stands(region):
            reason = "the words around the answer block negate, hedge or take it back"
            return Score(0.0, reason=reason, details=details)
        match = self.regex.search(text) if self.mode == "search" else self.regex.fullmatch(text)
        if match is None:
            return Score(0.0, reason=f"no {self.mode} match for {self.pattern!r}", details=details)
        details.update(
            span=list(match.span()),
            match=_clipped(match.group(0)),
            groups=[_clipped(group) for group in match.groups()],
            named_groups={key: _clipped(group) for key, group in match.groupdict().items()},
        )
        return Score(1.0, details=details)


def boxed_answer(text: str) -> str | None:
    r"""The one answer the completion's boxes state (``\boxed{...}``), read as `math_answer` reads
    them: None when there is no box, when boxes state different answers, when a box is negated,
    doubted, struck out or taken back ("it is not \boxed{Paris}", "\boxed{Paris} or Lyon"), or
    when the completion states another answer in words ("\boxed{Paris}. The answer is London.")."""
    extraction = extract_answer(text, word_values=True)
    boxed = [statement for statement in extraction.statements if statement.method == "boxed"]
    if not boxed or len({normalize_answer(s.answer) for s in extraction.statements}) != 1:
        return None
    if offers_another(reader_text(text)[boxed[-1].end :]):
        return None  # "\boxed{Paris}\n\nThough London is equally likely."
    # A box read with words that doubt it, or with other boxes, states more than its content.
    answer = boxed[-1].answer
    if answer not in {box.content for box in boxes(reader_text(text))}:
        return None
    # "\boxed{\text{Paris}}" is how models box a word: the text inside the command is the answer.
    return _TEXT_COMMAND.sub(r"\1", answer).strip()


def _block_answer(region: Region) -> str | None:
    """The answer block's content, read in its place (`_block_stands`); None without a block."""
    if region.source != "answer_block" or region.text is None:
        return None
    return region.text if _block_stands(region) else None


def _block_stands(region: Region) -> bool:
    """Whether an answer block's content stands as the answer when read in its place as
    `math_answer` reads a box: not when the words around it negate, hedge or take it back ("Not
    <answer>Paris</answer>", "<answer>Paris</answer> or London"). A region that is no answer
    block, or a block too long to be one answer, stands as it is."""
    if region.source != "answer_block" or region.text is None or not region.parts:
        return True
    if not bare_answer(region.text):
        return True
    framed = region.framed(lambda block: f"\\boxed{{{block.strip()}}}")
    return framed is not None and boxed_answer(framed) == region.text.strip()


def last_line(text: str) -> str | None:
    """The last line that is not blank, stripped; None for a blank text."""
    stripped = text.rstrip()
    return stripped[stripped.rfind("\n") + 1 :].strip() or None


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TEXT_COMMAND = re.compile(
    r"\\(?:text|textbf|textrm|textit|textsf|mathrm|mathbf|mathit|mathsf|mbox)\s*\{([^{}]*)\}"
)


def _strip_surrounding_punctuation(text: str) -> str:
    # Unicode category P* covers ASCII punctuation, curly quotes, guillemets and brackets alike. A
    # question mark at the end stays, in any script: "Paris?" asks, it does not answer.
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start]).startswith("P")):
        start += 1
    while end > start and (text[end - 1].isspace() or _surrounding(text[end - 1])):
        end -= 1
    return text[start:end]


def _surrounding(char: str) -> bool:
    return unicodedata.category(char).startswith("P") and not _asks(char)


def _asks(char: str) -> bool:
    """A question mark in any script ("?", "？", "‽", "؟", "⸮"): kept, since "Paris?" asks."""
    name = unicodedata.name(char, "")
    return "QUESTION" in name or "INTERROBANG" in name


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation: lowercase, strip surrounding punctuation and quotes, drop the
    articles a/an/the, collapse whitespace.

    Unlike SQuAD, punctuation inside the answer is kept ("3.14" stays distinct from "314"), as is
    a final question mark ("Paris?" is a question); articles are kept when they are all there is
    ("A" as a multiple-choice letter would otherwise normalise to "" and match any other empty
    answer); characters no reader sees (zero-width spaces) are dropped, and compatibility forms
    are folded (NFKC: full-width "Ｐａｒｉｓ" is "Paris").
    """
    text = _strip_surrounding_punctuation(unicodedata.normalize("NFKC", without_invisible(text)).lower())
    without_articles = _ARTICLES.sub(" ", text)
    if without_articles.strip():
        text = without_articles
    return " ".join(text.split())


class StringMatchOptions(RuleOptions):
    """Options of `StringMatchReward`."""

    extract: Literal["answer_tag", "last_line", "boxed"] | None = None
    """Where the answer is. None: the whole answer region. ``answer_tag``: the
    ``<answer>...</answer>`` block (tag name from ``answer_tag``), required. ``last_line``: the
    last non-blank line. ``boxed``: the answer the boxes state, read as ``math_answer`` reads them
    (a negated box, or boxes that disagree, state none). A completion without the expected
    answer scores 0.0 (the model did not answer), with the reason."""
    normalize: bool = True
    """Compare after `normalize_answer`: lowercase, strip, collapse whitespace, strip surrounding
    punctuation and quotes, drop articles. False compares the exact strings."""
    references_field: str | None = None
    """Also accept any of several gold answers listed in ``sample.fields[references_field]``
    (e.g. the aliases of a TriviaQA answer). The field is then required; ``sample.reference``,
    when set, is accepted too."""
    answer_tag: TagName = "answer"
    """Tag name for ``extract: answer_tag``."""


@takes_options(StringMatchOptions)
class StringMatchReward(RuleReward):
    """1.0 when the completion (or the answer extracted from it) equals a reference, else 0.0.

    Options: `StringMatchOptions` (where the answer is, how strings compare, where the accepted
    answers are), and where the answer is read and how checks run (`RuleOptions`).

    A sample without any reference has status ``invalid_input``.

    Example:
        >>> from rewardlab import Sample
        >>> reward = StringMatchReward(extract="answer_tag")
        >>> sample = Sample(completion="<answer> The Eiffel Tower. </answer>", reference="eiffel tower")
        >>> reward.score([sample])[0].value
        1.0
    """

    name = "string_match"

    def __init__(
        self,
        *,
        extract: Literal["answer_tag", "last_line", "boxed"] | None = None,
        normalize: bool = True,
        references_field: str | None = None,
        answer_tag: str = "answer",
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        self.extract = extract
        self.normalize = normalize
        self.references_field = references_field
        self.answer_tag = answer_tag
        if name is not None:
            self.name = name
        if extract == "answer_tag" and answer_region is None:
            # The answer block is the region: the answer is read from the tag asked for.
            answer_region = {"answer_tags": [answer_tag]}
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)

    def check(self, sample: Sample) -> Score:
        references = reference_answers(
            sample, self.references_field, reward="string_match", noun="gold answer"
        )
        region = self.answer(sample)
        answer = None if region.text is None else self._answer(region)
        details: dict[str, Any] = {
            "extracted": answer,
            "references": references,
            "answer_region": region.source,
        }
        if answer is None:
            reason = region.reason or f"no answer found (extract={self.extract!r})"
            if region.text is not None and region.source == "answer_block" and self.extract == "answer_tag":
                reason = "the words around the answer block negate, hedge or take it back"
            return Score(0.0, reason=reason, details=details)
        prepare = normalize_answer if self.normalize else (lambda text: text)
        candidate = prepare(answer)
        matched = next((ref for ref in references if prepare(ref) == candidate), None)
        details.update(compared=candidate, matched_reference=matched)
        if matched is None:
            return Score(
                0.0, reason=f"{answer!r} matches none of {len(references)} reference(s)", details=details
            )
        return Score(1.0, details=details)

    def _answer(self, region: Region) -> str | None:
        text = region.text
        assert text is not None
        if self.extract is None:
            return text
        if self.extract == "answer_tag":
            return _block_answer(region)
        if self.extract == "boxed":
            return boxed_answer(text)
        return last_line(text)
