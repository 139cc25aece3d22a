"""The API key never reaches logs, exception messages, reprs or the SQLite file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from llm_servers import ScriptedLLMServer, answer, error
from optiml.llm import ChatMessage, LLMCallStore, LLMClient, LLMError

MSGS = [ChatMessage("system", "sys"), ChatMessage("user", "hello")]


def test_key_never_leaks(server: ScriptedLLMServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = server.api_key
    assert key is not None
    caplog.set_level(logging.DEBUG)  # everything, SDK and httpx debug logs included
    db = tmp_path / "run.db"
    store = LLMCallStore(db)
    client = LLMClient(server.config(max_retries=2), store=store, run_id="r", sleep=lambda s: None)

    # a server that echoes the key in its error messages (some do, masked or not)
    server.script(error(429, f"slow down, {key}"), error(500, f"oops {key}"), answer("fine"))
    client.complete(MSGS, n=2, purpose="p")
    messages: list[str] = []
    server.script(*[error(503, f"bad key {key}")] * 3, error(401, f"Incorrect API key provided: {key}"))
    for _ in range(2):
        with pytest.raises(LLMError) as info:
            client.complete([ChatMessage("user", "again")])
        messages.append(str(info.value))
    assert server.requests[0].headers  # the key did travel to the server…
    assert any(key in value for value in server.requests[0].headers.values())

    client.close()
    store.close()
    assert "***" in messages[0] and key not in " ".join(messages)  # …and nowhere else
    assert caplog.records and key not in caplog.text
    for record in caplog.records:
        assert key not in record.getMessage()
    assert key not in repr(client.config) and "***" in repr(client.config)
    for path in tmp_path.iterdir():  # the database and any -wal / -shm files
        assert key.encode() not in path.read_bytes(), path.name
