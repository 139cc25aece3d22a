"""LLMCallStore: its own table in a shared SQLite file, WAL, thread-safe, round-trips records."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from optiml.llm import CallRecord, ChatMessage, LLMCallStore, LLMRequest, LLMResponse


def record(i: int, *, run_id: str = "run", cached: bool = False, sample_index: int = 0) -> CallRecord:
    request = LLMRequest((ChatMessage("user", f"q{i}"),), "m", 0.7, 100, purpose=f"p{i % 2}")
    response = LLMResponse([f"a{i}"], "m", "openai", 10, 5, 0.25, 0.1, cached, ["stop"])
    return CallRecord(f"key{i}", run_id, "openai", request.purpose, request, response, sample_index)


def test_shares_a_database_with_other_tables(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE candidates (id INTEGER PRIMARY KEY, source TEXT)")
        conn.execute("INSERT INTO candidates (source) VALUES ('__global__')")
    with LLMCallStore(db) as store:
        store.record(record(1))
    with LLMCallStore(db) as again:  # reopening: IF NOT EXISTS, nothing lost
        assert len(again.calls()) == 1
    conn = sqlite3.connect(db)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"candidates", "llm_calls"} <= tables
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    columns = {row[1] for row in conn.execute("PRAGMA table_info(llm_calls)")}
    expected = "id run_id key provider model purpose request_json response_json input_tokens output_tokens"
    assert set(f"{expected} cost_usd latency_s cached created_at".split()) <= columns
    conn.close()


def test_round_trip_lookup_and_usage(tmp_path: Path) -> None:
    with LLMCallStore(tmp_path / "run.db") as store:
        original = record(1)
        store.record(original)
        store.record(record(1, sample_index=1))
        store.record(record(2, run_id="other", cached=True))

        (loaded,) = store.calls("run")[:1]
        assert loaded.request == original.request and loaded.response == original.response
        assert loaded.id is not None and loaded.created_at
        assert store.lookup("key1", 0) == original.response
        assert store.lookup("key1", 1) is not None and store.lookup("key1", 2) is None
        assert store.lookup("key2") is None  # rows answered from the cache are never served

        usage = store.usage("run")
        assert (usage.calls, usage.api_calls, usage.cached_calls) == (2, 2, 0)
        assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (20, 10, 0.5)
        assert usage.by_purpose == {"p1": 0.5}
        assert store.usage().calls == 3


def test_concurrent_writes(tmp_path: Path) -> None:
    with LLMCallStore(tmp_path / "run.db") as store:
        threads = [
            threading.Thread(target=lambda k=k: [store.record(record(k * 100 + i)) for i in range(20)])
            for k in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(store.calls()) == 160


def test_in_memory_store() -> None:
    with LLMCallStore(":memory:") as store:
        store.record(record(1))
        assert store.lookup("key1") is not None
