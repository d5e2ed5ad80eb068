"""The answer region: the part of a completion that a rule reward reads as the model's answer.

Why: reasoning is the model's scratch space, and a grader that reads it pays for what the model
did not answer. Under RL a policy learns exactly that: ``<think>so \\boxed{2}</think><answer>The
answer is 3</answer>`` was paid as the answer 2. So every rule reward (``math_answer``,
``string_match``, ``regex_match``, ``json_schema``, ``instruction_following``,
``code_execution``) reads one region, found by the same rules:

1. **Harmony** (gpt-oss): when the text starts in Harmony form (a ``<|channel|>`` or
   ``<|start|>`` marker), the answer is what the ``final`` channel says (all its messages: two
   that differ are two answers); the ``analysis`` and ``commentary`` channels are not the answer,
   and a text without a final message has none. A marker further into an ordinary text is text.
2. **Reasoning blocks are removed**: ``<think>...</think>``, ``<thinking>``, ``<reasoning>``,
   ``<|begin_of_thought|>...<|end_of_thought|>``, ``[THINK]...[/THINK]`` and ``◁think▷...◁/think▷``
   by default. A closing marker without an opening one closes reasoning that the chat template
   opened in the prompt (DeepSeek-R1, Qwen3): everything before it is reasoning (set
   ``prompt_opens_reasoning: false`` for a template that never does, so that a policy cannot hide
   text behind a stray ``</think>``). A block that opens and never closes (a rollout cut off while
   thinking) leaves **no answer**.
3. **Answer blocks**: when ``<answer>...</answer>`` (or ``<|begin_of_solution|>...``) remains, the
   answer is its content; the text around it is kept apart (`Region.around`), for the rewards
   that must also read what is said outside the block (``math_answer`` does: an answer stated
   there must agree). Several blocks that say different things are no single answer; a block
   that never closes is no answer; a closing marker without an opening one closes a block the
   prompt opened, so the answer is the text before it - unless text follows it, when there is
   no block at all.

Markers inside fenced code blocks are code, not structure: a ```` ```<answer>10</answer>``` ````
shown as an example changes nothing.

``answer_region: whole`` reads the whole completion instead (a format check that looks at the
tags themselves wants that; ``think_answer_format`` always does).

Markers are found with `str.find` and matched exactly (case included), so the cost is linear in
the text whatever it holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.rewards.fences import fenced_spans, inside

Markers = tuple[tuple[str, str], ...]

DEFAULT_REASONING: Markers = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("[THINK]", "[/THINK]"),
    ("◁think▷", "◁/think▷"),
)
DEFAULT_ANSWER: Markers = (("<answer>", "</answer>"), ("<|begin_of_solution|>", "<|end_of_solution|>"))
_HARMONY_STARTS = ("<|channel|>", "<|start|>")
_HARMONY_FINAL = "<|channel|>final"
_HARMONY_MESSAGE = "<|message|>"
_HARMONY_ENDS = ("<|end|>", "<|return|>", "<|call|>", "<|start|>")


@dataclass(frozen=True, slots=True)
class Region:
    """What a completion answers: ``text`` is None when it holds no answer, and ``reason`` says why.

    ``source`` names where the text came from: ``"whole"``, ``"outside_reasoning"``,
    ``"answer_block"`` or ``"harmony_final"``. ``around`` is the text outside the answer block
    (and outside reasoning), when the answer came from one.
    """

    text: str | None
    source: str
    reason: str | None = None
    around: str = ""
    #: For an answer block: the text outside reasoning split at the block markers, alternating
    #: outside and inside (``[before, block, between, block, after]``), so that a reward can read
    #: the block in its place (`framed`).
    parts: tuple[str, ...] = ()

    def framed(self, block: Callable[[str], str]) -> str | None:
        """The text outside reasoning with each answer block replaced by ``block(content)``: the
        block read in its sentence ("It is not <answer>10</answer>"). None without a block."""
        if not self.parts:
            return None
        return "".join(block(part) if index % 2 else part for index, part in enumerate(self.parts))


@dataclass(frozen=True, slots=True)
class _Marker:
    position: int
    end: int
    pair: int
    opening: bool


def _markers(text: str, pairs: Markers) -> list[_Marker]:
    """Every opening and closing marker of ``pairs`` in ``text`` outside fenced code, in order."""
    found = []
    code = None
    for index, (opening, closing) in enumerate(pairs):
        for marker, is_opening in ((opening, True), (closing, False)):
            start = text.find(marker)
            while start != -1:
                code = fenced_spans(text) if code is None else code
                if not inside(code, start):
                    found.append(_Marker(start, start + len(marker), index, is_opening))
                start = text.find(marker, start + len(marker))
    # A closing marker that contains an opening one ("</think>" holds no "<think>") never
    # collides; for equal positions the longer marker wins.
    found.sort(key=lambda marker: (marker.position, marker.position - marker.end))
    return found


@dataclass(slots=True)
class _Blocks:
    """A text split by one kind of block: what is outside, what is inside, why there is no
    answer (a block never closes), and whether a stray closer was followed by text."""

    outside: list[str]
    inside: list[str]
    reason: str | None = None
    stray_then_text: bool = False


def _outside_blocks(text: str, pairs: Markers, *, stray_closes_prompt_block: bool = True) -> _Blocks:
    """Split ``text`` by the blocks ``pairs`` mark.

    A closing marker with no block open closes a block the prompt opened: everything before it
    was inside (``stray_closes_prompt_block=False`` reads such a marker as plain text). A block
    still open at the end leaves no answer.
    """
    outside: list[str] = []
    blocks: list[str] = []
    open_pair: _Marker | None = None
    cursor = 0
    stray_at = -1
    for marker in _markers(text, pairs):
        if marker.position < cursor:
            continue  # overlaps a marker already taken
        if open_pair is None:
            if marker.opening:
                outside.append(text[cursor : marker.position])
                open_pair = marker
            elif stray_closes_prompt_block:
                # A block opened before this point (in the prompt, or by an earlier stray
                # marker): what came since the last marker was inside it.
                outside = []
                blocks.append(text[cursor : marker.position])
                stray_at = marker.end
            else:
                continue
            cursor = marker.end
        elif not marker.opening and marker.pair == open_pair.pair:
            blocks.append(text[cursor : marker.position])
            open_pair = None
            cursor = marker.end
    if open_pair is not None:
        opening = pairs[open_pair.pair][0]
        return _Blocks(outside, blocks, f"{opening} opens at character {open_pair.position} and never closes")
    outside.append(text[cursor:])
    stray_then_text = stray_at != -1 and bool(text[stray_at:].strip())
    return _Blocks(outside, blocks, stray_then_text=stray_then_text)


def _harmony_final(text: str) -> Region | None:
    """The final-channel messages of a Harmony text, joined (a reader sees each of them; two that
    differ are two answers); None when the text is not Harmony."""
    if not text.lstrip().startswith(_HARMONY_STARTS):
        return None
    messages = []
    start = text.find(_HARMONY_FINAL)
    while start != -1:
        message = text.find(_HARMONY_MESSAGE, start)
        if message == -1:
            break
        body_start = message + len(_HARMONY_MESSAGE)
        ends = [end for end in (text.find(marker, body_start) for marker in _HARMONY_ENDS) if end != -1]
        body_end = min(ends, default=len(text))
        messages.append(text[body_start:body_end])
        start = text.find(_HARMONY_FINAL, body_end)
    if not messages:
        return Region(None, "harmony_final", "a Harmony text without a final-channel message")
    return Region(_joined(messages), "harmony_final")


@functools.lru_cache(maxsize=64)
def _by_first_character(markers: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    grouped: dict[str, list[str]] = {}
    for marker in markers:
        grouped.setdefault(marker[0], []).append(marker)
    return tuple((first, tuple(group)) for first, group in grouped.items())


def _holds_any(text: str, markers: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``markers``. Most completions hold none, and few hold a
    marker's first character ("<"), so that character is looked for first: a dozen substring
    searches of a long completion cost more than reading the rest of its answer region."""
    for first, group in _by_first_character(markers):
        if first in text and any(marker in text for marker in group):
            return True
    return False


def _joined(parts: Sequence[str]) -> str:
    return "\n\n".join(part.strip() for part in parts if part.strip())


@dataclass(frozen=True, slots=True)
class AnswerRegion:
    """How to find the answer region (see the module docstring).

    Attributes:
        reasoning: (opening, closing) markers of reasoning blocks, removed.
        answers: (opening, closing) markers of answer blocks; when present, only their content counts.
        harmony: Read Harmony channel markers (default True).
        prompt_opens_reasoning: A closing reasoning marker without an opening one ends reasoning
            the prompt opened (default True); False reads it as text.
        whole: Read the whole completion, ignoring every marker (default False).
    """

    reasoning: Markers = DEFAULT_REASONING
    answers: Markers = DEFAULT_ANSWER
    harmony: bool = True
    prompt_opens_reasoning: bool = True
    whole: bool = False

    @classmethod
    def from_option(cls, value: Any) -> AnswerRegion:
        """From a reward option: ``None`` or ``"default"``, ``"whole"``, an `AnswerRegion`, or a
        mapping with any of ``reasoning_tags`` (names: ``[think]`` means ``<think>...</think>``),
        ``reasoning_markers`` (``[[opening, closing], ...]``), ``answer_tags``, ``answer_markers``,
        ``harmony`` and ``prompt_opens_reasoning``. Tags and markers given replace the defaults
        of their kind."""
        if isinstance(value, AnswerRegion):
            return value
        if value is None or value == "default":
            return cls()
        if value == "whole":
            return cls(whole=True)
        if not isinstance(value, Mapping):
            raise ValueError(f"answer_region must be 'default', 'whole' or a mapping, got {value!r}")
        known = {
            "reasoning_tags", "reasoning_markers", "answer_tags", "answer_markers", "harmony",
            "prompt_opens_reasoning",
        }  # fmt: skip
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"answer_region: unknown keys {sorted(unknown)}; accepted: {sorted(known)}")
        reasoning = _pairs(value, "reasoning", DEFAULT_REASONING)
        answers = _pairs(value, "answer", DEFAULT_ANSWER)
        flags = {key: value.get(key, True) for key in ("harmony", "prompt_opens_reasoning")}
        for key, flag in flags.items():
            if not isinstance(flag, bool):
                raise ValueError(f"answer_region.{key} must be true or false, got {flag!r}")
        return cls(reasoning=reasoning, answers=answers, **flags)

    def read(self, text: str) -> Region:
        """The answer region of a completion's text."""
        if self.whole:
            return Region(text, "whole")
        if not _holds_any(text, self._all_markers()):
            return Region(_joined([text]), "outside_reasoning")  # what `_read_blocks` gives
        return self._read_blocks(text)

    def _read_blocks(self, text: str) -> Region:
        if self.harmony and (final := _harmony_final(text)) is not None:
            if final.text is None:
                return final
            # Harmony's reasoning is its analysis channel: a stray "</think>" in a final message
            # is text, and hides nothing before it.
            region = self._without_reasoning(final.text, stray_closes=False)
            return Region(region.text, "harmony_final", region.reason) if region.text is not None else region
        return self._without_reasoning(text)

    def _all_markers(self) -> tuple[str, ...]:
        pairs = (*self.reasoning, *self.answers)
        return (*(marker for pair in pairs for marker in pair), *(_HARMONY_STARTS if self.harmony else ()))

    def _without_reasoning(self, text: str, *, stray_closes: bool = True) -> Region:
        reasoning = _outside_blocks(
            text, self.reasoning, stray_closes_prompt_block=self.prompt_opens_reasoning and stray_closes
        )
        if reasoning.reason is not None:
            return Region(None, "outside_reasoning", f"no answer: {reasoning.reason}")
        remaining = _joined(reasoning.outside)
        if not self.answers or not any(o in remaining or c in remaining for o, c in self.answers):
            return Region(remaining, "outside_reasoning")
        answer = _outside_blocks(remaining, self.answers)
        if answer.reason is not None:
            return Region(None, "answer_block", f"no answer: {answer.reason}")
        if answer.stray_then_text or not answer.inside:
            # "5</answer> Actually it is 7": no block the prompt opened; read it all.
            return Region(remaining, "outside_reasoning")
        distinct = list(dict.fromkeys(block.strip() for block in answer.inside if block.strip()))
        if len(distinct) > 1:
            return Region(None, "answer_block", f"no single answer: {len(distinct)} different answer blocks")
        parts: tuple[str, ...] = ()
        if len(answer.outside) == len(answer.inside) + 1:
            pairs = zip(answer.outside, answer.inside, strict=False)
            parts = (*(piece for pair in pairs for piece in pair), answer.outside[-1])
        text = distinct[0] if distinct else ""
        return Region(text, "answer_block", around=_joined(answer.outside), parts=parts)


def _pairs(value: Mapping[str, Any], kind: str, default: Markers) -> Markers:
    tags, markers = value.get(f"{kind}_tags"), value.get(f"{kind}_markers")
    if tags is None and markers is None:
        return default
    pairs: list[tuple[str, str]] = []
    for tag in tags or ():
        if not isinstance(tag, str) or not tag or any(c in tag for c in "<>/ "):
            raise ValueError(f"answer_region.{kind}_tags: a bare tag name such as 'think', got {tag!r}")
        pairs.append((f"<{tag}>", f"</{tag}>"))
    for pair in markers or ():
        if (
            not isinstance(pair, Sequence)
            or isinstance(pair, str)
            or len(pair) != 2
            or not all(isinstance(m, str) and m for m in pair)
            or pair[0] == pair[1]
        ):
            raise ValueError(
                f"answer_region.{kind}_markers: [opening, closing] pairs of different strings, got {pair!r}"
            )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


DEFAULT_REGION = AnswerRegion()
