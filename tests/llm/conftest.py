"""Fixtures for the LLM layer's tests: scripted loopback servers and clients that never sleep.

The servers themselves live in `tests/llm_servers.py` (importable from any test suite); see its
docstring for the script API (`answer`, `error`, `garbled`, `truncated`, `slow`).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("optiml") is None:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from llm_servers import AnthropicServer, OpenAIServer, ScriptedLLMServer
from optiml.llm import LLMCallStore, LLMClient

SECRET_KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key=SECRET_KEY) as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer(api_key=SECRET_KEY) as server:
        yield server


@pytest.fixture(params=["openai", "anthropic"])
def server(request: pytest.FixtureRequest) -> Iterator[ScriptedLLMServer]:
    """Each test using it runs once per protocol."""
    cls = OpenAIServer if request.param == "openai" else AnthropicServer
    with cls(api_key=SECRET_KEY) as srv:
        yield srv


class SleepRecorder:
    """Stands in for time.sleep: records the delays, sleeps not at all."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LLMCallStore]:
    with LLMCallStore(tmp_path / "run.db") as s:
        yield s


@pytest.fixture
def make_client(sleeps: SleepRecorder) -> Iterator[Callable[..., LLMClient]]:
    """``make_client(server, store=None, run_id=None, **config_overrides)``; closed after the test."""
    clients: list[LLMClient] = []

    def factory(
        srv: ScriptedLLMServer, store: LLMCallStore | None = None, run_id: str | None = None, **overrides: Any
    ) -> LLMClient:
        client = LLMClient(srv.config(**overrides), store=store, run_id=run_id, sleep=sleeps)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()
