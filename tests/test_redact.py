"""The secret redactor: environment values, registered config keys, secret assignments, key shapes."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pytest

from optiml.redact import REDACTED, redact, redact_value, register_secret
from optiml.values import EvalResult, EvalStatus


def test_values_of_secret_named_variables_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIML_LLM_API_KEY", "opaque-value-12345")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "another-opaque-987")
    monkeypatch.setenv("OPTIML_LLM_MODEL", "model-name-long")  # a setting, not a secret
    text = redact("crash: opaque-value-12345 | another-opaque-987 | model-name-long")
    assert "opaque-value" not in text and "another-opaque" not in text and "model-name-long" in text
    assert text.count(REDACTED) == 2


def test_registered_secrets_and_key_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    register_secret("config-file-key-000111")
    register_secret("short")  # too short to search for: left alone
    text = redact(
        "a config-file-key-000111 b sk-abcdefghijklmnopqrstuvwx c ghp_abcdefghijklmnopqrstuvwxyz0123 "
        "d AKIAABCDEFGHIJKLMNOP e Bearer abcdefghijklmnop g Authorization: Basic dXNlcjpwYXNzd29yZDEy f short"
    )
    for secret in ("config-file-key", "sk-abcdef", "ghp_", "AKIAABCD", "abcdefghijklmnop", "dXNlcjpw"):
        assert secret not in text, text
    assert text.endswith("f short")


def test_an_environment_dumped_from_elsewhere_keeps_names_not_values() -> None:
    dump = "PATH=/usr/bin\x00ANTHROPIC_API_KEY=unseen-value-42\x00DB_PASSWORD: hunter2hunter2"
    text = redact(dump, values=[])
    assert "unseen-value-42" not in text and "hunter2" not in text
    assert "ANTHROPIC_API_KEY=" + REDACTED in text and "PATH=/usr/bin" in text


@dataclass(frozen=True)
class _Inner:
    text: str


@dataclass
class _Outer:
    items: list[_Inner] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    count: int = 3


def test_nested_values_are_copied_redacted() -> None:
    value = _Outer([_Inner("key sk-abcdefghijklmnopqrstuvwx")], {"k": "TOKEN=abcdefgh1234567"})
    clean = redact_value(value, values=[])
    assert clean.items[0].text == f"key {REDACTED}" and clean.notes["k"] == f"TOKEN={REDACTED}"
    assert clean.count == 3 and value.items[0].text.startswith("key sk-")  # the original is untouched


def test_an_eval_result_keeps_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "canary-openai-555555")
    result = EvalResult(status=EvalStatus.CRASH, message="died: canary-openai-555555", warnings=["ok"])
    clean = redact_value(result)
    assert clean.status is EvalStatus.CRASH and "canary-openai" not in clean.message and clean.warnings == ["ok"]


def test_kernel_code_keeps_its_identifiers() -> None:
    """A prompt carries the kernel: ``key``/``tokens`` variables are code, not secrets."""
    code = "float key = x[blockIdx.x * blockDim.x];\nint tokens = blockDim.x * 4;\n#define KEY_MASK 0xffffffffu"
    assert redact(code, values=[]) == code


CANARY = "canary-Key-0123456789"
_ENV_DUMP = b"PATH=/usr/bin\x00OPTIML_LLM_API_KEY=" + CANARY.encode() + b"\x00HOME=/root"
_CHUNKS = [CANARY[i : i + 8] for i in range(len(CANARY) - 7)]  # every run of 8 characters of the canary


@pytest.mark.parametrize(
    ("name", "leak"),
    [
        ("reversed", CANARY[::-1]),
        ("list of characters", str(list(CANARY))),
        ("spaced out, upper case", " ".join(CANARY.upper())),
        ("hex", CANARY.encode().hex()),
        ("hex escapes", "".join(f"\\x{b:02X}" for b in CANARY.encode())),
        ("hex literals", ", ".join(f"0x{b:02x}" for b in CANARY.encode())),
        ("byte codes", str(list(CANARY.encode()))),
        *((f"base64 at offset {k}", base64.b64encode(bytes(k) + _ENV_DUMP).decode()) for k in range(3)),
        ("url-safe base64", base64.urlsafe_b64encode(b"\xff\xfe" + _ENV_DUMP).decode()),
    ],
)
def test_a_secret_encoded_to_slip_past_a_literal_search_is_redacted(name: str, leak: str) -> None:
    text = redact(f"crash: {leak}\n", values=[CANARY])
    assert REDACTED in text, name
    assert _recoverable(text) == [], f"{name}: {text}"


def _recoverable(text: str) -> list[str]:
    """Runs of 8 or more characters of the canary that a reader of ``text`` could still decode."""
    alnum = "".join(c for c in text if c.isalnum()).lower()
    found = [c for c in _CHUNKS if any(form in alnum for form in (c.lower(), c[::-1].lower(), c.encode().hex()))]
    for piece in text.removeprefix("crash: ").split(REDACTED):
        for skip in range(4):  # a piece after a redaction starts anywhere in a 4-character group
            decoded = _b64_lenient(piece, skip)
            if any(chunk.encode() in decoded for chunk in _CHUNKS):
                found.append(f"base64 piece {piece[:12]}")
    return found


def _b64_lenient(piece: str, skip: int) -> bytes:
    """What a reader decodes from a fragment of base64 text, starting ``skip`` characters in."""
    letters = "".join(c for c in piece.replace("-", "+").replace("_", "/") if c.isalnum() or c in "+/")[skip:]
    letters = letters[: len(letters) // 4 * 4]
    return base64.b64decode(letters) if letters else b""


def test_text_that_merely_shares_bytes_with_a_secret_stays() -> None:
    text = "int codes[] = {99, 97, 110}; unsigned m = 0x63; // cana ry key\nptxas info: 32 registers"
    assert redact(text, values=[CANARY]) == text
