"""LLM settings: the `LLMConfig` dataclass and `load_llm_config`.

Precedence, highest first: explicit overrides (the CLI) > environment > the ``[llm]`` table of
``optiml.toml`` > defaults. Every field `f` has an environment variable ``OPTIML_LLM_<F>``
(e.g. ``OPTIML_LLM_MODEL``, ``OPTIML_LLM_BUDGET_USD``).

API key resolution, first hit wins:

1. ``api_key`` override, 2. ``OPTIML_LLM_API_KEY``, 3. the variable named by ``api_key_env``
   (e.g. ``api_key_env = "DEEPSEEK_API_KEY"`` in optiml.toml), 4. ``api_key`` in optiml.toml
   (works, but keep keys out of files), 5. the vendor's own ``OPENAI_API_KEY`` /
   ``ANTHROPIC_API_KEY`` — only when the base URL is that vendor's official endpoint, so a vendor's
   key is never sent to some other server.

Servers on loopback (localhost, 127.*, ::1: a local vLLM, SGLang or Ollama) need no key.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from optiml.config_file import DEFAULT_CONFIG, read_toml_section
from optiml.llm.errors import LLMConfigError

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass

__all__ = ["MODES", "PROVIDERS", "LLMConfig", "load_llm_config", "redact_url"]

PROVIDERS = ("openai", "anthropic")
MODES = ("live", "record", "replay")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
VENDOR_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENV_PREFIX = "OPTIML_LLM_"
# Sent to keyless local servers, which ignore it; the SDKs insist on some key.
KEYLESS_PLACEHOLDER = "no-key"

_HOW_TO = (
    "set OPTIML_LLM_MODEL and OPTIML_LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY), "
    "or an [llm] table with model = ... in optiml.toml; for a local server set "
    "OPTIML_LLM_BASE_URL=http://127.0.0.1:8000/v1 (no key needed)"
)


@dataclass(frozen=True)
class LLMConfig:
    """How to reach one LLM and how to spend on it. `repr` never shows the API key."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    temperature: float = 0.7
    max_tokens: int = 4096
    timeout_s: float = 120.0
    max_retries: int = 4
    concurrency: int = 4
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    budget_usd: float | None = None
    cache: bool = True
    mode: str = "live"

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise LLMConfigError(f"LLM provider must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")
        if self.mode not in MODES:
            raise LLMConfigError(f"LLM mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        for name in ("max_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise LLMConfigError(f"LLM {name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise LLMConfigError(f"LLM max_retries must be >= 0, got {self.max_retries}")
        for name in ("temperature", "timeout_s", "price_in_per_mtok", "price_out_per_mtok"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise LLMConfigError(f"LLM {name} must be a finite number >= 0, got {value}")
        if self.timeout_s == 0:
            raise LLMConfigError("LLM timeout_s must be > 0")
        if self.budget_usd is not None and (not math.isfinite(self.budget_usd) or self.budget_usd < 0):
            raise LLMConfigError(f"LLM budget_usd must be >= 0, got {self.budget_usd}")

    def __repr__(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr]
        parts.insert(3, f"api_key={'***' if self.api_key else None!r}")
        return f"LLMConfig({', '.join(parts)})"

    @property
    def effective_base_url(self) -> str:
        """The base URL requests go to (the vendor's default when none is set), without a trailing /."""
        return (self.base_url or DEFAULT_BASE_URLS[self.provider]).rstrip("/")

    @property
    def is_local(self) -> bool:
        """True when the server is on loopback (a local vLLM / SGLang / Ollama that needs no key)."""
        host = (urlsplit(self.effective_base_url).hostname or "").lower()
        return host in ("localhost", "::1") or host.startswith("127.")

    @property
    def is_configured(self) -> bool:
        """A model is set and either a key is available or the server is a keyless local one."""
        if not self.model:
            return False
        return bool(self.api_key) or self.is_local or self.mode == "replay"

    def require_configured(self) -> None:
        """Raise `LLMConfigError` with a one-line how-to unless `is_configured`."""
        if not self.model:
            raise LLMConfigError(f"No LLM model configured: {_HOW_TO}.")
        if not self.is_configured:
            where = redact_url(self.effective_base_url)
            raise LLMConfigError(
                f"No API key for {self.provider} model {self.model!r} at {where}: set OPTIML_LLM_API_KEY "
                "(or api_key_env = NAME_OF_VARIABLE in the [llm] table of optiml.toml)."
            )

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """Price of a call in USD (0 when the prices are unknown)."""
        return (input_tokens * self.price_in_per_mtok + output_tokens * self.price_out_per_mtok) / 1e6

    @property
    def prices_known(self) -> bool:
        return self.price_in_per_mtok > 0 or self.price_out_per_mtok > 0

    def redact(self, text: str) -> str:
        """`text` with the API key (if any) replaced by ``***``."""
        if self.api_key and len(self.api_key) >= 4:
            text = text.replace(self.api_key, "***")
        return text


def redact_url(url: str) -> str:
    """A URL without user info, query or fragment (which may carry credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ---------------------------------------------------------------------------------------------------
# loading


_FIELDS = {f.name: f for f in dataclasses.fields(LLMConfig)}
_FLOATS = {"temperature", "timeout_s", "price_in_per_mtok", "price_out_per_mtok"}
_INTS = {"max_tokens", "max_retries", "concurrency"}
_OPTIONAL_STRS = {"model", "base_url", "api_key", "api_key_env"}


def load_llm_config(
    toml_path: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
) -> LLMConfig:
    """Build an `LLMConfig` from overrides > environment > optiml.toml ``[llm]`` > defaults.

    `toml_path` None means ``./optiml.toml`` if it exists; `env` None means ``os.environ``.
    Overrides whose value is None are ignored (unset CLI options). Raises `LLMConfigError` for an
    unknown key, a value of the wrong type, or an unreadable TOML file; does *not* require the
    config to be complete (see `LLMConfig.require_configured`).
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    layers: list[tuple[str, dict[str, Any]]] = []  # lowest precedence first

    table = read_toml_section(
        toml_path if toml_path is not None else DEFAULT_CONFIG,
        "llm",
        required=toml_path is not None,
        error=LLMConfigError,
    )
    layers.append((f"{toml_path or 'optiml.toml'} [llm]", table))
    env_layer = {name: environ[ENV_PREFIX + name.upper()] for name in _FIELDS if environ.get(ENV_PREFIX + name.upper())}
    layers.append(("environment", env_layer))
    layers.append(("overrides", {k: v for k, v in (overrides or {}).items() if v is not None}))

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in layers:
        for key, raw in layer.items():
            if key not in _FIELDS:
                known = ", ".join(sorted(_FIELDS))
                raise LLMConfigError(f"Unknown LLM setting {key!r} in {source}; known settings: {known}")
            merged[key] = _coerce(key, raw, source)
            sources[key] = source

    if sources.get("api_key") != "overrides" and not environ.get(ENV_PREFIX + "API_KEY"):
        merged["api_key"] = _fallback_key(merged, environ)
    return LLMConfig(**merged)


def _fallback_key(merged: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """Key from api_key_env, then toml api_key, then the vendor's own variable for its own endpoint."""
    key_env = merged.get("api_key_env")
    if key_env and environ.get(key_env):
        return environ[key_env]
    if merged.get("api_key"):
        return str(merged["api_key"])
    provider = merged.get("provider", "openai")
    base_url = merged.get("base_url")
    if provider in VENDOR_KEY_ENV and _is_vendor_endpoint(provider, base_url):
        return environ.get(VENDOR_KEY_ENV[provider]) or None
    return None


def _is_vendor_endpoint(provider: str, base_url: str | None) -> bool:
    if not base_url:
        return True
    host = urlsplit(base_url).hostname or ""
    official = urlsplit(DEFAULT_BASE_URLS[provider]).hostname
    return host == official


def _coerce(key: str, raw: object, source: str) -> Any:
    """Turn a raw value (TOML value, env string, CLI value) into the field's type."""
    where = f"{source}: LLM setting {key}"
    if key in _FLOATS or key == "budget_usd":
        if key == "budget_usd" and (raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none"))):
            return None
        if isinstance(raw, bool):
            raise LLMConfigError(f"{where} must be a number, got {raw!r}")
        try:
            return float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise LLMConfigError(f"{where} must be a number, got {raw!r}") from None
    if key in _INTS:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise LLMConfigError(f"{where} must be an integer, got {raw!r}")
        try:
            return int(raw)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise LLMConfigError(f"{where} must be an integer, got {raw!r}") from None
    if key == "cache":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise LLMConfigError(f"{where} must be true or false, got {raw!r}")
    if not isinstance(raw, str):
        shown = "a non-string value" if key == "api_key" else repr(raw)
        raise LLMConfigError(f"{where} must be a string, got {shown}")
    value = raw.strip()
    if key in _OPTIONAL_STRS:
        return value or None
    return value.lower()
