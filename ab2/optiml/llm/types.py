"""Values that cross the LLM layer's boundary: messages, requests, responses, call records, usage.

All are dataclasses; requests and messages are frozen so they can be hashed, cached and replayed.
None of them ever holds an API key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optiml.llm.errors import LLMResponseError

__all__ = ["CallRecord", "ChatMessage", "LLMRequest", "LLMResponse", "LLMUsage"]

ROLES = ("system", "user", "assistant")

# Bump when the meaning of a cache key changes, so old cached answers stop matching.
_KEY_VERSION = 1


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn. `role` is ``"system"``, ``"user"`` or ``"assistant"``."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"ChatMessage role must be one of {ROLES}, got {self.role!r}")

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class LLMRequest:
    """A provider-independent chat request for `n` samples.

    `purpose` is a free-form label for accounting (e.g. ``"propose.tiling"``); it is not part of
    the cache key, since it does not change the answer.
    """

    messages: tuple[ChatMessage, ...]
    model: str
    temperature: float
    max_tokens: int
    n: int = 1
    purpose: str = ""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"LLMRequest.n must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ValueError(f"LLMRequest.max_tokens must be >= 1, got {self.max_tokens}")
        if not self.messages:
            raise ValueError("LLMRequest needs at least one message")

    def cache_key(self, provider: str, base_url: str) -> str:
        """A stable sha256 hex digest of everything that determines the answer.

        Covers provider, base URL, model, messages, temperature, max_tokens and n; never an API
        key (the request holds none) and not `purpose`.
        """
        payload = {
            "v": _KEY_VERSION,
            "provider": provider,
            "base_url": base_url.rstrip("/"),
            "model": self.model,
            "messages": [m.to_dict() for m in self.messages],
            "temperature": float(self.temperature),
            "max_tokens": int(self.max_tokens),
            "n": int(self.n),
        }
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def to_json(self) -> str:
        return json.dumps(
            {
                "messages": [m.to_dict() for m in self.messages],
                "model": self.model,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "n": self.n,
                "purpose": self.purpose,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> LLMRequest:
        data = json.loads(text)
        return cls(
            messages=tuple(ChatMessage(m["role"], m["content"]) for m in data["messages"]),
            model=data["model"],
            temperature=float(data["temperature"]),
            max_tokens=int(data["max_tokens"]),
            n=int(data["n"]),
            purpose=str(data.get("purpose", "")),
        )

    def with_n(self, n: int) -> LLMRequest:
        return LLMRequest(self.messages, self.model, self.temperature, self.max_tokens, n, self.purpose)


@dataclass
class LLMResponse:
    """The answer to one request: `texts` holds one string per sample (``len(texts) == n``).

    `finish_reasons` are normalised across providers: ``"stop"`` (natural end), ``"length"``
    (cut off by max_tokens), or the provider's own word for anything else.
    `cost_usd` is what this answer cost now: 0 for an answer served from the cache; in replay mode
    the recorded cost (so budgets replay the recorded run faithfully). `cached` is True for both.
    """

    texts: list[str]
    model: str
    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool
    finish_reasons: list[str]

    @property
    def text(self) -> str:
        """The first sample's text."""
        return self.texts[0] if self.texts else ""

    @property
    def truncated(self) -> bool:
        """True when any sample stopped because it hit max_tokens."""
        return "length" in self.finish_reasons

    def to_json(self) -> str:
        return json.dumps(
            {
                "texts": self.texts,
                "model": self.model,
                "provider": self.provider,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cost_usd": self.cost_usd,
                "latency_s": self.latency_s,
                "finish_reasons": self.finish_reasons,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str, *, cached: bool) -> LLMResponse:
        try:
            data: Mapping[str, Any] = json.loads(text)
            return cls(
                texts=[str(t) for t in data["texts"]],
                model=str(data["model"]),
                provider=str(data["provider"]),
                input_tokens=int(data["input_tokens"]),
                output_tokens=int(data["output_tokens"]),
                cost_usd=float(data["cost_usd"]),
                latency_s=float(data["latency_s"]),
                cached=cached,
                finish_reasons=[str(r) for r in data["finish_reasons"]],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise LLMResponseError(f"stored LLM response is unreadable: {exc}") from exc

    @classmethod
    def merge(cls, parts: Sequence[LLMResponse]) -> LLMResponse:
        """Join answers of several calls for the same request (used to top up n samples)."""
        if not parts:
            raise ValueError("LLMResponse.merge needs at least one part")
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        return cls(
            texts=[t for p in parts for t in p.texts],
            model=first.model,
            provider=first.provider,
            input_tokens=sum(p.input_tokens for p in parts),
            output_tokens=sum(p.output_tokens for p in parts),
            cost_usd=sum(p.cost_usd for p in parts),
            latency_s=sum(p.latency_s for p in parts),
            cached=all(p.cached for p in parts),
            finish_reasons=[r for p in parts for r in p.finish_reasons],
        )


@dataclass(frozen=True)
class CallRecord:
    """One answered request as persisted in the store (and counted in usage).

    `sample_index` tells apart repeated identical requests within a run (the k-th time a run asks
    the same sampled question it gets the k-th recorded answer); `cached` marks rows answered from
    the cache or a recording rather than the network.
    """

    key: str
    run_id: str | None
    provider: str
    purpose: str
    request: LLMRequest
    response: LLMResponse
    sample_index: int = 0
    created_at: str = ""
    id: int | None = None

    @property
    def model(self) -> str:
        return self.response.model or self.request.model

    @property
    def cached(self) -> bool:
        return self.response.cached


@dataclass(frozen=True)
class LLMUsage:
    """Totals over a client's lifetime (or a run in the store).

    `calls` counts answered `complete` requests, `cached_calls` those answered without the network,
    `api_calls` successful HTTP calls, `retries` failed attempts that were retried.
    """

    calls: int = 0
    cached_calls: int = 0
    api_calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    by_purpose: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
