"""Rubrics written by a model: from a hidden reference response (Rubrics-as-Rewards, ExpRL) or
from the task alone.

The judge writes criteria with categories (essential / important / optional / pitfall); weights
come from the categories (`CATEGORY_WEIGHTS`), and every criterion records its provenance.
A rubric that does not parse, or has too few usable criteria, is a failure with the judge's
answer kept - never an empty rubric that scores everything the same.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from rewardlab.errors import RubricError, VerdictError
from rewardlab.judges.judge import Judge, ListJudgement
from rewardlab.judges.verdicts import json_objects
from rewardlab.llm.fence import Fence, blank_fenced
from rewardlab.rubrics.model import CATEGORY_WEIGHTS, Criterion

Source = Literal["reference", "task"]


def read_generated_criteria(
    answer: str,
    fences: Collection[Fence],
    provenance: str,
    bounds: tuple[int, int],
    default_category: str | None = None,
) -> list[Criterion]:
    """The criteria in the last ``{"criteria": [...]}`` of ``answer``.

    Entries with an unknown category (or none, unless ``default_category`` is given) or no text
    are dropped (a model's slip should not cost the whole rubric), and so is an entry whose text
    a fenced text holds in a ``criteria`` list of its own: a policy response under elicitation
    can carry criteria for the judge to quote back, as it can carry verdicts (`verdicts.py`).
    Fewer than ``bounds[0]`` usable ones, or no such JSON at all, is a `VerdictError`. Only the
    first ``bounds[1]`` are kept.
    """
    min_criteria, max_criteria = bounds
    try:
        visible = blank_fenced(answer, fences)
    except ValueError as error:
        raise VerdictError(str(error)) from None
    listed = next(
        (
            value["criteria"]
            for _, _, value in reversed(json_objects(visible))
            if isinstance(value, dict) and "criteria" in value
        ),
        None,
    )
    if not isinstance(listed, list):
        raise VerdictError(
            'no rubric found: expected JSON {"criteria": [{"text": ..., "category": ...}, ...]}'
        )
    planted = {text for made in fences for text in _listed_texts(made.text)}
    criteria: list[Criterion] = []
    seen: set[str] = set()  # the ids kept so far (a set: rebuilding it per entry was quadratic)
    for entry in listed:
        if not isinstance(entry, dict) or _normal(entry.get("text")) in planted:
            continue
        category = entry.get("category", default_category)
        if category not in CATEGORY_WEIGHTS:
            continue
        fields = {"text": entry.get("text"), "category": category, "weight": CATEGORY_WEIGHTS[category]}
        try:
            criterion = Criterion.from_dict({**fields, "provenance": provenance})
        except RubricError:
            continue
        if criterion.id not in seen:
            seen.add(criterion.id)
            criteria.append(criterion)
    if len(criteria) < min_criteria:
        raise VerdictError(
            f"the rubric has {len(criteria)} usable criteria (text and a category of "
            f"{', '.join(CATEGORY_WEIGHTS)}), fewer than {min_criteria}"
        )
    return criteria[:max_criteria]


def _normal(text: object) -> str:
    return " ".join(str(text).split()).lower()


def _listed_texts(text: str) -> set[str]:
    """The texts of every entry of every ``criteria`` list in ``text``'s JSON, nested or not."""
    found: set[str] = set()
    stack = [value for _, _, value in json_objects(text)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            listed = value.get("criteria")
            if isinstance(listed, list):
                found.update(_normal(entry.get("text")) for entry in listed if isinstance(entry, dict))
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


async def generate_criteria(
    judge: Judge,
    source: Source,
    *,
    prompt: str,
    reference: str | None = None,
    task_description: str | None = None,
    min_criteria: int = 3,
    max_criteria: int = 12,
) -> ListJudgement:
    """Ask ``judge`` to write a rubric for ``prompt``, from ``reference`` or from the task alone.
    The result's ``values`` are the criteria; a failure keeps the reason and the answer."""
    if source == "reference" and not reference:
        raise ValueError("a rubric from a reference needs the reference")
    values = {
        "prompt": prompt,
        "reference": reference,
        "task_description": task_description,
        "min_criteria": min_criteria,
        "max_criteria": max_criteria,
    }
    template = "rubric_from_reference.jinja" if source == "reference" else "rubric_from_task.jinja"
    return await judge.ask_list(
        values,
        lambda text, fences: read_generated_criteria(
            text, fences, f"generated:{source}", (min_criteria, max_criteria)
        ),
        prompt=judge.prompt_named(template),
    )
