"""Exceptions raised by the LLM layer: one rooted hierarchy.

::

    LLMError (an OptimlError)     anything the LLM layer raises on purpose
    ├── LLMConfigError            no model / no API key / bad setting; the message says how to fix it
    ├── LLMBudgetExceeded         an LLM budget (budget_usd, budget_calls, budget_tokens) is spent
    │                             (also an optiml.errors.BudgetSpent, which the search handles)
    ├── LLMCancelled              the client was cancelled (Ctrl-C, shutdown) while a request waited
    ├── LLMReplayMiss             replay mode and no recorded answer for this request
    ├── LLMUnavailable            retries exhausted (rate limits, server errors, timeouts, connection)
    ├── LLMTransientError         one attempt failed in a way worth retrying (the client retries it)
    ├── LLMRequestError           the server refused the request (4xx other than 408/409/429); not retried
    └── LLMResponseError          the answer is malformed (not JSON, missing fields, no choices)

Callers outside this package normally handle `LLMError` (or the specific subclasses above);
`LLMTransientError` only escapes when a `Provider` is used directly without `LLMClient`.
Messages never contain API keys: everything built from a server's reply is passed through
`LLMConfig.redact` first.
"""

from __future__ import annotations

from optiml.errors import BudgetSpent, OptimlError

__all__ = [
    "LLMBudgetExceeded",
    "LLMCancelled",
    "LLMConfigError",
    "LLMError",
    "LLMReplayMiss",
    "LLMRequestError",
    "LLMResponseError",
    "LLMTransientError",
    "LLMUnavailable",
]


class LLMError(OptimlError):
    """Root of every exception the LLM layer raises on purpose (an :class:`OptimlError`, so the CLI
    reports it as one line)."""


class LLMConfigError(LLMError):
    """The LLM is not configured (or configured wrongly); the message says how to configure it."""


class LLMBudgetExceeded(LLMError, BudgetSpent):
    """An LLM budget is spent; no further (paid) calls are made.

    `limit` says which: ``"usd"``, ``"calls"`` or ``"tokens"``; `reason` is a short phrase for a
    run's stop reason (``"LLM call budget spent (40 calls)"``).
    """

    def __init__(
        self,
        message: str,
        *,
        spent_usd: float,
        budget_usd: float | None,
        limit: str = "usd",
        reason: str = "",
    ) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        self.budget_usd = budget_usd
        self.limit = limit
        self.reason = reason or message


class LLMCancelled(LLMError):
    """The client was cancelled (`LLMClient.cancel`, e.g. on Ctrl-C) while this request waited."""


class LLMReplayMiss(LLMError):
    """Replay mode found no recorded answer for a request (the run diverged from the recording)."""

    def __init__(self, message: str, *, key: str, sample_index: int) -> None:
        super().__init__(message)
        self.key = key
        self.sample_index = sample_index


class LLMUnavailable(LLMError):
    """Every attempt failed with a retryable error; the message names the failures and the count."""

    def __init__(self, message: str, *, attempts: int, kinds: tuple[str, ...]) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.kinds = kinds


class LLMTransientError(LLMError):
    """One attempt failed in a retryable way.

    `kind` is one of ``"rate_limit"``, ``"server_error"``, ``"timeout"``, ``"connection"``,
    ``"bad_body"`` (a 200 whose body is not JSON, e.g. cut off by a proxy).
    `retry_after_s` carries the server's Retry-After hint when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class LLMRequestError(LLMError):
    """The server refused the request (bad request, bad key, unknown model, …); retrying cannot help."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMResponseError(LLMError):
    """The server answered, but the answer is malformed or unusable."""
