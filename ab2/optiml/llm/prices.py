"""Per-token prices of hosted models: the shipped table (``prices.toml``) plus the user's own.

`PriceTable.lookup` finds a model's price by exact name, by its name without a routing prefix
(``openai/gpt-4o``), or as a dated / ``-latest`` snapshot of a listed model
(``claude-sonnet-4-5-20250929``); any other suffix stays unpriced, so a model is never billed at a
cheaper sibling's price (``o3-pro`` is not ``o3``). ``prices.toml`` documents its source and date.

User prices win over the shipped ones: :func:`load_price_table` merges, lowest precedence first,
the shipped table, the file named by ``OPTIML_LLM_PRICES_FILE`` (same format), and the
``[llm.prices]`` table of optiml.toml (``"model" = { input = 0.5, output = 1.5 }``, USD per Mtok).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from optiml.llm.errors import LLMConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["SHIPPED_PRICES", "ModelPrice", "PriceTable", "load_price_table", "shipped_prices"]

SHIPPED_PRICES = Path(__file__).with_name("prices.toml")
PRICES_FILE_ENV = "OPTIML_LLM_PRICES_FILE"

# Snapshot suffixes that keep a listed model's price: -2024-08-06, -20250929, -0613, -latest, @20240620, -v1:0
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest))?(?:-v\d+(?::\d+)?)?")


@dataclass(frozen=True)
class ModelPrice:
    """USD per million input and output tokens, and where the figures come from."""

    input_per_mtok: float
    output_per_mtok: float
    source: str

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6

    def describe(self) -> str:
        return f"${self.input_per_mtok:g} in / ${self.output_per_mtok:g} out per Mtok ({self.source})"


@dataclass(frozen=True)
class PriceTable:
    """Model name (lower case) → price."""

    models: Mapping[str, ModelPrice]

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The price of ``model``, or None when it is not listed (see the module docstring)."""
        if not model:
            return None
        name = model.strip().lower()
        for candidate in dict.fromkeys((name, name.rsplit("/", 1)[-1])):
            if candidate in self.models:
                return self.models[candidate]
            best = ""
            for key in self.models:
                if len(key) > len(best) and candidate.startswith(key):
                    rest = candidate[len(key) :]
                    if rest and _SNAPSHOT.fullmatch(rest):
                        best = key
            if best:
                return self.models[best]
        return None

    def merged(self, other: Mapping[str, ModelPrice]) -> PriceTable:
        return PriceTable({**self.models, **{k.lower(): v for k, v in other.items()}})


@lru_cache(maxsize=1)
def shipped_prices() -> PriceTable:
    """The table shipped in the package (``optiml/llm/prices.toml``)."""
    return _read_file(SHIPPED_PRICES, label="shipped price table")


def load_price_table(
    user_prices: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> PriceTable:
    """Shipped prices, overridden by ``$OPTIML_LLM_PRICES_FILE`` and then by ``user_prices``
    (the ``[llm.prices]`` table). Raises `LLMConfigError` for an unreadable file or a bad entry."""
    table = shipped_prices()
    path = (environ or {}).get(PRICES_FILE_ENV)
    if path:
        table = table.merged(_read_file(Path(path), label=PRICES_FILE_ENV).models)
    if user_prices:
        table = table.merged(parse_prices(user_prices, source="optiml.toml [llm.prices]"))
    return table


def parse_prices(entries: Mapping[str, Any], *, source: str) -> dict[str, ModelPrice]:
    """``{"model": {"input": x, "output": y}}`` → prices; `LLMConfigError` names a bad entry."""
    prices: dict[str, ModelPrice] = {}
    for model, entry in entries.items():
        if not isinstance(entry, Mapping) or set(entry) - {"input", "output"} or "input" not in entry:
            raise LLMConfigError(
                f"{source}: price of {model!r} must look like {{ input = 0.5, output = 1.5 }} (USD per Mtok)"
            )
        values = []
        for side in ("input", "output"):
            value = entry.get(side, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise LLMConfigError(f"{source}: {side} price of {model!r} must be a number >= 0, got {value!r}")
            values.append(float(value))
        prices[str(model).lower()] = ModelPrice(values[0], values[1], source)
    return prices


def _read_file(path: Path, *, label: str) -> PriceTable:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LLMConfigError(f"cannot read the {label} {path}: {exc}") from exc
    models = data.get("models")
    if not isinstance(models, dict):
        raise LLMConfigError(f"{path}: a price file needs a [models] table")
    taken = data.get("taken")
    source = f"{path.name}, {taken}" if taken else str(path)
    return PriceTable(parse_prices(models, source=source))
