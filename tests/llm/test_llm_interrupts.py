"""Dead and silent servers, deadlines, cancel and Ctrl-C, and the budgets in calls and tokens."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llm_servers import AnthropicServer, OpenAIServer, ScriptedLLMServer, slow
from optiml.llm import (
    ChatMessage,
    LLMBudgetExceeded,
    LLMCancelled,
    LLMClient,
    LLMUnavailable,
)

MSGS = [ChatMessage("user", "hello")]


def no_sleep(_seconds: float) -> None:
    pass


@pytest.fixture
def silent_socket() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers: a hung server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


@pytest.mark.parametrize("cls", [OpenAIServer, AnthropicServer])
def test_a_refused_connection_fails_fast_in_one_line(cls: type[ScriptedLLMServer]) -> None:
    server = cls().start()
    config = server.config(max_retries=4)
    server.stop()
    client = LLMClient(config)  # real back-off sleeps: none may happen
    start = time.monotonic()
    with pytest.raises(LLMUnavailable) as info:
        client.complete(MSGS)
    assert time.monotonic() - start < 2.0
    message = str(info.value)
    assert "connection refused" in message and "is the server running" in message and "\n" not in message
    assert client.usage.retries == 0


def test_an_unknown_host_fails_fast() -> None:
    with OpenAIServer() as server:
        config = server.config(base_url="http://no-such-host.invalid/v1", api_key="sk-x")
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="host not found"):
        LLMClient(config).complete(MSGS)
    assert time.monotonic() - start < 2.0


def test_a_server_that_never_answers_is_abandoned_at_the_deadline() -> None:
    with OpenAIServer(responder=lambda _r: slow(60.0)) as server:
        client = LLMClient(server.config(timeout_s=30.0, deadline_s=1.0, max_retries=4), sleep=no_sleep)
        start = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"no answer within the 1 s deadline") as info:
            client.complete(MSGS)
        elapsed = time.monotonic() - start
        assert 0.9 <= elapsed < 2.5, elapsed
        assert server.request_count == 1 and info.value.kinds == ("deadline",)  # no retry past the deadline


def test_a_socket_that_accepts_and_never_answers_is_abandoned_at_the_deadline(silent_socket: str) -> None:
    with OpenAIServer() as server:
        config = server.config(base_url=silent_socket, timeout_s=30.0, deadline_s=1.0)
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="deadline"):
        LLMClient(config, sleep=no_sleep).complete(MSGS)
    assert time.monotonic() - start < 2.5


def test_retries_stop_at_the_deadline() -> None:
    with OpenAIServer(responder=lambda _r: slow(60.0)) as server:
        client = LLMClient(server.config(timeout_s=0.3, deadline_s=1.2, max_retries=10), sleep=no_sleep)
        start = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"no answer within the 1\.2 s deadline") as info:
            client.complete(MSGS)
        assert time.monotonic() - start < 2.5  # 0.3 s timeouts, retried until the 1.2 s deadline, not 10 times
        assert server.request_count < 11 and info.value.attempts == server.request_count


def test_cancel_wakes_a_waiting_request_at_once() -> None:
    with OpenAIServer(responder=lambda _r: slow(60.0)) as server:
        client = LLMClient(server.config(timeout_s=30.0, deadline_s=60.0))
        errors: list[BaseException] = []

        def ask() -> None:
            try:
                client.complete(MSGS)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=ask)
        worker.start()
        _wait_for_requests(server, 1)
        start = time.monotonic()
        client.cancel()
        worker.join(timeout=2.0)
        assert not worker.is_alive() and time.monotonic() - start < 1.0
        assert len(errors) == 1 and isinstance(errors[0], LLMCancelled)
        with pytest.raises(LLMCancelled):  # a cancelled client stays cancelled
            client.complete(MSGS)


def test_ctrl_c_during_complete_many_returns_at_once() -> None:
    with OpenAIServer(responder=lambda _r: slow(60.0)) as server:
        client = LLMClient(server.config(timeout_s=30.0, deadline_s=60.0, concurrency=3))
        _interrupt_when(lambda: server.request_count >= 3)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.complete_many([MSGS, [ChatMessage("user", "b")], [ChatMessage("user", "c")]])
        assert time.monotonic() - start < 3.0 and client.cancelled


def test_the_call_budget_is_never_overshot_by_concurrent_requests() -> None:
    with OpenAIServer(responder=lambda _r: slow(0.2)) as server:
        client = LLMClient(server.config(budget_calls=3, concurrency=4), sleep=no_sleep)
        conversations = [[ChatMessage("user", f"question {i}")] for i in range(6)]
        results = client.complete_many(conversations, return_exceptions=True)
        spent = [r for r in results if isinstance(r, LLMBudgetExceeded)]
        assert len(spent) == 3 and server.request_count == 3
        assert {e.limit for e in spent} == {"calls"} and spent[0].reason == "LLM call budget spent (3 calls)"
        assert "--max-llm-calls" in str(spent[0]) and client.spent == (3, 3 * 120)


def test_the_token_budget_stops_calls_once_spent() -> None:
    with OpenAIServer() as server:
        client = LLMClient(server.config(budget_tokens=150), sleep=no_sleep)  # canned: 100 in + 20 out per call
        client.complete(MSGS)
        client.complete([ChatMessage("user", "2")])  # 120 < 150 before it: allowed, and it crosses the budget
        with pytest.raises(LLMBudgetExceeded, match="token budget spent: 240 of 150 tokens") as info:
            client.complete([ChatMessage("user", "3")])
        assert info.value.limit == "tokens" and server.request_count == 2


def _wait_for_requests(server: ScriptedLLMServer, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while server.request_count < count:
        assert time.monotonic() < deadline, "the request never reached the server"
        time.sleep(0.01)


def _interrupt_when(ready: Any, timeout: float = 10.0) -> None:
    """Send SIGINT to this process (Ctrl-C: KeyboardInterrupt in the main thread) once ``ready()``."""
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        deadline = time.monotonic() + timeout
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
