"""SQLite persistence of every LLM exchange: the response cache, the replay source and the cost ledger.

One table, ``llm_calls``, created with IF NOT EXISTS so it can live in the same database file as
the run store's other tables. One row per answered request:

- ``cached = 0`` rows are real network answers; they serve the cache and replay, looked up by
  ``(key, sample_index)`` — the k-th time a run asks the same sampled question it gets the k-th
  recorded answer, so replays are faithful and repeated sampling still yields distinct samples;
- ``cached = 1`` rows record answers a run took from the cache or a recording (for per-run
  accounting); they are never served.

Rows hold the provider-independent request and response (`LLMRequest`, `LLMResponse` as JSON),
never an API key or HTTP headers. WAL mode; one connection per store (``check_same_thread=False``)
guarded by a lock, so one store can be shared by all of a client's threads.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from optiml.llm.types import CallRecord, LLMRequest, LLMResponse, LLMUsage

__all__ = ["LLMCallStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_calls (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT,
    key           TEXT    NOT NULL,
    sample_index  INTEGER NOT NULL DEFAULT 0,
    provider      TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    purpose       TEXT    NOT NULL DEFAULT '',
    request_json  TEXT    NOT NULL,
    response_json TEXT    NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd      REAL    NOT NULL,
    latency_s     REAL    NOT NULL,
    cached        INTEGER NOT NULL,
    created_at    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_calls_by_key ON llm_calls (key, sample_index, id) WHERE cached = 0;
CREATE INDEX IF NOT EXISTS llm_calls_by_run ON llm_calls (run_id);
"""

_COLUMNS = "id, run_id, key, sample_index, provider, purpose, request_json, response_json, cached, created_at"


class LLMCallStore:
    """The ``llm_calls`` table in a SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        with self._lock:
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.executescript(_SCHEMA)

    def record(self, rec: CallRecord) -> int:
        """Append one exchange; returns its row id."""
        resp = rec.response
        created = rec.created_at or datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        row = (
            rec.run_id, rec.key, rec.sample_index, rec.provider, rec.model, rec.purpose,
            rec.request.to_json(), resp.to_json(), resp.input_tokens, resp.output_tokens,
            resp.cost_usd, resp.latency_s, int(resp.cached), created,
        )  # fmt: skip
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO llm_calls (run_id, key, sample_index, provider, model, purpose, request_json,"
                " response_json, input_tokens, output_tokens, cost_usd, latency_s, cached, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            return int(cur.lastrowid or 0)

    def lookup(self, key: str, sample_index: int = 0) -> LLMResponse | None:
        """The earliest network answer recorded for (`key`, `sample_index`), or None."""
        with self._lock:
            found = self._conn.execute(
                "SELECT response_json FROM llm_calls WHERE key = ? AND sample_index = ? AND cached = 0"
                " ORDER BY id LIMIT 1",
                (key, sample_index),
            ).fetchone()
        return None if found is None else LLMResponse.from_json(found[0], cached=False)

    def calls(self, run_id: str | None = None) -> list[CallRecord]:
        """All exchanges (of one run, if given), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM llm_calls"
        params: tuple[str, ...] = ()
        if run_id is not None:
            sql += " WHERE run_id = ?"
            params = (run_id,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY id", params).fetchall()
        return [
            CallRecord(
                key=key,
                run_id=run,
                provider=provider,
                purpose=purpose,
                request=LLMRequest.from_json(request_json),
                response=LLMResponse.from_json(response_json, cached=bool(cached)),
                sample_index=sample_index,
                created_at=created_at,
                id=row_id,
            )
            for (row_id, run, key, sample_index, provider, purpose, request_json, response_json, cached,
                 created_at) in rows
        ]  # fmt: skip

    def usage(
        self, run_id: str | None = None, purpose_prefix: str | None = None, *, network_only: bool = False
    ) -> LLMUsage:
        """Totals over the stored exchanges (of one run, if given; of the purposes starting with
        `purpose_prefix`, if given, e.g. ``"propose"``; of network answers only, with `network_only`:
        what was paid for). `api_calls` counts network rows."""
        clauses: list[str] = ["cached = 0"] if network_only else []
        values: list[str | int] = []
        if run_id is not None:
            clauses.append("run_id = ?")
            values.append(run_id)
        if purpose_prefix is not None:
            clauses.append("substr(purpose, 1, ?) = ?")
            values.extend([len(purpose_prefix), purpose_prefix])
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        params = tuple(values)
        with self._lock:
            calls, cached, tokens_in, tokens_out, cost = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(cached), 0), COALESCE(SUM(input_tokens), 0),"
                f" COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0.0) FROM llm_calls {where}",
                params,
            ).fetchone()
            by_purpose = dict(
                self._conn.execute(
                    f"SELECT purpose, SUM(cost_usd) FROM llm_calls {where} GROUP BY purpose", params
                ).fetchall()
            )
        return LLMUsage(
            calls=int(calls),
            cached_calls=int(cached),
            api_calls=int(calls) - int(cached),
            input_tokens=int(tokens_in),
            output_tokens=int(tokens_out),
            cost_usd=float(cost),
            by_purpose=by_purpose,
        )

    def spent(self, run_id: str) -> tuple[int, int]:
        """(answers from the network, their input + output tokens) of one run: what its call and token
        budgets have used so far (cache hits are free)."""
        with self._lock:
            calls, tokens = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(input_tokens + output_tokens), 0) FROM llm_calls"
                " WHERE run_id = ? AND cached = 0",
                (run_id,),
            ).fetchone()
        return int(calls), int(tokens)

    def models(self, run_id: str | None = None) -> list[str]:
        """The models that answered (a run's) network requests, most used first."""
        where, params = ("AND run_id = ?", (run_id,)) if run_id is not None else ("", ())
        with self._lock:
            rows = self._conn.execute(
                f"SELECT model, COUNT(*) AS n FROM llm_calls WHERE cached = 0 {where} GROUP BY model ORDER BY n DESC",
                params,
            ).fetchall()
        return [str(model) for model, _ in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> LLMCallStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
