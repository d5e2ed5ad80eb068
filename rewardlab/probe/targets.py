"""What the probe knows about a row's task, for the exploits: the answer, wrong answers, the
options of a multiple-choice task, the rubric.

**Decoys** are the wrong answers an answer-aware exploit's control uses in place of the
reference's. A decoy has the reference's shape, so that the control differs from the variant only
in being wrong: a reference that starts with a number gets that number moved up by a few
("7" -> "10", "5 cm" -> "8 cm", "1\\frac{1}{10}" -> "4\\frac{1}{10}"); any other gets the answers
of other rows of the probed data (they are other questions' answers, so wrong here). A decoy
that happens to be right only hides a win (the control would win too); it never makes one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction

from rewardlab.errors import RubricError
from rewardlab.probe.completion_parts import MAX_NUMBER_DIGITS, number_text
from rewardlab.probe.kinds import scoring_rewards
from rewardlab.rewards.contract import Reward, Sample
from rewardlab.rewards.math.extract import reference_answer
from rewardlab.rubrics.model import Criterion, Rubric

#: Decoys per row: one for the control, two to stand beside the answer (several boxes, a hedge).
DECOYS = 3
#: The longest reference read for its answer (longer ones are whole programs or essays).
MAX_REFERENCE_CHARS = 20_000
_LEADING_NUMBER = re.compile(rf"(-?\d{{1,{MAX_NUMBER_DIGITS}}}(?:\.\d{{1,{MAX_NUMBER_DIGITS}}})?)(?![\d.])")
_CHOICE_IN_TEXT = re.compile(r"\(([A-J])\)|^[ \t]*([A-J])[.):][ \t]", re.MULTILINE)
_CHOICE_FIELDS = ("choices", "options")
_LETTERS = "ABCDEFGHIJ"


def gold_answer(sample: Sample) -> str | None:
    """The reference's answer (a whole solution's boxed or stated answer), or None."""
    if sample.reference is None or len(str(sample.reference)) > MAX_REFERENCE_CHARS:
        return None
    return reference_answer(str(sample.reference))


def _moved_number(gold: str, offset: int) -> str | None:
    match = _LEADING_NUMBER.match(gold.strip())
    if match is None:
        return None
    number = match.group(1)
    value = Fraction(number) + offset
    return number_text(value, number) + gold.strip()[match.end() :]


def decoys_for(gold: str, pool: Sequence[str], rng: random.Random) -> tuple[str, ...]:
    """Up to `DECOYS` wrong answers shaped like ``gold`` (see the module docstring); ``pool`` holds
    the answers of the probed rows."""
    offsets = rng.sample(range(1, 10), DECOYS)
    moved = [_moved_number(gold, offset) for offset in offsets]
    if all(moved):
        return tuple(decoy for decoy in moved if decoy is not None)
    own = "".join(gold.split())
    others = sorted({answer for answer in pool if "".join(answer.split()) != own})
    return tuple(rng.sample(others, min(DECOYS, len(others))))


def choices_of(sample: Sample) -> tuple[str, ...]:
    """The option letters of a multiple-choice task: from a ``choices`` or ``options`` field (a
    list, or a mapping keyed by letter), else from "(A)" or "A." options in the prompt; the
    letters run from A without a gap. Empty when the task has no options."""
    letters: set[str] = set()
    for name in _CHOICE_FIELDS:
        listed = sample.fields.get(name)
        if isinstance(listed, dict):
            letters = {str(key).strip().upper() for key in listed}
        elif isinstance(listed, list):
            letters = set(_LETTERS[: len(listed)])
        if letters:
            break
    if not letters:
        letters = {a or b for a, b in _CHOICE_IN_TEXT.findall(sample.prompt_text)}
    run = ""
    for letter in _LETTERS:
        if letter not in letters:
            break
        run += letter
    return tuple(run) if len(run) >= 2 else ()


def _rubrics(reward: Reward, sample: Sample) -> Iterable[object]:
    for leaf in scoring_rewards(reward, sample):
        field = getattr(leaf, "rubric_field", None)
        if isinstance(field, str) and sample.fields.get(field) is not None:
            yield sample.fields[field]
        elif isinstance(getattr(leaf, "rubric", None), Rubric):
            yield leaf.rubric  # type: ignore[attr-defined]
    if sample.fields.get("rubric") is not None:
        yield sample.fields["rubric"]


def criteria_of(reward: Reward, sample: Sample) -> tuple[Criterion, ...]:
    """The rubric criteria ``sample`` is graded against, as far as the probe can see: the rubric
    field of a rubric reward that scores it, that reward's configured rubric, or a ``rubric``
    field. Empty when there is none (or it does not parse: the reward reports that itself)."""
    for data in _rubrics(reward, sample):
        if isinstance(data, Rubric):
            return data.criteria
        try:
            return Rubric.from_data(data).criteria
        except RubricError:
            continue
    return ()
