"""The rubric model: a rubric is a list of criteria, each a statement about a response with a
signed weight - positive for what a good response does, negative for a pitfall (the criterion
describes the mistake; meeting it costs points).

A criterion may have ordinal choices ("fully" 1.0, "partly" 0.5, "not at all" 0.0) instead of
yes/no. Every criterion records where it came from (hand-written, generated from a reference,
self-proposed, elicited at a training step), so that a reward can be traced to its rubric.

Rubrics load from JSON or YAML, from a dataset column, or from a `RubricStore`; HealthBench's
format (``{"criterion": ..., "points": ..., "tags": [...]}``) is read as it is. Bad input is a
`RubricError` naming the entry and field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rewardlab.errors import RubricError

#: Default weights by category (Rubrics-as-Rewards' essential / important / optional / pitfall).
CATEGORY_WEIGHTS = {"essential": 1.0, "important": 0.7, "optional": 0.3, "pitfall": -0.9}


@dataclass(frozen=True, slots=True)
class Choice:
    """One ordinal level of a criterion: a label the judge answers with, and how far it meets
    the criterion, from 0 (not at all) to 1 (fully)."""

    label: str
    value: float


@dataclass(frozen=True, slots=True)
class Criterion:
    """One statement a response is checked against.

    Attributes:
        text: The statement ("States the final answer, 42").
        weight: Signed weight; negative for a pitfall, whose being met costs points.
        id: Stable identifier (by default from the text), used in breakdowns and metrics.
        category: essential / important / optional / pitfall, or any label of one's own.
        choices: Ordinal levels; None for a yes/no criterion.
        provenance: Where it came from: "hand-written", "generated:reference",
            "generated:task", "self-proposed", "elicited@step:N".
    """

    text: str
    weight: float
    id: str = ""
    category: str | None = None
    choices: tuple[Choice, ...] | None = None
    provenance: str = "hand-written"

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", criterion_id(self.text))

    @property
    def is_pitfall(self) -> bool:
        return self.weight < 0

    def choice(self, label: str) -> Choice:
        """The choice with ``label`` (an ordinal criterion's)."""
        return next(c for c in self.choices or () if c.label == label)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "text": self.text, "weight": self.weight}
        if self.category is not None:
            data["category"] = self.category
        if self.choices is not None:
            data["choices"] = [{"label": c.label, "value": c.value} for c in self.choices]
        data["provenance"] = self.provenance
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "criterion") -> Criterion:
        """A criterion from a mapping (ours, or HealthBench's ``criterion``/``points``/``tags``)."""
        if isinstance(data, str):
            data = {"text": data}
        if not isinstance(data, Mapping):
            raise RubricError(
                f"{where}: must be a mapping with 'text' and 'weight', got {type(data).__name__}"
            )
        # A None is a missing key: a dataset column of structs fills absent fields with None.
        data = {key: value for key, value in data.items() if value is not None}
        text = data.get("text", data.get("criterion"))
        if not isinstance(text, str) or not text.strip():
            raise RubricError(f"{where}.text: must be a non-empty string")
        category = data.get("category")
        if category is None and isinstance(data.get("tags"), list):
            category = next((t.split(":", 1)[1] for t in data["tags"] if str(t).startswith("axis:")), None)
        weight = data.get("weight", data.get("points"))
        if weight is None:
            if category not in CATEGORY_WEIGHTS:
                raise RubricError(
                    f"{where}.weight: missing, and category {category!r} has no default "
                    f"(defaults exist for {', '.join(CATEGORY_WEIGHTS)})"
                )
            weight = CATEGORY_WEIGHTS[category]
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight == 0
        ):
            raise RubricError(f"{where}.weight: must be a finite non-zero number, got {weight!r}")
        if category == "pitfall" and weight > 0:
            raise RubricError(
                f"{where}.weight: a pitfall's weight is negative (making the mistake costs points), "
                f"got {weight!r}"
            )
        identifier = data.get("id", "")
        if not isinstance(identifier, str):
            raise RubricError(f"{where}.id: must be a string")
        return cls(
            text=text.strip(),
            weight=float(weight),
            id=identifier,
            category=None if category is None else str(category),
            choices=_choices(data.get("choices"), f"{where}.choices"),
            provenance=str(data.get("provenance", "hand-written")),
        )


def criterion_id(text: str) -> str:
    """A stable id for a criterion's text (so the same criterion keeps its metrics name)."""
    return "c" + hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:8]


def _choices(data: Any, where: str) -> tuple[Choice, ...] | None:
    if data is None:
        return None
    if not isinstance(data, Sequence) or isinstance(data, str) or len(data) < 2:
        raise RubricError(f"{where}: must be a list of at least two {{label, value}} entries")
    choices = []
    for index, entry in enumerate(data):
        if (
            not isinstance(entry, Mapping)
            or not isinstance(entry.get("label"), str)
            or not entry["label"].strip()
        ):
            raise RubricError(f"{where}[{index}]: needs a non-empty 'label'")
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise RubricError(f"{where}[{index}].value: must be a number from 0 to 1, got {value!r}")
        choices.append(Choice(entry["label"].strip(), float(value)))
    labels = [c.label.lower() for c in choices]
    if len(set(labels)) != len(labels):
        raise RubricError(f"{where}: labels must differ")
    return tuple(choices)


@dataclass(frozen=True, slots=True)
class Rubric:
    """Criteria to grade one prompt's responses by.

    Attributes:
        criteria: The criteria, in order.
        id: The rubric's (usually the prompt's) id.
        version: Its version in a `RubricStore`, if it came from one.
        metadata: Where it came from and anything else worth keeping with it (saved with it).
    """

    criteria: tuple[Criterion, ...]
    id: str | None = None
    version: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.criteria:
            raise RubricError("a rubric needs at least one criterion")
        counts = Counter(c.id for c in self.criteria)
        duplicates = sorted(i for i, n in counts.items() if n > 1)
        if duplicates:
            raise RubricError(f"criterion ids must be unique; repeated: {duplicates}")

    @property
    def positive_weight(self) -> float:
        return math.fsum(c.weight for c in self.criteria if c.weight > 0)

    def with_criteria(self, criteria: Sequence[Criterion]) -> Rubric:
        return replace(self, criteria=tuple(criteria))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"criteria": [c.to_dict() for c in self.criteria]}
        if self.id is not None:
            data["id"] = self.id
        if self.version is not None:
            data["version"] = self.version
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "rubric") -> Rubric:
        """A rubric from a list of criteria, a ``{"criteria": [...]}`` mapping, or JSON text of
        either (how a dataset column often holds it)."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            # ValueError beyond JSONDecodeError: an integer of over 4,300 digits; RecursionError:
            # nesting about 1,000 deep. A rubric a model wrote may hold either.
            except (ValueError, RecursionError) as error:
                raise RubricError(f"{where}: not JSON: {error}") from None
        identifier, version = None, None
        metadata: Mapping[str, Any] = {}
        if isinstance(data, Mapping):
            identifier, version = data.get("id"), data.get("version")
            metadata = data.get("metadata") or {}
            data = data.get("criteria")
        if not isinstance(data, Sequence) or isinstance(data, str):
            raise RubricError(f"{where}: expected a list of criteria or {{'criteria': [...]}}")
        criteria = tuple(Criterion.from_dict(entry, f"{where}[{i}]") for i, entry in enumerate(data))
        try:
            return cls(criteria, None if identifier is None else str(identifier), version, dict(metadata))
        except RubricError as error:
            raise RubricError(f"{where}: {error}") from None

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        """A rubric from a JSON or YAML file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise RubricError(f"cannot read rubric file {path}: {error}") from None
        try:
            data = yaml.safe_load(text)  # YAML is a superset of JSON
        except yaml.YAMLError as error:
            raise RubricError(f"{path}: not valid JSON or YAML: {error}") from None
        return cls.from_data(data, where=str(path))

    def save(self, path: str | Path) -> None:
        """Write the rubric as JSON (``.json``) or YAML (anything else)."""
        path = Path(path)
        data = self.to_dict()
        text = json.dumps(data, indent=2) if path.suffix == ".json" else yaml.safe_dump(data, sort_keys=False)
        path.write_text(text, encoding="utf-8")
