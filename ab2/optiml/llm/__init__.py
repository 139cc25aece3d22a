"""The LLM layer: providers (OpenAI-compatible, Anthropic), retries, cost, cache, record/replay.

Typical use::

    from optiml.llm import ChatMessage, load_llm_config, make_client

    config = load_llm_config()                    # overrides > env > optiml.toml [llm] > defaults
    if config.is_configured:
        with make_client(config, store_path="runs/run.db", run_id="run-1") as llm:
            prompt = [ChatMessage("user", "Write a CUDA kernel for ...")]
            answer = llm.complete(prompt, n=4, purpose="generate")
            print(answer.texts, llm.usage.cost_usd)

Importing this package does not import the vendor SDKs; they load when a provider is built.
Scripted loopback servers for tests live in the test suite (``tests/llm_servers.py``).
"""

from __future__ import annotations

from pathlib import Path

from optiml.llm.client import LLMClient
from optiml.llm.config import LLMConfig, load_llm_config
from optiml.llm.errors import (
    LLMBudgetExceeded,
    LLMCancelled,
    LLMConfigError,
    LLMError,
    LLMReplayMiss,
    LLMRequestError,
    LLMResponseError,
    LLMTransientError,
    LLMUnavailable,
)
from optiml.llm.prices import ModelPrice, PriceTable
from optiml.llm.providers import AnthropicProvider, OpenAIProvider, Provider, make_provider
from optiml.llm.retry import Backoff
from optiml.llm.store import LLMCallStore
from optiml.llm.types import CallRecord, ChatMessage, LLMRequest, LLMResponse, LLMUsage

__all__ = [
    "AnthropicProvider",
    "Backoff",
    "CallRecord",
    "ChatMessage",
    "LLMBudgetExceeded",
    "LLMCallStore",
    "LLMCancelled",
    "LLMClient",
    "LLMConfig",
    "LLMConfigError",
    "LLMError",
    "LLMReplayMiss",
    "LLMRequest",
    "LLMRequestError",
    "LLMResponse",
    "LLMResponseError",
    "LLMTransientError",
    "LLMUnavailable",
    "LLMUsage",
    "ModelPrice",
    "OpenAIProvider",
    "PriceTable",
    "Provider",
    "load_llm_config",
    "make_client",
    "make_provider",
]


def make_client(config: LLMConfig, store_path: str | Path | None = None, run_id: str | None = None) -> LLMClient:
    """An `LLMClient` with its own `LLMCallStore` at `store_path` (closed with the client).

    `store_path` None means an in-memory store: the cache works within this process and nothing is
    persisted (so ``record`` / ``replay`` modes need a path). Raises `LLMConfigError` when the config
    is incomplete for its mode.
    """
    if store_path is None and config.mode != "live":
        raise LLMConfigError(f"LLM mode {config.mode!r} needs a store path (the run database)")
    store = LLMCallStore(":memory:" if store_path is None else store_path)
    try:
        return LLMClient(config, store=store, run_id=run_id, close_store=True)
    except BaseException:
        store.close()
        raise
