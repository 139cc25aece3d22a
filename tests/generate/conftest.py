"""Fixtures for generation tests: the SiLU task, a private compiler, a loopback server, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from generate_helpers import SILU_TASK

from llm_servers import OpenAIServer
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.llm import LLMCallStore, LLMClient
from optiml.task import Task, load_task


@pytest.fixture
def silu_task() -> Task:
    return load_task(SILU_TASK)


@pytest.fixture(scope="session")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    """One compile cache for the whole session: these tests are about generation, not compiling."""
    return Compiler(CompilerConfig(arch="sm_90", cache_dir=tmp_path_factory.mktemp("kernels")))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def make_client() -> Iterator[Callable[..., LLMClient]]:
    """``make_client(server, store=None, run_id=None, **config_overrides)``; closed after the test."""
    clients: list[LLMClient] = []

    def factory(
        srv: OpenAIServer, store: LLMCallStore | None = None, run_id: str | None = None, **overrides: object
    ) -> LLMClient:
        settings: dict[str, object] = {"max_retries": 0, **overrides}
        client = LLMClient(srv.config(**settings), store=store, run_id=run_id, sleep=lambda _: None)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()
