"""Secrets out of text that a candidate could have shaped, before it is printed, stored or prompted.

A candidate's host code, its compiler output and its crash messages are untrusted text, and a
candidate that reaches any secret (an environment, a config file, another process) would try to
carry it out through exactly that text: a crash message the CLI prints, the run store keeps, a
report shows and the next LLM prompt sends to a provider. So every such text passes
:func:`redact` on its way into the orchestrator (``Evaluator``), the run store and a prompt.

What is replaced by ``[redacted]``:

* the *values* of secret-looking environment variables (:data:`SECRET_NAME`: ``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``OPTIML_LLM_*``, ``OPENAI_*``, …) of this process, and
  any value given to :func:`register_secret` (an ``api_key`` read from ``optiml.toml``);
* ``NAME=value`` pairs whose name looks secret — upper case, as in an environment dumped from
  another process, whose values this process never saw, or a config key such as ``api_key`` — and
  whose value has 12 characters or more (kernel code such as ``float key = x[i];`` stays);
* well-known key shapes: ``sk-…`` (OpenAI, Anthropic, DeepSeek …), ``ghp_``/``github_pat_``,
  ``AKIA…`` (AWS), ``hf_…``, ``xox?-…`` (Slack), ``AIza…`` (Google), ``Bearer …`` and ``Basic …``
  credentials.

Each secret value is also searched for in the encodings a candidate would reach for to slip it past a
literal search (:func:`_encoded_forms`): reversed, spelled out with up to four separators between its
characters in any case (``list(key)`` printed, ``s k - …``), as hex (``736b2d…``, ``\\x73\\x6b``,
``0x73, 0x6b``), as decimal byte codes (``115, 107, 45``) and as base64 (standard or URL-safe, at any
offset in a longer encoded text such as a base64 dump of a whole ``environ``). That list cannot be
complete — a candidate holding a secret can always encrypt it — so the defence is that no candidate
reaches one (the sandbox, [integrity](../../docs/integrity.md)); this is the second line.

Values shorter than :data:`MIN_SECRET_CHARS` are not searched for (``1`` or ``true`` would
redact half of every message). Standard library only: every layer imports this module.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

#: Environment variable names that hold secrets (the sandbox drops these from every child's environment).
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT"
    r"|^(AWS|GCP|GOOGLE|AZURE|HF|HUGGINGFACE|OPENAI|ANTHROPIC|OPTIML_LLM|GITHUB|GH|GITLAB|SSH)_",
    re.IGNORECASE,
)
#: Secret-looking settings that are not secrets (model names, URLs, budgets): their values stay.
_NOT_SECRET = re.compile(
    r"^OPTIML_LLM_(MODEL|PROVIDER|BASE_URL|MODE|BUDGET_USD|PRICE_\w+|PRICES_FILE|API_KEY_ENV|TIMEOUT\w*|\w*_S)$",
    re.IGNORECASE,
)
#: ``NAME=value`` / ``"name": "value"`` with a secret-looking name: environment style (upper case, as in a
#: dumped ``environ``) or a config key (``api_key``, ``access_token``, ``password``, ``secret``); code
#: such as ``float key = x[i];`` keeps its lower-case identifiers, and values are at least 12 characters
_ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSW(?:OR)?D?|CREDENTIAL|AUTH[A-Z]*)[A-Z0-9_]*"
    r"|\b(?i:api[_-]?key|access[_-]?token|auth[_-]?token|authorization|secret|password|passwd))"
    r"(?P<sep>['\"]?\s*[=:]\s*['\"]?)(?P<value>[^\s'\",;|\x00]{12,})",
)
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=-]{12,}|(?<=Basic )[A-Za-z0-9+/=]{12,}",
)

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (e.g. an API key read from a config file, not the environment)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _registered.add(value)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to search for: secret-named variables of ``environ`` (default: this process's) and
    registered secrets, longest first (so a key that contains another is replaced whole)."""
    environ = os.environ if environ is None else environ
    found = {
        value
        for name, value in environ.items()
        if SECRET_NAME.search(name) and not _NOT_SECRET.match(name) and len(value) >= MIN_SECRET_CHARS
    }
    with _lock:
        found |= _registered
    return sorted(found, key=len, reverse=True)


def redact(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every secret value, secret assignment and key-shaped token replaced."""
    if not text:
        return text
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, REDACTED)
        if len(value) >= MIN_SECRET_CHARS:  # spelled out, a short value would match ordinary words
            text = _encoded_forms(value).sub(REDACTED, text)
    text = _ASSIGNMENT.sub(_keep_name, text)
    return _KEY_SHAPES.sub(REDACTED, text)


#: what may stand between the characters (or byte codes) of a spelled-out secret: quotes, commas, spaces, ``\\x``
_SEPARATOR = r"[^A-Za-z0-9]{0,4}"
#: between the bytes of a hex dump: as above, with a ``0x`` or ``\\x`` prefix on each byte
_HEX_SEPARATOR = r"[^A-Za-z0-9]{0,4}(?:0?x)?"


@functools.lru_cache(maxsize=256)
def _encoded_forms(value: str) -> re.Pattern[str]:
    """One pattern for ``value`` reversed, spelled out, as hex, as decimal byte codes and as base64."""
    raw = value.encode()
    spelled = _SEPARATOR.join(re.escape(c) for c in value)
    reversed_spelled = _SEPARATOR.join(re.escape(c) for c in reversed(value))
    hex_bytes = _HEX_SEPARATOR.join(f"{b:02x}" for b in raw)
    decimal = r"(?<![0-9])" + r"[^0-9]{1,4}".join(str(b) for b in raw) + r"(?![0-9])"
    cores = {core for alphabet in (b"+/", b"-_") for core in _base64_cores(raw, alphabet)}
    forms = [f"(?i:{spelled})", f"(?i:{reversed_spelled})", f"(?i:{hex_bytes})", decimal]
    forms += [re.escape(core) for core in sorted(cores, key=len, reverse=True)]
    return re.compile("|".join(forms))


def _base64_cores(raw: bytes, alphabet: bytes) -> list[str]:
    """The characters of ``raw``'s base64 that depend on ``raw`` alone, for each of the three offsets (mod 3)
    it can start at inside a longer encoded text; cores shorter than :data:`MIN_SECRET_CHARS` are left out."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw, altchars=alphabet).decode()
        first = (0, 2, 3)[offset]  # the characters before it also hold the preceding bytes' bits
        last = 4 * ((offset + len(raw)) // 3)  # a final partial group also holds the following bytes' bits
        if last - first >= MIN_SECRET_CHARS:
            cores.append(encoded[first:last])
    return cores


def _keep_name(match: re.Match[str]) -> str:
    if match.group("value") == REDACTED or _NOT_SECRET.match(match.group("name")):
        return match.group(0)
    return f"{match.group('name')}{match.group('sep')}{REDACTED}"


T = TypeVar("T")


def redact_value(value: T, values: Iterable[str] | None = None) -> T:
    """A copy of ``value`` (strings, and dataclasses, dicts, lists and tuples of them, nested) with
    every string redacted; other values are returned as they are. Dataclasses are copied with
    :func:`dataclasses.replace`, so frozen ones work too."""
    found = secret_values() if values is None else list(values)
    return cast(T, _walk(value, found))


def _walk(value: Any, values: list[str]) -> Any:
    if isinstance(value, enum.Enum):  # a str-valued enum member stays a member
        return value
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return {_walk(k, values): _walk(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, values) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_walk(v, values) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: _walk(getattr(value, f.name), values)
            for f in dataclasses.fields(value)
            if f.init and _holds_text(getattr(value, f.name))
        }
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _holds_text(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        return False
    return isinstance(value, (str, dict, list, tuple)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )
