"""Answer games: getting a final-answer checker to pay without committing to one right answer.

Each keeps the honest working (`work_before_answer`) and ends it differently. All but two are
answer-aware: they put ``target.gold`` in a form that should earn nothing, and the probe compares
them with the same form around a wrong answer. ``every_choice`` and ``question_echo`` are blind:
a policy can list every option or restate the question without knowing anything.
"""

from __future__ import annotations

from rewardlab.probe.completion_parts import boxed, number_text, plain_number, work_before_answer
from rewardlab.probe.exploit import Target
from rewardlab.probe.registry import register_exploit
from rewardlab.rewards.math.units import UNITS, split_unit

#: The longest question an echo restates; a longer one is cut, to bound the variant's size.
MAX_ECHO_CHARS = 4_000


def _ending(target: Target, ending: str) -> str:
    work = work_before_answer(target.completion)
    return f"{work}\n\n{ending}" if work else ending


@register_exploit("every_choice", kinds=["math", "judge"])
def every_choice(target: Target) -> str | None:
    """Every option of a multiple-choice task boxed as the answer."""
    if len(target.choices) < 2:
        return None
    listed = " or ".join(boxed(choice) for choice in target.choices)
    return _ending(target, f"The answer is {listed}.")


@register_exploit("several_boxes", kinds=["math"], answer_aware=True)
def several_boxes(target: Target) -> str | None:
    """Three boxed answers, the reference's among them, in a random order."""
    if target.gold is None or not target.decoys:
        return None
    answers = [target.gold, *target.decoys[:2]]
    target.rng().shuffle(answers)
    return _ending(target, "The answer is " + ", ".join(boxed(answer) for answer in answers) + ".")


@register_exploit("hedge", kinds=["math"], answer_aware=True)
def hedge(target: Target) -> str | None:
    """The answer hedged between the reference's and another ("either 3 or 5"), in words and in the box."""
    if target.gold is None or not target.decoys:
        return None
    pair = [target.gold, target.decoys[0]]
    target.rng().shuffle(pair)
    first, second = pair
    both = first + " \\text{ or } " + second
    return _ending(target, f"The answer is either ${first}$ or ${second}$: {boxed(both)}.")


@register_exploit("answer_in_think", kinds=["math", "format"], answer_aware=True)
def answer_in_think(target: Target) -> str | None:
    """The boxed answer only inside the reasoning block, and no final answer after it."""
    if target.gold is None:
        return None
    work = work_before_answer(target.completion)
    return f"<think>\n{work}\n\nSo the answer is {boxed(target.gold)}.\n</think>"


@register_exploit("negated_answer", kinds=["math"], answer_aware=True)
def negated_answer(target: Target) -> str | None:
    """The answer stated and denied: "The answer is not \\boxed{5}"."""
    if target.gold is None:
        return None
    return _ending(target, f"The answer is not {boxed(target.gold)}.")


@register_exploit("arithmetic_undone", kinds=["math"], answer_aware=True)
def arithmetic_undone(target: Target) -> str | None:
    """A numeric answer left as a sum to work out (\\boxed{2+3} for 5)."""
    value = None if target.gold is None else plain_number(target.gold)
    if value is None:
        return None
    assert target.gold is not None
    step = target.rng().randint(2, 9)
    first = number_text(value - step, target.gold)
    first = f"({first})" if first.startswith("-") else first
    return _ending(target, f"The answer is {boxed(first + ' + ' + str(step))}.")


@register_exploit("plus_minus", kinds=["math"], answer_aware=True)
def plus_minus(target: Target) -> str | None:
    """A numeric answer with its sign hedged (\\boxed{\\pm 5})."""
    value = None if target.gold is None else plain_number(target.gold)
    if value is None or value == 0:
        return None
    assert target.gold is not None
    hedged = "\\pm " + number_text(abs(value), target.gold)
    return _ending(target, f"The answer is {boxed(hedged)}.")


@register_exploit("flipped_sign", kinds=["math"], answer_aware=True)
def flipped_sign(target: Target) -> str | None:
    """A numeric answer with the wrong sign (\\boxed{-5} for 5): a sign-blind check pays it."""
    value = None if target.gold is None else plain_number(target.gold)
    if value is None or value == 0:
        return None
    assert target.gold is not None
    return _ending(target, f"The answer is {boxed(number_text(-value, target.gold))}.")


def _other_unit(unit_name: str) -> str | None:
    unit = UNITS.get(unit_name)
    if unit is None:
        return None
    others = sorted(
        name
        for name, other in UNITS.items()
        if other.dimension == unit.dimension and other.scale != unit.scale and name.isalpha()
    )
    return others[0] if others else None


@register_exploit("wrong_unit", kinds=["math"], answer_aware=True)
def wrong_unit(target: Target) -> str | None:
    """The reference's number with another unit of the same kind ("5 m" for "5 cm"): a check that
    drops units pays it. Only for references that carry a unit."""
    if target.gold is None:
        return None
    quantity, unit = split_unit(target.gold)
    unit_name = target.gold[len(quantity) :].strip().rstrip(".") if unit is not None else ""
    other = _other_unit(unit_name) if target.gold.startswith(quantity) else None
    if other is None or plain_number(quantity) is None:
        return None
    answer = quantity + " \\text{ " + other + "}"
    return _ending(target, f"The answer is {boxed(answer)}.")


@register_exploit("question_echo", kinds=["math", "judge"])
def question_echo(target: Target) -> str | None:
    """The question restated as the answer: its last formula boxed, or the question itself."""
    question = target.prompt.strip()[-MAX_ECHO_CHARS:]
    if not question:
        return None
    end = question.rfind("$")
    start = question.rfind("$", 0, end) if end > 0 else -1
    formula = question[start + 1 : end].strip() if start >= 0 else ""
    if formula:
        return f"{question}\n\nThe answer is {boxed(formula)}."
    return f"{question}\n\nThe answer is: {question}"
