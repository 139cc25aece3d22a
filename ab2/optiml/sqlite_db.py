"""One SQLite connection shared by threads: the plumbing under the run store and the generation store.

Tables of several components live in one file (``.optiml/runs.db``); each component creates its
own with ``CREATE TABLE IF NOT EXISTS``. WAL mode lets a reader (``optiml runs``) look while a run
writes. Every failure becomes a one-line :class:`StoreError`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from optiml.errors import StoreError


class SqliteDatabase:
    """A thread-safe connection (one lock) that runs ``schema`` on open."""

    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a folder, not a run store file (SQLite; default .optiml/runs.db)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA busy_timeout = 30000")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.executescript(schema)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed on success, rolled back on error, reported as StoreError."""
        with self._lock:
            try:
                with self._conn:
                    yield self._conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: write failed: {exc}") from exc

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return list(self._conn.execute(sql, tuple(params)).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: read failed: {exc}") from exc
