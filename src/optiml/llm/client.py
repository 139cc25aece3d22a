"""`LLMClient`: retries, concurrency limit, response cache, record/replay, cost accounting, budget.

Threads are the one concurrency model: `complete` is thread-safe and blocking; `complete_many`
fans requests out over a thread pool. A semaphore bounds the HTTP calls in flight across *all*
threads using the client to ``config.concurrency`` (a thread sleeping before a retry holds no slot).

Modes (``config.mode``):

- ``live`` — answers come from the network; with a store, every answer is persisted and the cache
  is consulted first (``config.cache``). Every live run is therefore replayable.
- ``record`` — the same as live, but a store is required, so a recording cannot silently be lost.
- ``replay`` — answers come only from the store; the network is never touched (no provider is even
  built) and a request with no recorded answer raises `LLMReplayMiss`.

Cache and sampling: a request's identity is `LLMRequest.cache_key` plus a *sample index*, the
number of times this client has already asked the same question. The k-th identical request
gets the k-th recorded answer, so asking twice at temperature 0.7 still yields two samples, and a
re-run (or replay) of the same run sees exactly the answers of the recorded one. At temperature 0
the sample index is always 0: a repeated deterministic request is served from the cache.

Accounting: a network answer costs tokens × the model's price (`LLMConfig.price`: configured, or
the shipped price table); a cache hit costs 0; a replayed answer costs what it cost when recorded,
so a replayed run spends its budget exactly as the recorded run did. Budgets are checked before
every network call (and every replayed answer) and raise `LLMBudgetExceeded`: ``budget_usd``
(once spent >= budget; a call in flight may overshoot by its own cost), ``budget_tokens`` (the
same, in input + output tokens) and ``budget_calls`` (API calls; reserved before a call is sent,
so never overshot). A dollar budget for a model without a known price is refused at construction
(`LLMConfigError`) unless ``allow_unpriced``.

Failures: retryable errors (429, 408/409, 5xx, timeouts, connection errors, a body that is not
JSON) are retried ``config.max_retries`` times with exponential backoff and jitter, honouring
Retry-After (capped); then `LLMUnavailable` (or `LLMResponseError` if every attempt got a garbled
body). A refused connection or an unknown host fails at once, and no request outlives
``config.deadline_s`` (every attempt and back-off included). Other errors are raised at once.
Log lines never contain the API key.

Interrupts: each HTTP attempt runs in a daemon thread while the calling thread waits in short
steps, so Ctrl-C in the main thread is never held up by a silent server, and `cancel` (also done
by `close`) makes every waiting thread raise `LLMCancelled` within a fraction of a second: the
thread pools of `complete_many` and of the proposers can then be shut down at once. An abandoned
attempt's thread ends by itself when its socket times out (``timeout_s``).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from types import TracebackType
from typing import Literal, overload

from optiml.llm.config import LLMConfig, redact_url
from optiml.llm.errors import (
    LLMBudgetExceeded,
    LLMCancelled,
    LLMConfigError,
    LLMError,
    LLMReplayMiss,
    LLMResponseError,
    LLMTransientError,
    LLMUnavailable,
)
from optiml.llm.providers import Provider, make_provider
from optiml.llm.retry import Backoff
from optiml.llm.store import LLMCallStore
from optiml.llm.types import CallRecord, ChatMessage, LLMRequest, LLMResponse, LLMUsage

__all__ = ["LLMClient"]

log = logging.getLogger(__name__)

_Source = Literal["network", "cache", "replay"]

_KIND_WORDS = {
    "rate_limit": "rate limited",
    "server_error": "server error",
    "timeout": "timed out",
    "connection": "connection failed",
    "bad_body": "garbled body",
    "deadline": "no answer by the deadline",
}
_POLL_S = 0.05  # how often a waiting thread looks at the cancel flag and the deadline


class LLMClient:
    """The one way the rest of OptiML talks to an LLM. See the module docstring for the semantics.

    `sleep` and `rng` are injectable so tests run retries instantly and deterministically.
    `provider` replaces the one built from `config` (tests, custom transports). With `close_store`,
    `close` closes the store too.
    """

    def __init__(
        self,
        config: LLMConfig,
        store: LLMCallStore | None = None,
        run_id: str | None = None,
        provider: Provider | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        backoff: Backoff | None = None,
        close_store: bool = False,
    ) -> None:
        if config.mode in ("record", "replay") and store is None:
            raise LLMConfigError(
                f"LLM mode {config.mode!r} needs a store: pass store= or use make_client(store_path=...)"
            )
        if config.budget_usd is not None and not config.prices_known and config.mode != "replay":
            if not config.allow_unpriced:
                raise LLMConfigError(config.unpriced_budget_message())
            log.warning(
                "LLM budget_usd=%s cannot bind: no price is known for model %r (allow_unpriced is set)",
                config.budget_usd,
                config.model,
            )
        if config.mode == "replay":
            if not config.model:
                raise LLMConfigError("LLM replay needs the recorded run's model: set OPTIML_LLM_MODEL or [llm] model")
            provider = None  # replay never touches the network
        elif provider is None:
            provider = make_provider(config)
        self.config = config
        self.store = store
        self.run_id = run_id
        self._provider = provider
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff or Backoff()
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._samples_asked: Counter[str] = Counter()
        self._close_store = close_store
        # usage counters (guarded by _lock)
        self._calls = 0
        self._cached_calls = 0
        self._api_calls = 0
        self._retries = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = 0.0
        self._cost_by_purpose: defaultdict[str, float] = defaultdict(float)
        self._spent_calls = 0  # API calls and replayed answers: what budget_calls counts
        self._spent_tokens = 0  # their input + output tokens: what budget_tokens counts
        self._reserved_calls = 0  # API calls sent and not yet answered
        self._cap_calls: int | None = None  # limits set at run time (`cap`), besides the config's budgets
        self._cap_tokens: int | None = None

    # -- public API ------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        n: int = 1,
        purpose: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """Answer one conversation with `n` samples (``len(response.texts) == n``)."""
        request = LLMRequest(
            messages=tuple(messages),
            model=self.config.model or "",
            temperature=self.config.temperature if temperature is None else temperature,
            max_tokens=self.config.max_tokens if max_tokens is None else max_tokens,
            n=n,
            purpose=purpose,
        )
        self._check_cancelled()
        deadline = time.monotonic() + self.config.deadline_s
        key = request.cache_key(self.config.provider, self.config.effective_base_url)
        sample_index = self._next_sample_index(key, request.temperature)

        source: _Source
        try:
            if self.config.mode == "replay":
                response, source = self._replay(request, key, sample_index), "replay"
            else:
                hit = self._from_cache(key, sample_index)
                response, source = (hit, "cache") if hit is not None else (self._fetch(request, deadline), "network")
        except BaseException:
            self._release_sample_index(key, sample_index)
            raise
        self._account_answer(request, response, source)
        self._persist(request, response, key, sample_index)
        log.debug(
            "llm %s purpose=%s model=%s n=%d tokens=%d+%d cost=$%.5f latency=%.2fs cached=%s",
            self.config.provider, purpose, response.model, n, response.input_tokens, response.output_tokens,
            response.cost_usd, response.latency_s, response.cached,
        )  # fmt: skip
        return response

    @overload
    def complete_many(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        n: int = ...,
        purpose: str = ...,
        temperature: float | None = ...,
        max_tokens: int | None = ...,
        return_exceptions: Literal[False] = ...,
    ) -> list[LLMResponse]: ...

    @overload
    def complete_many(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        n: int = ...,
        purpose: str = ...,
        temperature: float | None = ...,
        max_tokens: int | None = ...,
        return_exceptions: Literal[True],
    ) -> list[LLMResponse | LLMError]: ...

    def complete_many(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        n: int = 1,
        purpose: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
        return_exceptions: bool = False,
    ) -> list[LLMResponse] | list[LLMResponse | LLMError]:
        """Answer several conversations concurrently (at most ``config.concurrency`` at once), in order.

        With ``return_exceptions=False`` the first `LLMError` cancels requests not yet started and is
        raised once the running ones finish; with True, each failed slot holds its `LLMError`.
        An interrupt (Ctrl-C) while waiting cancels the client (see `cancel`) and is re-raised at once.
        """
        if not conversations:
            return []
        workers = min(self.config.concurrency, len(conversations))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="optiml-llm")
        try:
            futures: list[Future[LLMResponse]] = [
                pool.submit(self.complete, conv, n=n, purpose=purpose, temperature=temperature, max_tokens=max_tokens)
                for conv in conversations
            ]
            if not return_exceptions:
                wait(futures, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.cancel()
                return [f.result() for f in futures]
            wait(futures)
        except BaseException as interrupt:
            if not isinstance(interrupt, Exception):  # KeyboardInterrupt, SystemExit: stop everything now
                self.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        results: list[LLMResponse | LLMError] = []
        for f in futures:
            exc = f.exception()
            if exc is None:
                results.append(f.result())
            elif isinstance(exc, LLMError):
                results.append(exc)
            else:
                raise exc
        return results

    @property
    def usage(self) -> LLMUsage:
        """A snapshot of this client's totals (calls, tokens, cost, retries)."""
        with self._lock:
            return LLMUsage(
                calls=self._calls,
                cached_calls=self._cached_calls,
                api_calls=self._api_calls,
                retries=self._retries,
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cost_usd=self._cost,
                by_purpose=dict(self._cost_by_purpose),
            )

    @property
    def spent(self) -> tuple[int, int]:
        """(API calls, input + output tokens) as the call and token budgets count them: network calls
        and replayed answers; cache hits are free."""
        with self._lock:
            return self._spent_calls, self._spent_tokens

    def cap(self, *, calls: int | None = None, tokens: int | None = None) -> None:
        """Also stop at ``calls`` API calls / ``tokens`` tokens, counted as `spent` counts them (a search
        with call or token budgets sets what is left of them). None lifts a cap; the config's
        ``budget_calls`` / ``budget_tokens`` still apply."""
        with self._lock:
            self._cap_calls, self._cap_tokens = calls, tokens

    def cancel(self) -> None:
        """Make every request waiting on this client raise `LLMCancelled`, now and from now on.

        Requests waiting for an answer, a concurrency slot or a retry notice within ~50 ms; an HTTP
        attempt already sent is abandoned (its daemon thread ends when the socket times out).
        Used on Ctrl-C and by `close`; a cancelled client stays cancelled.
        """
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def budget_left_usd(self) -> float | None:
        """USD left before the budget stops calls (None: no budget)."""
        if self.config.budget_usd is None:
            return None
        with self._lock:
            return max(self.config.budget_usd - self._cost, 0.0)

    def close(self) -> None:
        """Cancel what still waits, close the provider's HTTP client (and the store, if `make_client`
        opened it)."""
        self.cancel()
        if self._provider is not None:
            self._provider.close()
        if self._close_store and self.store is not None:
            self.store.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- cache and replay ------------------------------------------------------------------------

    def _next_sample_index(self, key: str, temperature: float) -> int:
        if temperature == 0:
            return 0
        with self._lock:
            index = self._samples_asked[key]
            self._samples_asked[key] += 1
        return index

    def _release_sample_index(self, key: str, index: int) -> None:
        """A failed request gives its sample index back, so asking again reuses it (if still the last)."""
        with self._lock:
            if self._samples_asked[key] == index + 1:
                self._samples_asked[key] = index

    def _from_cache(self, key: str, sample_index: int) -> LLMResponse | None:
        if not self.config.cache or self.store is None:
            return None
        start = time.monotonic()
        hit = self.store.lookup(key, sample_index)
        if hit is None:
            return None
        return replace(hit, cached=True, cost_usd=0.0, latency_s=time.monotonic() - start)

    def _replay(self, request: LLMRequest, key: str, sample_index: int) -> LLMResponse:
        assert self.store is not None
        hit = self.store.lookup(key, sample_index)
        if hit is None:
            raise LLMReplayMiss(
                f"Replay has no recorded answer for this request (purpose {request.purpose!r}, model "
                f"{request.model!r}, sample {sample_index}, key {key[:12]}): the run diverged from the "
                "recording; run again with mode=record to record it",
                key=key,
                sample_index=sample_index,
            )
        self._check_budget()
        return replace(hit, cached=True)

    def _persist(self, request: LLMRequest, response: LLMResponse, key: str, sample_index: int) -> None:
        if self.store is None:
            return
        self.store.record(
            CallRecord(
                key=key,
                run_id=self.run_id,
                provider=self.config.provider,
                purpose=request.purpose,
                request=request,
                response=response,
                sample_index=sample_index,
            )
        )

    # -- network ---------------------------------------------------------------------------------

    def _fetch(self, request: LLMRequest, deadline: float) -> LLMResponse:
        """All `n` samples, topping up when the provider returns fewer than asked."""
        parts: list[LLMResponse] = []
        missing = request.n
        while missing > 0:
            part = self._attempt(request.with_n(missing), deadline)
            if not part.texts:
                raise LLMResponseError(f"{self._where()}: answer has no samples")
            if len(part.texts) > missing:
                part = replace(part, texts=part.texts[:missing], finish_reasons=part.finish_reasons[:missing])
            parts.append(part)
            missing -= len(part.texts)
        return LLMResponse.merge(parts)

    def _attempt(self, request: LLMRequest, deadline: float) -> LLMResponse:
        """One provider call, retried on transient errors, within the request's deadline."""
        assert self._provider is not None
        failures: list[LLMTransientError] = []
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            self._check_cancelled()
            self._check_budget()
            self._reserve_call()
            try:
                response = self._call_provider(request, deadline)
            except LLMTransientError as exc:
                self._release_call()
                if exc.kind == "refused":  # nobody listens there, or the host does not exist
                    raise LLMUnavailable(
                        f"LLM unavailable: {self.config.redact(str(exc))}: is the server running and is the "
                        "base URL right (--llm-base-url, OPTIML_LLM_BASE_URL)?",
                        attempts=attempt,
                        kinds=(exc.kind,),
                    ) from None
                failures.append(exc)
                if exc.kind == "deadline":
                    raise self._give_up(failures, deadline=True) from None
                if attempt == attempts:
                    break
                delay = self._backoff.delay(attempt, exc.retry_after_s, self._rng)
                if time.monotonic() + delay >= deadline:  # the retry would start too late
                    raise self._give_up(failures, deadline=True) from None
                with self._lock:
                    self._retries += 1
                log.warning(
                    "%s; retry %d of at most %d in %.1f s",
                    self.config.redact(str(exc)),
                    attempt,
                    attempt - 1 + self._retries_left(attempts - attempt, deadline - time.monotonic() - delay),
                    delay,
                )
                self._pause(delay)
                continue
            except BaseException:
                self._release_call()
                raise
            self._account_api_call(response)
            return response
        raise self._give_up(failures)

    def _retries_left(self, allowed: int, seconds: float) -> int:
        """How many of ``allowed`` retries can still start in ``seconds`` before the request's deadline, each
        attempt taking up to ``timeout_s`` (the one about to start is counted: at least 1)."""
        return max(1, min(allowed, math.ceil(seconds / self.config.timeout_s)))

    def _call_provider(self, request: LLMRequest, deadline: float) -> LLMResponse:
        """`provider.complete` in a daemon thread; the caller waits in short steps for the answer,
        the cancel flag and the deadline (an abandoned attempt's thread is left to its socket timeout)."""
        provider = self._provider
        assert provider is not None
        self._wait_for(lambda: self._slots.acquire(timeout=_POLL_S), deadline)
        try:
            done = threading.Event()
            box: dict[str, object] = {}

            def run() -> None:
                try:
                    box["response"] = provider.complete(request)
                except BaseException as exc:  # handed to the waiting thread
                    box["error"] = exc
                finally:
                    done.set()

            threading.Thread(target=run, name="optiml-llm-http", daemon=True).start()
            self._wait_for(lambda: done.wait(_POLL_S), deadline)
        finally:
            self._slots.release()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        response = box["response"]
        assert isinstance(response, LLMResponse)
        return response

    def _wait_for(self, ready: Callable[[], bool], deadline: float) -> None:
        """Call ``ready`` (which blocks up to ``_POLL_S``) until it is true; cancel and deadline win."""
        while not ready():
            self._check_cancelled()
            if time.monotonic() >= deadline:
                raise self._deadline_error()

    def _deadline_error(self) -> LLMTransientError:
        return LLMTransientError(
            f"{self._where()}: no answer within the {self.config.deadline_s:g} s deadline", kind="deadline"
        )

    def _pause(self, seconds: float) -> None:
        """Wait before a retry; a cancel cuts the wait short."""
        if self._sleep is time.sleep:
            if self._cancelled.wait(seconds):
                self._check_cancelled()
            return
        self._sleep(seconds)
        self._check_cancelled()

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise LLMCancelled(f"LLM request to {self._where()} cancelled")

    def _give_up(self, failures: list[LLMTransientError], *, deadline: bool = False) -> LLMError:
        counts = Counter(_describe(f) for f in failures)
        summary = ", ".join(f"{count}× {what}" for what, count in counts.items())
        last = self.config.redact(str(failures[-1]))
        attempts = f"{len(failures)} attempt{'' if len(failures) == 1 else 's'}"
        kinds = tuple(f.kind for f in failures)
        if deadline:
            return LLMUnavailable(
                f"LLM unavailable: {self._where()}: no answer within the {self.config.deadline_s:g} s deadline "
                f"(deadline_s, OPTIML_LLM_DEADLINE_S); {attempts}: {summary}",
                attempts=len(failures),
                kinds=kinds,
            )
        if all(f.kind == "bad_body" for f in failures):
            return LLMResponseError(f"{self._where()} returned a malformed body on all {attempts}; last: {last}")
        return LLMUnavailable(
            f"LLM unavailable: {self._where()} failed {attempts} ({summary}); last: {last}",
            attempts=len(failures),
            kinds=kinds,
        )

    def _where(self) -> str:
        return f"{self.config.provider} at {redact_url(self.config.effective_base_url)}"

    # -- accounting ------------------------------------------------------------------------------

    def _check_budget(self) -> None:
        """`LLMBudgetExceeded` when the dollar or token budget is spent (calls: `_reserve_call`)."""
        config = self.config
        with self._lock:
            spent, calls, tokens = self._cost, self._spent_calls, self._spent_tokens
            token_limit = _least(config.budget_tokens, self._cap_tokens)
        if config.budget_usd is not None and spent >= config.budget_usd:
            raise LLMBudgetExceeded(
                f"LLM budget spent: ${spent:.4f} of ${config.budget_usd:.4f} after {calls} API calls; "
                "raise budget_usd (--budget-usd, OPTIML_LLM_BUDGET_USD) to continue",
                spent_usd=spent,
                budget_usd=config.budget_usd,
                limit="usd",
                reason=f"LLM cost budget spent (${config.budget_usd:g})",
            )
        if token_limit is not None and tokens >= token_limit:
            raise LLMBudgetExceeded(
                f"LLM token budget spent: {tokens} of {token_limit} tokens after {calls} API calls; "
                "raise budget_tokens (--max-llm-tokens, OPTIML_LLM_BUDGET_TOKENS) to continue",
                spent_usd=spent,
                budget_usd=config.budget_usd,
                limit="tokens",
                reason=f"LLM token budget spent ({token_limit} tokens)",
            )

    def _reserve_call(self) -> None:
        """Count an API call before it is sent, so concurrent requests never overshoot budget_calls."""
        with self._lock:
            limit = _least(self.config.budget_calls, self._cap_calls)
            if limit is not None and self._spent_calls + self._reserved_calls >= limit:
                spent = self._cost
            else:
                self._reserved_calls += 1
                return
        raise LLMBudgetExceeded(
            f"LLM call budget spent: {limit} API calls; raise budget_calls (--max-llm-calls, "
            "OPTIML_LLM_BUDGET_CALLS) to continue",
            spent_usd=spent,
            budget_usd=self.config.budget_usd,
            limit="calls",
            reason=f"LLM call budget spent ({limit} calls)",
        )

    def _release_call(self) -> None:
        with self._lock:
            self._reserved_calls -= 1

    def _account_api_call(self, response: LLMResponse) -> None:
        with self._lock:
            self._reserved_calls -= 1
            self._api_calls += 1
            self._spent_calls += 1
            self._spent_tokens += response.input_tokens + response.output_tokens
            self._cost += response.cost_usd  # counted at once, so the budget sees in-progress top-ups

    def _account_answer(self, request: LLMRequest, response: LLMResponse, source: _Source) -> None:
        """Count an answered request. Network cost was counted per API call; a cache hit is free."""
        with self._lock:
            self._calls += 1
            if source != "network":
                self._cached_calls += 1
            if source == "cache":
                return
            if source == "replay":
                self._cost += response.cost_usd
                self._spent_calls += 1
                self._spent_tokens += response.input_tokens + response.output_tokens
            self._input_tokens += response.input_tokens
            self._output_tokens += response.output_tokens
            self._cost_by_purpose[request.purpose] += response.cost_usd


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _describe(failure: LLMTransientError) -> str:
    words = _KIND_WORDS.get(failure.kind, failure.kind)
    return f"{words} (HTTP {failure.status_code})" if failure.status_code else words
