"""A persistent cache of model answers in SQLite, keyed by `ChatRequest.fingerprint` (backend,
model, sampling parameters, the judge's template hash and the rendered prompt).

Judging the same rollout twice - a resumed run, a benchmark rerun, the same prompt in two
configs - then costs nothing. Only answers are stored, never failures: a backend that was down
must be asked again. Several processes may share one file (WAL mode, with a busy timeout).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from rewardlab.judges.backend import ChatResponse

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class AnswerCache:
    """Model answers by request fingerprint.

    Args:
        path: The SQLite file (made if missing), or ``":memory:"`` for a cache that lives as long
            as this object.
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=30.0, check_same_thread=False, isolation_level=None
            )
            if self.path != ":memory:":
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
            self._connection = connection
        return self._connection

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

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])
