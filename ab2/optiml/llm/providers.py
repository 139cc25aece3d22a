"""Providers: one HTTP attempt against one LLM API, through the vendor's official SDK.

A `Provider` makes exactly one attempt (the SDKs' own retries are off: ``max_retries=0``) and
either returns an `LLMResponse` or raises:

- `LLMTransientError` — worth retrying: HTTP 429 (with its Retry-After), 408, 409, 5xx, timeouts,
  connection failures, and a 200 whose body is not JSON (a cut-off or garbled body is almost always
  a transport hiccup, so it is retried too). A connection that is refused or a host name that does
  not resolve is kind ``"refused"``: the server is down or the URL is wrong, and `LLMClient` gives up
  at once instead of retrying;
- `LLMRequestError` — the server refused the request (other 4xx: bad key, unknown model, …);
- `LLMResponseError` — the body is JSON but not a usable answer (no choices, wrong shape).

A provider may return *fewer* samples than ``request.n`` (at least one): OpenAI-compatible servers
that ignore ``n`` return one, and Anthropic's Messages API has no ``n`` at all. `LLMClient` asks
again for the rest, so each of those calls gets its own retries and a failure never repeats samples
already paid for. Error messages pass through `LLMConfig.redact`, so a server that echoes the key
cannot leak it; SDK exceptions are not chained (they hold the request, headers included).
"""

from __future__ import annotations

import inspect
import json
import socket
import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from optiml.llm.config import KEYLESS_PLACEHOLDER, LLMConfig, redact_url
from optiml.llm.errors import LLMError, LLMRequestError, LLMResponseError, LLMTransientError
from optiml.llm.retry import parse_retry_after
from optiml.llm.types import ChatMessage, LLMRequest, LLMResponse

if TYPE_CHECKING:
    import anthropic
    import openai

__all__ = ["AnthropicProvider", "OpenAIProvider", "Provider", "make_provider"]


@runtime_checkable
class Provider(Protocol):
    """One attempt at answering a request; see the module docstring for the error contract."""

    name: str

    def complete(self, request: LLMRequest) -> LLMResponse: ...

    def close(self) -> None: ...


def make_provider(config: LLMConfig) -> Provider:
    """The provider for `config.provider` (raises `LLMConfigError` if the config is incomplete)."""
    config.require_configured()
    if config.provider == "anthropic":
        return AnthropicProvider(config)
    return OpenAIProvider(config)


class OpenAIProvider:
    """Any OpenAI-compatible chat-completions server: OpenAI, vLLM, SGLang, Ollama, OpenRouter, DeepSeek…

    Sends ``max_completion_tokens`` to api.openai.com (its newer models reject ``max_tokens``) and
    ``max_tokens`` everywhere else (what vLLM, SGLang and Ollama all accept). ``n`` is sent only
    when above 1.
    """

    name = "openai"

    def __init__(self, config: LLMConfig) -> None:
        import openai

        self._sdk = openai
        self._config = config
        self._client: openai.OpenAI = openai.OpenAI(
            base_url=config.effective_base_url,
            api_key=config.api_key or KEYLESS_PLACEHOLDER,
            timeout=_timeout(openai, config),
            max_retries=0,
        )
        host = urlsplit(config.effective_base_url).hostname or ""
        self._max_tokens_param = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"

    def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [m.to_dict() for m in request.messages],
            "temperature": request.temperature,
            self._max_tokens_param: request.max_tokens,
        }
        if request.n > 1:
            kwargs["n"] = request.n
        start = time.monotonic()
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except Exception as exc:
            raise _translate(exc, self._sdk, self._config) from None
        latency = time.monotonic() - start
        try:
            choices = sorted(completion.choices or [], key=lambda c: c.index or 0)[: request.n]
            texts = [(c.message.content or "") if c.message is not None else "" for c in choices]
            finish = [_FINISH.get(c.finish_reason or "", c.finish_reason or "unknown") for c in choices]
            usage = completion.usage
            in_tokens = int(usage.prompt_tokens or 0) if usage is not None else 0
            out_tokens = int(usage.completion_tokens or 0) if usage is not None else 0
            model = str(completion.model or request.model)
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"{_where(self._config)}: unexpected answer shape ({exc})") from None
        if not texts:
            raise LLMResponseError(f"{_where(self._config)}: answer has no choices")
        return LLMResponse(
            texts=texts,
            model=model,
            provider=self.name,
            input_tokens=in_tokens,
            output_tokens=out_tokens,
            cost_usd=self._config.cost_usd(in_tokens, out_tokens),
            latency_s=latency,
            cached=False,
            finish_reasons=finish,
        )

    def close(self) -> None:
        self._client.close()


class AnthropicProvider:
    """Anthropic Messages API: system messages go to ``system``; one sample per call.

    ``temperature`` is sent when the installed SDK's ``messages.create`` accepts it (recent SDKs
    dropped the parameter; then the server's default sampling applies).
    """

    name = "anthropic"

    def __init__(self, config: LLMConfig) -> None:
        import anthropic

        self._sdk = anthropic
        self._config = config
        self._client: anthropic.Anthropic = anthropic.Anthropic(
            base_url=config.effective_base_url,
            api_key=config.api_key or KEYLESS_PLACEHOLDER,
            timeout=_timeout(anthropic, config),
            max_retries=0,
        )
        params = inspect.signature(self._client.messages.create).parameters
        self._send_temperature = "temperature" in params

    def complete(self, request: LLMRequest) -> LLMResponse:
        system, turns = _split_system(request.messages)
        if not turns:
            raise LLMRequestError("Anthropic needs at least one user message besides the system prompt")
        kwargs: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": turns}
        if system:
            kwargs["system"] = system
        if self._send_temperature:
            kwargs["temperature"] = request.temperature
        start = time.monotonic()
        try:
            message = self._client.messages.create(**kwargs)
        except Exception as exc:
            raise _translate(exc, self._sdk, self._config) from None
        latency = time.monotonic() - start
        try:
            blocks = message.content or []
            text = "".join(getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", None) == "text")
            stop = message.stop_reason or "unknown"
            usage = message.usage
            in_tokens = int(usage.input_tokens or 0) if usage is not None else 0
            out_tokens = int(usage.output_tokens or 0) if usage is not None else 0
            model = str(message.model or request.model)
        except (AttributeError, TypeError, ValueError) as exc:
            raise LLMResponseError(f"{_where(self._config)}: unexpected answer shape ({exc})") from None
        return LLMResponse(
            texts=[text],
            model=model,
            provider=self.name,
            input_tokens=in_tokens,
            output_tokens=out_tokens,
            cost_usd=self._config.cost_usd(in_tokens, out_tokens),
            latency_s=latency,
            cached=False,
            finish_reasons=[_FINISH.get(stop, stop)],
        )

    def close(self) -> None:
        self._client.close()


# Normalised finish reasons: "stop" (natural end) and "length" (hit max_tokens); others pass through.
_FINISH = {
    "stop": "stop",
    "length": "length",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}


def _split_system(messages: tuple[ChatMessage, ...]) -> tuple[str, list[dict[str, str]]]:
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns = [m.to_dict() for m in messages if m.role != "system"]
    return system, turns


def _timeout(sdk: Any, config: LLMConfig) -> Any:
    """The SDK's timeout: ``timeout_s`` to read, write and wait for a pooled connection, a shorter connect."""
    return sdk.Timeout(config.timeout_s, connect=min(config.connect_timeout_s, config.timeout_s))


def _refused(exc: BaseException) -> str | None:
    """What turned the connection attempt down ("connection refused", "host not found"), else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "host not found"
        cause = cause.__cause__ or cause.__context__
    return None


def _where(config: LLMConfig) -> str:
    return f"{config.provider} at {redact_url(config.effective_base_url)}"


def _translate(exc: Exception, sdk: Any, config: LLMConfig) -> LLMError:
    """Map an SDK exception (openai and anthropic share the names) to the typed errors above."""
    where = _where(config)
    if isinstance(exc, sdk.APITimeoutError):
        return LLMTransientError(f"{where}: timed out after {config.timeout_s:g} s", kind="timeout")
    if isinstance(exc, sdk.APIConnectionError):
        refused = _refused(exc)
        if refused is not None:
            return LLMTransientError(f"{where}: {refused}", kind="refused")
        cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "no answer"
        return LLMTransientError(f"{where}: connection failed ({cause})", kind="connection")
    if isinstance(exc, sdk.APIStatusError):
        return _translate_status(exc, where, config)
    if isinstance(exc, json.JSONDecodeError):
        return LLMTransientError(f"{where}: answer body is not valid JSON ({exc.msg})", kind="bad_body")
    if isinstance(exc, sdk.APIResponseValidationError):
        return LLMResponseError(f"{where}: answer does not match the API schema ({config.redact(str(exc))})")
    if isinstance(exc, sdk.APIError):
        return LLMResponseError(f"{where}: {config.redact(str(exc))}")
    raise exc


def _translate_status(exc: Any, where: str, config: LLMConfig) -> LLMError:
    status = int(exc.status_code)
    detail = config.redact(_error_detail(exc))
    headers = dict(exc.response.headers) if getattr(exc, "response", None) is not None else {}
    if status == 429:
        return LLMTransientError(
            f"{where}: rate limited (HTTP 429): {detail}",
            kind="rate_limit",
            status_code=status,
            retry_after_s=parse_retry_after(headers),
        )
    if status in (408, 409) or status >= 500:
        return LLMTransientError(
            f"{where}: server error (HTTP {status}): {detail}",
            kind="server_error",
            status_code=status,
            retry_after_s=parse_retry_after(headers),
        )
    if status in (401, 403):
        hint = "check OPTIML_LLM_API_KEY (or the variable named by api_key_env)"
        return LLMRequestError(f"{where} rejected the API key (HTTP {status}): {detail}; {hint}", status_code=status)
    if status == 404:
        hint = f"is model {config.model!r} served there, and is the base URL right?"
        return LLMRequestError(f"{where}: not found (HTTP 404): {detail}; {hint}", status_code=status)
    return LLMRequestError(f"{where} refused the request (HTTP {status}): {detail}", status_code=status)


def _error_detail(exc: Any) -> str:
    """The server's error message from either vendor's JSON error format, else the SDK's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            kind = inner.get("type")
            message = str(inner["message"])
            return f"{kind}: {message}"[:500] if kind else message[:500]
    return str(getattr(exc, "message", "") or exc)[:500]
