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

Prices (USD per million tokens), first hit wins: ``price_in_per_mtok`` / ``price_out_per_mtok``
set anywhere above; the model's entry in the user's price tables (the ``[llm.prices]`` table of
optiml.toml, then the file named by ``OPTIML_LLM_PRICES_FILE``); the table shipped in the package
(``optiml/llm/prices.toml``, see `optiml.llm.prices`). A model found in none is *unpriced*: its
calls cost $0 in the accounts, and a ``budget_usd`` for it is refused unless ``allow_unpriced``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from optiml.config_file import DEFAULT_CONFIG, read_toml_section
from optiml.llm.errors import LLMConfigError
from optiml.llm.prices import PRICES_FILE_ENV, ModelPrice, PriceTable, load_price_table, shipped_prices

__all__ = ["MODES", "PROVIDERS", "LLMConfig", "configured_price_table", "load_llm_config", "redact_url"]

PROVIDERS = ("openai", "anthropic")
MODES = ("live", "record", "replay")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
VENDOR_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENV_PREFIX = "OPTIML_LLM_"
# Sent to keyless local servers, which ignore it; the SDKs insist on some key.
KEYLESS_PLACEHOLDER = "no-key"

_HOW_TO = (
    "set OPTIML_LLM_MODEL and OPTIML_LLM_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY), "
    "or an [llm] table with model = ... in optiml.toml; for a local server set the model too: "
    "OPTIML_LLM_BASE_URL=http://127.0.0.1:8000/v1 and OPTIML_LLM_MODEL=its model name (no key needed)"
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
    timeout_s: float = 120.0  # one HTTP attempt: the longest wait for an answer's bytes
    connect_timeout_s: float = 10.0  # one attempt's TCP/TLS connect
    deadline_s: float = 180.0  # one request, every attempt and back-off included; then LLMUnavailable
    max_retries: int = 4
    concurrency: int = 4
    price_in_per_mtok: float | None = None  # None: from the price tables (see the module docstring)
    price_out_per_mtok: float | None = None
    price_source: str = ""  # where explicit prices came from (shown in reports)
    budget_usd: float | None = None  # USD; refused for an unpriced model unless allow_unpriced
    budget_calls: int | None = None  # API calls (answers from the network; cache hits are free)
    budget_tokens: int | None = None  # input + output tokens of those calls
    allow_unpriced: bool = False
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
        for name in ("temperature", "timeout_s", "connect_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise LLMConfigError(f"LLM {name} must be a finite number >= 0, got {value}")
        for name in ("timeout_s", "connect_timeout_s", "deadline_s"):
            if getattr(self, name) == 0:
                raise LLMConfigError(f"LLM {name} must be > 0")
        for name in ("price_in_per_mtok", "price_out_per_mtok", "budget_usd"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise LLMConfigError(f"LLM {name} must be a finite number >= 0, got {value}")
        for name in ("budget_calls", "budget_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise LLMConfigError(f"LLM {name} must be >= 1, got {value}")

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

    @property
    def price(self) -> ModelPrice | None:
        """The model's price: explicit prices, else the shipped table's entry; None when unpriced."""
        if self.price_in_per_mtok is not None or self.price_out_per_mtok is not None:
            source = self.price_source or "configured"
            return ModelPrice(self.price_in_per_mtok or 0.0, self.price_out_per_mtok or 0.0, source)
        return shipped_prices().lookup(self.model)

    @property
    def prices_known(self) -> bool:
        return self.price is not None

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """Price of a call in USD (0 when the model is unpriced)."""
        price = self.price
        return price.cost_usd(input_tokens, output_tokens) if price is not None else 0.0

    def unpriced_budget_message(self) -> str:
        """Why a dollar budget cannot bind for this model, and the ways out (one line)."""
        return (
            f"the LLM budget of ${self.budget_usd:g} (--budget-usd / budget_usd) cannot be enforced: no price is "
            f"known for {self.provider} model {self.model!r}. Give its price (a [llm.prices] entry in optiml.toml, "
            "or OPTIML_LLM_PRICE_IN_PER_MTOK and OPTIML_LLM_PRICE_OUT_PER_MTOK), bound the run with --max-llm-calls "
            "/ --max-llm-tokens instead, or pass --allow-unpriced to run without a dollar limit"
        )

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
_FLOATS = {"temperature", "timeout_s", "connect_timeout_s", "deadline_s"}
_OPTIONAL_FLOATS = {"price_in_per_mtok", "price_out_per_mtok", "budget_usd"}
_INTS = {"max_tokens", "max_retries", "concurrency"}
_OPTIONAL_INTS = {"budget_calls", "budget_tokens"}
_BOOLS = {"cache", "allow_unpriced"}
_OPTIONAL_STRS = {"model", "base_url", "api_key", "api_key_env"}
_PRICES_KEY = "prices"  # the [llm.prices] sub-table: per-model prices, not a field


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

    When no price is set explicitly, the model's entry in the user's price tables (``[llm.prices]``,
    ``OPTIML_LLM_PRICES_FILE``) becomes its price; the shipped table is consulted lazily by
    `LLMConfig.price`.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    layers: list[tuple[str, dict[str, Any]]] = []  # lowest precedence first

    table = read_toml_section(
        toml_path if toml_path is not None else DEFAULT_CONFIG,
        "llm",
        required=toml_path is not None,
        error=LLMConfigError,
    )
    user_prices = table.pop(_PRICES_KEY, None)
    if user_prices is not None and not isinstance(user_prices, dict):
        raise LLMConfigError(
            f"{toml_path or 'optiml.toml'}: [llm.prices] must be a table of model = {{ input, output }}"
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
    explicit_price = merged.get("price_in_per_mtok") is not None or merged.get("price_out_per_mtok") is not None
    if not explicit_price and (user_prices or environ.get(PRICES_FILE_ENV)):
        price = user_price_table(user_prices, environ).lookup(merged.get("model"))
        if price is not None and price != shipped_prices().lookup(merged.get("model")):  # a user entry
            merged.update(
                price_in_per_mtok=price.input_per_mtok,
                price_out_per_mtok=price.output_per_mtok,
                price_source=price.source,
            )
    return LLMConfig(**merged)


def user_price_table(
    user_prices: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> PriceTable:
    """The price table with the user's prices on top (see `optiml.llm.prices.load_price_table`)."""
    return load_price_table(user_prices, os.environ if environ is None else environ)


def configured_price_table(toml_path: Path | None = None, env: Mapping[str, str] | None = None) -> PriceTable:
    """Shipped prices plus ``OPTIML_LLM_PRICES_FILE`` and the ``[llm.prices]`` table of optiml.toml
    (for reports on stored runs, whose calls carry model names but not the config)."""
    table = read_toml_section(
        toml_path if toml_path is not None else DEFAULT_CONFIG,
        "llm",
        required=toml_path is not None,
        error=LLMConfigError,
    )
    prices = table.get(_PRICES_KEY)
    return user_price_table(prices if isinstance(prices, dict) else None, env)


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
    if (key in _OPTIONAL_FLOATS or key in _OPTIONAL_INTS) and (
        raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none"))
    ):
        return None
    if key in _FLOATS or key in _OPTIONAL_FLOATS:
        if isinstance(raw, bool):
            raise LLMConfigError(f"{where} must be a number, got {raw!r}")
        try:
            return float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise LLMConfigError(f"{where} must be a number, got {raw!r}") from None
    if key in _INTS or key in _OPTIONAL_INTS:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise LLMConfigError(f"{where} must be an integer, got {raw!r}")
        try:
            return int(raw)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise LLMConfigError(f"{where} must be an integer, got {raw!r}") from None
    if key in _BOOLS:
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
