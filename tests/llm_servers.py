"""Scripted LLM servers on loopback, for tests: real HTTP, no network, standard library only.

`OpenAIServer` speaks OpenAI chat completions (``POST /v1/chat/completions``); `AnthropicServer`
speaks Anthropic Messages (``POST /v1/messages``). Each runs a ``ThreadingHTTPServer`` on
127.0.0.1 (port 0) in a background thread and answers from a FIFO *script* of replies; when the
script is empty it answers with a canned reply (``"reply <k>"`` for the k-th request, or
``"reply <k>.<i>"`` per sample when n > 1), so most tests need no script at all.

The real SDKs and `LLMClient` talk to them exactly as to the real services. This module serves
tests only, so it lives in tests/; every test folder imports it as ``llm_servers`` because pytest
puts tests/ on ``sys.path`` when it loads tests/conftest.py (its default "prepend" import mode)::

    import pytest
    from llm_servers import OpenAIServer, answer, error, garbled, slow

    from optiml.llm import LLMClient

    @pytest.fixture
    def openai_server():
        with OpenAIServer() as server:
            yield server

    def test_proposer(openai_server):
        openai_server.script(
            error(429, retry_after=1),                 # first request: rate limited
            answer("```cuda\\n...\\n```"),            # second: the text the proposer will parse
        )
        client = LLMClient(openai_server.config(), sleep=lambda s: None)
        ...
        assert openai_server.request_count == 2
        assert openai_server.requests[-1].messages[0]["role"] == "system"

Script items (all `Reply` values, or callables ``RecordedRequest -> Reply``):

- ``answer(*texts, finish_reason="stop", input_tokens=None, output_tokens=None)`` — a success;
  one text per sample (no texts: the canned reply, one per requested sample).
  ``finish_reason="length"`` renders as the protocol's "hit max_tokens".
- ``error(status, message="", retry_after=None, error_type=None)`` — an error in the protocol's
  own JSON format (Anthropic: ``{"type": "error", "error": {"type": "rate_limit_error", ...}}``);
  `retry_after` (seconds) becomes a ``Retry-After`` header.
- ``garbled()`` — status 200 with a body that is not JSON.
- ``truncated()`` — status 200 whose body stops short of its Content-Length (connection dropped).
- ``slow(delay_s, reply=None)`` — `reply` (default: canned answer) after sleeping `delay_s`;
  use a delay longer than the client's ``timeout_s`` to provoke a client timeout.

Inspection: ``server.requests`` (list of `RecordedRequest`, with ``.json``, ``.headers``,
``.messages``, ``.model``), ``server.request_count``, ``server.max_concurrent`` (most requests
in flight at once), ``server.reset()``. ``server.config(**overrides)`` gives an `LLMConfig`
pointing at the server (model ``"test-model"``, fast timeouts, prices 1 / 2 USD per Mtok).
``OpenAIServer(honour_n=False)`` mimics servers that ignore ``n > 1``; ``api_key="..."`` makes
the server reject any other key with 401. Canned replies report 100 input tokens and 20 output
tokens per sample.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from optiml.llm.config import LLMConfig

__all__ = [
    "AnthropicServer",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "ScriptedLLMServer",
    "answer",
    "error",
    "garbled",
    "slow",
    "truncated",
]

DEFAULT_INPUT_TOKENS = 100
DEFAULT_OUTPUT_TOKENS = 20  # per sample


@dataclass
class Reply:
    """One scripted reply; build it with `answer`, `error`, `garbled`, `truncated` or `slow`."""

    status: int = 200
    texts: tuple[str, ...] = ()
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_message: str = ""
    error_type: str | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    short_by: int = 0  # declare this many more body bytes than are sent, then drop the connection


Script = Reply | Callable[["RecordedRequest"], Reply]
_S = TypeVar("_S", bound="ScriptedLLMServer")


def answer(
    *texts: str,
    finish_reason: str = "stop",
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> Reply:
    """A successful reply with one text per sample (none: the canned reply)."""
    return Reply(texts=texts, finish_reason=finish_reason, input_tokens=input_tokens, output_tokens=output_tokens)


def error(status: int, message: str = "", *, retry_after: float | None = None, error_type: str | None = None) -> Reply:
    """An error reply in the protocol's JSON error format, optionally with a Retry-After header."""
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    text = message or f"scripted error {status}"
    return Reply(status=status, error_message=text, error_type=error_type, headers=headers)


def garbled() -> Reply:
    """Status 200 with a body that is not JSON."""
    return Reply(raw=b'{"id": "chatcmpl-garbled", "choices": [{"message": {"content": "half an ans')


def truncated() -> Reply:
    """Status 200 whose body is cut off before its declared Content-Length."""
    return Reply(raw=b'{"id": "cut-off", "choices": [', short_by=200)


def slow(delay_s: float, reply: Reply | None = None) -> Reply:
    """`reply` (default: the canned answer) sent after `delay_s` seconds."""
    base = reply if reply is not None else Reply()
    return Reply(**{**base.__dict__, "delay_s": delay_s})


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any
    index: int  # 1-based arrival order

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json.get("messages", [])) if isinstance(self.json, dict) else []

    @property
    def model(self) -> str | None:
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def n(self) -> int:
        return int(self.json.get("n", 1)) if isinstance(self.json, dict) else 1


class ScriptedLLMServer:
    """Base class: HTTP plumbing, the script queue and counters. Subclasses render the protocol."""

    provider: ClassVar[str]
    endpoint: ClassVar[str]
    url_suffix: ClassVar[str]

    def __init__(self, *, api_key: str | None = None, responder: Callable[[RecordedRequest], Reply] | None = None):
        self.api_key = api_key
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.max_concurrent = 0
        self._in_flight = 0
        self._script: deque[Script] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self: _S) -> _S:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            daemon=True,
            name=f"{type(self).__name__}:{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; later requests get 'connection refused'. Wakes replies still sleeping."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self: _S) -> _S:
        return self.start() if self._httpd is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The base URL an SDK client takes (OpenAI: ``.../v1``, Anthropic: the root)."""
        return f"http://127.0.0.1:{self.port}{self.url_suffix}"

    def config(self, **overrides: Any) -> LLMConfig:
        """An `LLMConfig` pointing at this server; keyword arguments override any field."""
        settings: dict[str, Any] = {
            "provider": self.provider,
            "model": "test-model",
            "base_url": self.base_url,
            "api_key": self.api_key or "sk-test-key",
            "timeout_s": 5.0,
            "max_retries": 3,
            "price_in_per_mtok": 1.0,
            "price_out_per_mtok": 2.0,
        }
        settings.update(overrides)
        return LLMConfig(**settings)

    # -- script and inspection -------------------------------------------------------------------

    def script(self, *replies: Script) -> None:
        """Queue replies; each request takes the next one, then canned replies when none are left."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        """Forget requests, counters and any unused script."""
        with self._lock:
            self.requests.clear()
            self._script.clear()
            self.max_concurrent = 0

    # -- protocol hooks --------------------------------------------------------------------------

    def check_auth(self, headers: Mapping[str, str]) -> bool:
        raise NotImplementedError

    def render_answer(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        raise NotImplementedError

    def render_error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def canned_texts(self, request: RecordedRequest) -> tuple[str, ...]:
        n = request.n
        if n == 1:
            return (f"reply {request.index}",)
        return tuple(f"reply {request.index}.{i}" for i in range(n))

    # -- request handling (runs on server threads) -------------------------------------------------

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            item = self._script.popleft() if self._script else None
        if item is None:
            return self.responder(request) if self.responder is not None else Reply()
        return item if isinstance(item, Reply) else item(request)

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in handler.headers.items()}
        with self._lock:
            request = RecordedRequest(method, handler.path, headers, raw, body, len(self.requests) + 1)
            self.requests.append(request)
            self._in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self._in_flight)
        try:
            self._respond(handler, method, request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired) while we were sleeping
        finally:
            with self._lock:
                self._in_flight -= 1

    def _respond(self, handler: BaseHTTPRequestHandler, method: str, request: RecordedRequest) -> None:
        path = request.path.split("?", 1)[0]
        if method != "POST" or path != self.endpoint:
            self._send_json(handler, 404, self.render_error(404, f"no route {method} {path}", None), {})
            return
        if not self.check_auth(request.headers):
            self._send_json(handler, 401, self.render_error(401, "invalid API key", None), {})
            return
        if not isinstance(request.json, dict):
            self._send_json(handler, 400, self.render_error(400, "body must be a JSON object", None), {})
            return
        reply = self._next_reply(request)
        if reply.delay_s > 0 and self._stopping.wait(reply.delay_s):
            return
        if reply.raw is not None:
            self._send_raw(handler, reply)
        elif reply.status >= 400:
            body = self.render_error(reply.status, reply.error_message, reply.error_type)
            self._send_json(handler, reply.status, body, reply.headers)
        else:
            self._send_json(handler, reply.status, self.render_answer(reply, request), reply.headers)

    @staticmethod
    def _send_json(
        handler: BaseHTTPRequestHandler, status: int, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _send_raw(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        data = reply.raw or b""
        handler.send_response(reply.status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data) + reply.short_by))
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            server._handle(self, "POST")

        def do_GET(self) -> None:
            server._handle(self, "GET")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


# ---------------------------------------------------------------------------------------------------
# protocols


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _tokens(reply: Reply, n_texts: int) -> tuple[int, int]:
    """(input, output) tokens: the scripted counts, else the canned 100 in / 20 out per sample."""
    tokens_in = reply.input_tokens if reply.input_tokens is not None else DEFAULT_INPUT_TOKENS
    tokens_out = reply.output_tokens if reply.output_tokens is not None else DEFAULT_OUTPUT_TOKENS * n_texts
    return tokens_in, tokens_out


class OpenAIServer(ScriptedLLMServer):
    """OpenAI chat completions: ``POST /v1/chat/completions``; point the SDK at `base_url` (…/v1)."""

    provider = "openai"
    endpoint = "/v1/chat/completions"
    url_suffix = "/v1"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        responder: Callable[[RecordedRequest], Reply] | None = None,
        honour_n: bool = True,
    ):
        super().__init__(api_key=api_key, responder=responder)
        self.honour_n = honour_n

    def check_auth(self, headers: Mapping[str, str]) -> bool:
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"

    def canned_texts(self, request: RecordedRequest) -> tuple[str, ...]:
        texts = super().canned_texts(request)
        return texts if self.honour_n else texts[:1]

    def render_answer(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        texts = reply.texts or self.canned_texts(request)
        finish = reply.finish_reason
        tokens_in, tokens_out = _tokens(reply, len(texts))
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": t},
                "finish_reason": finish,
                "logprobs": None,
            }
            for i, t in enumerate(texts)
        ]
        return {
            "id": f"chatcmpl-{request.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or "test-model",
            "choices": choices,
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }

    def render_error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        if error_type is None:
            error_type = {429: "rate_limit_exceeded"}.get(
                status, "server_error" if status >= 500 else "invalid_request_error"
            )
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


class AnthropicServer(ScriptedLLMServer):
    """Anthropic Messages: ``POST /v1/messages``; point the SDK at `base_url` (the root)."""

    provider = "anthropic"
    endpoint = "/v1/messages"
    url_suffix = ""

    def check_auth(self, headers: Mapping[str, str]) -> bool:
        if self.api_key is None:
            return True  # the SDK sends the key as x-api-key or as a bearer token, depending on version
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        return self.api_key in (headers.get("x-api-key"), bearer)

    def canned_texts(self, request: RecordedRequest) -> tuple[str, ...]:
        return (f"reply {request.index}",)  # Messages has no n: one sample per call

    def render_answer(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        texts = reply.texts or self.canned_texts(request)
        stop = {"stop": "end_turn", "length": "max_tokens"}.get(reply.finish_reason, reply.finish_reason)
        tokens_in, tokens_out = _tokens(reply, 1)
        return {
            "id": f"msg_{request.index}",
            "type": "message",
            "role": "assistant",
            "model": request.model or "test-model",
            "content": [{"type": "text", "text": t} for t in texts],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        }

    def render_error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        kind = error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
