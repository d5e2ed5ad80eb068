"""`SqliteFile`: how rewardlab keeps its SQLite files (the judge cache, the rubric store)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any


class SqliteFile:
    """A SQLite file opened on first use, with ``schema`` applied: autocommit, one connection
    shared by this object's threads under ``_lock``, and WAL mode, so several processes -
    training workers, an offline scorer - can share one file (readers never block the writer).
    It pickles as its path, for the processes a trainer starts.

    Args:
        path: The file (made with its folder if missing), or ``":memory:"``.
    """

    schema = ""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        """The connection (call with ``_lock`` held)."""
        if self._connection is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=30.0, check_same_thread=False, isolation_level=None
            )
            if self.path != ":memory:":
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            connection.executescript(self.schema)
            self._connection = connection
        return self._connection

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        SqliteFile.__init__(self, state["path"])
