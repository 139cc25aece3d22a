"""A run's LLM calls as its report lists them: each call, and the run's totals in the words of `optiml show`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optiml.llm.store import LLMCallStore
from optiml.report.llm_spend import LLMSpend, run_spend, spend_rows
from optiml.store import RunStore


@dataclass(frozen=True)
class LLMCall:
    when: str  # ISO time, UTC
    purpose: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool


@dataclass(frozen=True)
class LLMSection:
    calls: tuple[LLMCall, ...]
    spend: LLMSpend
    summary: tuple[tuple[str, str], ...]  # labelled lines, as `optiml show` prints them


def load_llm_section(store_path: Path, run_id: str) -> LLMSection | None:
    """The run's LLM calls, or None when it made none."""
    with RunStore(store_path) as run_store, LLMCallStore(store_path) as store:
        records = store.calls(run_id)
        if not records:
            return None
        spend = run_spend(run_store, store, run_id)
    calls = tuple(
        LLMCall(
            when=r.created_at,
            purpose=r.purpose,
            model=r.model,
            input_tokens=r.response.input_tokens,
            output_tokens=r.response.output_tokens,
            cost_usd=r.response.cost_usd,
            latency_s=r.response.latency_s,
            cached=r.cached,
        )
        for r in records
    )
    return LLMSection(calls, spend, tuple(spend_rows(spend)))
