"""A persistent cache of model answers in SQLite, keyed by `ChatRequest.fingerprint` (backend,
model, sampling parameters, the judge's template hash and the rendered prompt).

Judging the same rollout twice - a resumed run, a benchmark rerun, the same prompt in two
configs - then costs nothing. Only answers are stored, never failures: a backend that was down
must be asked again. Several processes may share one file (WAL mode, with a busy timeout).
"""

from __future__ import annotations

import json
import time

from rewardlab.judges.backend import ChatResponse
from rewardlab.sqlite_file import SqliteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class AnswerCache(SqliteFile):
    """Model answers by request fingerprint.

    Args:
        path: The SQLite file (made if missing), or ``":memory:"`` for a cache that lives as long
            as this object.
    """

    schema = _SCHEMA

    def get(self, key: str) -> ChatResponse | None:
        """The stored answer for ``key``, if any."""
        with self._lock:
            row = self._connect().execute("SELECT response FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else ChatResponse.from_dict(json.loads(row[0]))

    def put(self, key: str, backend: str, response: ChatResponse) -> None:
        """Store an answer (a later answer for the same key replaces it)."""
        payload = json.dumps(response.to_dict())
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO answers (key, backend, response, created) VALUES (?, ?, ?, ?)",
                (key, backend, payload, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._connect().execute("SELECT COUNT(*) FROM answers").fetchone()[0]
