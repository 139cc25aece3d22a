"""Generation settings: :class:`GenerationConfig`, read from the ``[generate]`` table of optiml.toml.

::

    [generate]
    thoughts = ["direct", "memory_first", "tensor_cores"]   # which thoughts run, in this order
    thought_files = ["thoughts.toml"]                       # extra [[thought]] files (relative to optiml.toml)
    samples_per_thought = 1
    max_repairs = 2
    aggregate = true

    [[generate.thought]]                                    # thoughts may also be defined inline
    name = "tensor_cores"
    strategy = "..."

Precedence: explicit overrides (the CLI) > the TOML table > defaults. A bad value raises
:class:`~optiml.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from optiml.config_file import read_toml_section
from optiml.errors import ConfigError
from optiml.generate.errors import GenerationError
from optiml.generate.thoughts import Thought, load_thought_file, parse_thought, select_thoughts
from optiml.llm.config import LLMConfig
from optiml.llm.errors import LLMConfigError

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass


@dataclass(frozen=True)
class GenerationConfig:
    """How generation runs. The defaults cost at most 4 × 3 + 3 = 15 LLM calls for a root."""

    thoughts: tuple[str, ...] | None = None  # None: every built-in thought, then every extra one
    extra_thoughts: tuple[Thought, ...] = ()  # user-defined thoughts (from files or [[generate.thought]])
    samples_per_thought: int = 1  # independent answers per thought (`n` of the first request)
    max_repairs: int = 2  # repair rounds per failing candidate, with its compiler/verifier message
    aggregate: bool = True  # ask the model to combine the verified candidates (needs >= 2 of them)
    aggregate_max: int = 4  # most verified candidates shown to the aggregation step
    task_repairs: int = 2  # repair rounds when the model's KernelBench task does not run
    task_check_timeout_s: float = 300.0  # CPU check of a written task (smallest shape set)
    temperature: float | None = None  # None: the LLM config's temperature
    max_tokens: int | None = None  # None: the LLM config's max_tokens

    def __post_init__(self) -> None:
        for name in ("samples_per_thought", "aggregate_max"):
            if getattr(self, name) < 1:
                raise ConfigError(f"[generate] {name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_repairs", "task_repairs"):
            if getattr(self, name) < 0:
                raise ConfigError(f"[generate] {name} must be >= 0, got {getattr(self, name)}")
        if not math.isfinite(self.task_check_timeout_s) or self.task_check_timeout_s <= 0:
            raise ConfigError(f"[generate] task_check_timeout_s must be > 0, got {self.task_check_timeout_s}")
        if self.temperature is not None and (not math.isfinite(self.temperature) or self.temperature < 0):
            raise ConfigError(f"[generate] temperature must be >= 0, got {self.temperature}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"[generate] max_tokens must be >= 1, got {self.max_tokens}")
        select_thoughts(self.thoughts, self.extra_thoughts)  # unknown names fail now, not mid-run

    def selected_thoughts(self) -> tuple[Thought, ...]:
        return select_thoughts(self.thoughts, self.extra_thoughts)

    def to_json(self) -> str:
        data = asdict(self)
        data["thoughts"] = [t.name for t in self.selected_thoughts()]
        return json.dumps(data, sort_keys=True)


_INTS = {"samples_per_thought", "max_repairs", "aggregate_max", "task_repairs", "max_tokens"}
_FLOATS = {"task_check_timeout_s", "temperature"}
_KEYS = _INTS | _FLOATS | {"thoughts", "thought_files", "thought", "aggregate"}


def load_generation_config(
    toml_path: Path | None = None, overrides: Mapping[str, object] | None = None
) -> GenerationConfig:
    """Settings from overrides > ``[generate]`` in optiml.toml > defaults.

    ``toml_path`` None means ``./optiml.toml`` if it exists. Overrides whose value is None are
    ignored (unset CLI options); ``thoughts`` may be given as a comma-separated string.
    """
    path = toml_path if toml_path is not None else Path("optiml.toml")
    table = read_toml_section(path, "generate", required=toml_path is not None, error=ConfigError)
    merged: dict[str, Any] = dict(table)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = set(merged) - _KEYS
    if unknown:
        raise ConfigError(f"unknown [generate] setting(s) {sorted(unknown)}; known: {', '.join(sorted(_KEYS))}")

    extra = list(_inline_thoughts(merged.pop("thought", []), path))
    for entry in _str_list(merged.pop("thought_files", []), "thought_files"):
        file = Path(entry)
        extra.extend(load_thought_file(file if file.is_absolute() else path.parent / file))
    settings: dict[str, Any] = {"extra_thoughts": tuple(extra)}
    if "thoughts" in merged:
        raw = merged.pop("thoughts")
        names = [n.strip() for n in raw.split(",")] if isinstance(raw, str) else _str_list(raw, "thoughts")
        settings["thoughts"] = tuple(n for n in names if n)
    for key, value in merged.items():
        settings[key] = _coerce(key, value)
    return GenerationConfig(**settings)


def require_llm(config: LLMConfig) -> None:
    """Raise :class:`GenerationError` saying how to configure an LLM, unless one is configured.

    Generation cannot work offline; the message also names the manual path (``optiml init-kernel``).
    """
    try:
        config.require_configured()
    except LLMConfigError as exc:
        raise GenerationError(
            f"generation needs an LLM. {exc} Without one, start from a hand-written kernel: "
            "`optiml init-kernel TASK -o kernel.cu` writes a skeleton to fill in."
        ) from exc


def _inline_thoughts(raw: object, path: Path) -> tuple[Thought, ...]:
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(f"{path}: [[generate.thought]] entries must be tables")
    return tuple(parse_thought(t, f"{path} [[generate.thought]]", path.parent) for t in raw)


def _str_list(raw: object, key: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ConfigError(f"[generate] {key} must be a list of strings, got {raw!r}")
    return list(raw)


def _coerce(key: str, value: object) -> Any:
    if key == "aggregate":
        if not isinstance(value, bool):
            raise ConfigError(f"[generate] aggregate must be true or false, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ConfigError(f"[generate] {key} must be a number, got {value!r}")
    if key in _INTS:
        if not isinstance(value, int):
            raise ConfigError(f"[generate] {key} must be an integer, got {value!r}")
        return value
    if not isinstance(value, (int, float)):
        raise ConfigError(f"[generate] {key} must be a number, got {value!r}")
    return float(value)
