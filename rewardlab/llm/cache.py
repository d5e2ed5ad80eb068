"""A persistent cache of model answers in SQLite, keyed by `ChatRequest.fingerprint` (backend,
model, sampling parameters, the judge's template hash, the rendered prompt with its fence nonces
masked, and the fenced texts).

Judging the same rollout twice - a resumed run, a benchmark rerun, the same prompt in two
configs - then costs nothing. What is kept is decided by the caller (`ModelClient`): only answers
that gave a verdict, never a failure or an answer the judge could not read - at temperature 0
that would replay the same failure forever. An answer is stored with the nonces of the fences
its prompt had, so that its quotes of them are still recognised when it is read again for a
prompt rendered with new ones. A stored answer that turns out wrong (a verdict to distrust, a
judge since fixed) is removed by its key with `purge`; judges list the keys of the answers a
score was made from in ``Score.details["cache_keys"]``. Several processes may share one file
(WAL mode, with a busy timeout).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from rewardlab.llm.backend import ChatResponse
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

    Example:
        >>> cache = AnswerCache(":memory:")
        >>> cache.put("k", "backend", ChatResponse(text='{"score": 7}'), nonces=("0123456789ab",))
        >>> cache.get("k")[1], cache.purge(["k"]), cache.get("k")
        (('0123456789ab',), 1, None)
    """

    schema = _SCHEMA

    def get(self, key: str) -> tuple[ChatResponse, tuple[str, ...]] | None:
        """The stored answer for ``key`` and the nonces of its prompt's fences, if any."""
        with self._lock:
            row = self._connect().execute("SELECT response FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        stored = json.loads(row[0])
        return ChatResponse.from_dict(stored), tuple(stored.get("nonces", ()))

    def put(self, key: str, backend: str, response: ChatResponse, nonces: Sequence[str] = ()) -> None:
        """Store an answer and the nonces of its prompt's fences, in order (a later answer for the
        same key replaces it)."""
        payload = json.dumps({**response.to_dict(), "nonces": list(nonces)})
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO answers (key, backend, response, created) VALUES (?, ?, ?, ?)",
                (key, backend, payload, time.time()),
            )

    def purge(self, keys: Sequence[str]) -> int:
        """Remove the answers stored under ``keys``; returns how many there were."""
        with self._lock:
            connection = self._connect()
            return sum(
                connection.execute("DELETE FROM answers WHERE key = ?", (key,)).rowcount for key in keys
            )

    def __len__(self) -> int:
        with self._lock:
            return self._connect().execute("SELECT COUNT(*) FROM answers").fetchone()[0]
