"""`RubricStore`: versioned rubrics by prompt id, with a log of every change, in SQLite.

Every change to a prompt's rubric - criteria added, merged, retired, or a whole rubric set -
writes a new version (a full snapshot) and one log row per change, so any reward can be traced
to the rubric version that produced it (`RubricReward` records it in ``Score.details``) and any
version can be read back. Several processes may share a store file (WAL mode); a change is one
transaction.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rewardlab.rubrics.model import Criterion, Rubric
from rewardlab.sqlite_file import SqliteFile

Action = Literal["set", "add", "merge", "retire"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (
    prompt_id TEXT NOT NULL, version INTEGER NOT NULL, step INTEGER, created REAL NOT NULL,
    rubric TEXT NOT NULL, PRIMARY KEY (prompt_id, version)
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, prompt_id TEXT NOT NULL, version INTEGER NOT NULL,
    step INTEGER, action TEXT NOT NULL, criterion_id TEXT, detail TEXT NOT NULL, created REAL NOT NULL
);
"""


def prompt_key(prompt: str) -> str:
    """A prompt's id when the data gives none: a hash of its text."""
    return "p" + hashlib.sha256(prompt.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Change:
    """One change to a rubric.

    Attributes:
        action: ``add`` (a new criterion), ``merge`` (a proposed criterion found to duplicate
            ``criterion_id``; the rubric keeps the existing one), ``retire`` (``criterion_id``
            leaves the active rubric), or ``set`` (a whole rubric replaced).
        criterion: The criterion added (``add``) or proposed (``merge``).
        criterion_id: The criterion merged into or retired.
        reason: Why, in words.
    """

    action: Action
    criterion: Criterion | None = None
    criterion_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """A change as logged: which prompt, the version it produced, the training step."""

    prompt_id: str
    version: int
    step: int | None
    action: str
    criterion_id: str | None
    detail: dict[str, Any] = field(default_factory=dict)


class RubricStore(SqliteFile):
    """Versioned rubrics by prompt id (see the module docstring).

    Args:
        path: The SQLite file (made if missing), or ``":memory:"``.
    """

    schema = _SCHEMA

    def rubric(self, prompt_id: str, version: int | None = None) -> Rubric | None:
        """The prompt's rubric: the latest version, or the one asked for; None if there is none."""
        query = "SELECT version, rubric FROM versions WHERE prompt_id = ?"
        arguments: tuple[Any, ...] = (prompt_id,)
        if version is None:
            query += " ORDER BY version DESC LIMIT 1"
        else:
            query += " AND version = ?"
            arguments += (version,)
        with self._lock:
            row = self._connect().execute(query, arguments).fetchone()
        if row is None:
            return None
        stored = Rubric.from_data(json.loads(row[1]), where=f"store {self.path} {prompt_id} v{row[0]}")
        return replace(stored, id=prompt_id, version=row[0])

    def put(self, prompt_id: str, rubric: Rubric, *, step: int | None = None, reason: str = "") -> Rubric:
        """Replace the prompt's rubric with ``rubric`` (a new version)."""
        committed = self._commit(prompt_id, [Change("set", reason=reason)], step, replacement=rubric)
        assert committed is not None  # a replacement always has criteria
        return committed

    def apply(self, prompt_id: str, changes: Sequence[Change], *, step: int | None = None) -> Rubric | None:
        """Apply ``changes`` to the prompt's latest rubric; returns the rubric after them.

        The latest version is read inside the writing transaction, so processes sharing the
        file cannot overwrite each other's changes. Only changes that take effect are logged (an
        ``add`` of a criterion already there is not); changes that leave the criteria as they
        were (merges) are logged against the current version without making a new one.
        """
        if any(change.action not in ("add", "merge", "retire") for change in changes):
            raise ValueError("apply takes add, merge and retire changes; use put for a whole rubric")
        return self._commit(prompt_id, list(changes), step)

    def _commit(
        self, prompt_id: str, changes: list[Change], step: int | None, replacement: Rubric | None = None
    ) -> Rubric | None:
        now = time.time()
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                latest = connection.execute(
                    "SELECT version, rubric FROM versions WHERE prompt_id = ? ORDER BY version DESC LIMIT 1",
                    (prompt_id,),
                ).fetchone()
                current = None if latest is None else Rubric.from_data(json.loads(latest[1]))
                version = 0 if latest is None else latest[0]
                if replacement is not None:
                    criteria = list(replacement.criteria)
                    logged = [(change, {"reason": change.reason}) for change in changes]
                else:
                    criteria, logged = _applied(list(current.criteria) if current else [], changes)
                if not criteria:
                    raise ValueError(f"the changes would leave prompt {prompt_id!r} without criteria")
                changed = current is None or [c.to_dict() for c in criteria] != [
                    c.to_dict() for c in current.criteria
                ]
                snapshot: Rubric | None
                if changed or replacement is not None:
                    version += 1
                    metadata = (
                        replacement.metadata
                        if replacement is not None
                        else (current.metadata if current else {})
                    )
                    snapshot = Rubric(tuple(criteria), id=prompt_id, version=version, metadata=metadata)
                    connection.execute(
                        "INSERT INTO versions VALUES (?, ?, ?, ?, ?)",
                        (prompt_id, version, step, now, json.dumps(snapshot.to_dict())),
                    )
                else:
                    snapshot = replace(current, id=prompt_id, version=version) if current else None
                for change, detail in logged:
                    connection.execute(
                        "INSERT INTO changes (prompt_id, version, step, action, criterion_id, detail, "
                        "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (prompt_id, version, step, change.action, _subject(change), json.dumps(detail), now),
                    )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return snapshot

    def history(self, prompt_id: str | None = None) -> list[ChangeRecord]:
        """Every change, oldest first (for one prompt, or all)."""
        query = "SELECT prompt_id, version, step, action, criterion_id, detail FROM changes"
        arguments: tuple[Any, ...] = ()
        if prompt_id is not None:
            query += " WHERE prompt_id = ?"
            arguments = (prompt_id,)
        with self._lock:
            rows = self._connect().execute(query + " ORDER BY seq", arguments).fetchall()
        return [ChangeRecord(p, v, s, a, c, json.loads(d)) for p, v, s, a, c, d in rows]

    def prompt_ids(self) -> list[str]:
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT DISTINCT prompt_id FROM versions ORDER BY prompt_id")
                .fetchall()
            )
        return [row[0] for row in rows]


def _subject(change: Change) -> str | None:
    return change.criterion_id or (change.criterion.id if change.criterion is not None else None)


def _applied(
    criteria: list[Criterion], changes: Sequence[Change]
) -> tuple[list[Criterion], list[tuple[Change, dict[str, Any]]]]:
    """The criteria after ``changes``, and the changes that took effect with their log details
    (a retired criterion's text is kept in its log row)."""
    logged = []
    for change in changes:
        detail: dict[str, Any] = {"reason": change.reason}
        if change.action == "add" and change.criterion is not None:
            if change.criterion.id in {c.id for c in criteria}:
                continue
            criteria.append(change.criterion)
            detail["criterion"] = change.criterion.to_dict()
        elif change.action == "retire":
            retired = next((c for c in criteria if c.id == change.criterion_id), None)
            if retired is None:
                continue
            criteria.remove(retired)
            detail["criterion"] = retired.to_dict()
        elif change.criterion is not None:
            detail["criterion"] = change.criterion.to_dict()
        logged.append((change, detail))
    return criteria, logged
