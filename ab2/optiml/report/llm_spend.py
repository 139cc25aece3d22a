"""What a run's LLM calls bought: calls, tokens and dollars per verified candidate.

:func:`run_spend` reads a run's LLM calls (``llm_calls``, in the same SQLite file as the run) and
its edits and evaluations (the run store) and returns an :class:`LLMSpend`; :func:`spend_rows`
turns it into the labelled lines that ``optiml optimize``'s summary table, ``optiml show`` and the
HTML report print. A *verified LLM candidate* is a kernel an LLM proposed (its edit's proposer is
``llm:<model>@…``) that was evaluated and verified; the search's calls (purposes ``propose*``)
are divided among those, and the calls that generated the root (``generate*``) are shown apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from optiml.llm.config import configured_price_table
from optiml.llm.errors import LLMConfigError
from optiml.llm.prices import ModelPrice
from optiml.llm.store import LLMCallStore
from optiml.llm.types import LLMUsage
from optiml.store import RunStore

__all__ = ["LLMSpend", "run_spend", "spend_rows"]

LLM_PROPOSER_PREFIX = "llm:"


@dataclass(frozen=True)
class LLMSpend:
    """A run's LLM usage and the candidates it produced."""

    total: LLMUsage  # every answer, from the network or the cache
    paid: LLMUsage  # answers from the network: the calls, tokens and dollars paid for
    search: LLMUsage  # paid calls made to propose edits (purpose "propose", "propose.retry")
    generation: LLMUsage  # paid calls made to generate the root kernel or the task
    llm_evaluated: int  # LLM-proposed candidates that were evaluated
    llm_verified: int  # ... and verified
    models: tuple[str, ...] = ()
    prices: dict[str, ModelPrice | None] = field(default_factory=dict)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Models whose calls were counted at $0 because no price was known."""
        if self.paid.cost_usd > 0 or self.paid.total_tokens == 0:
            return ()
        return tuple(m for m in self.models if self.prices.get(m) is None)

    def per_verified(self) -> tuple[float, float, float] | None:
        """(calls, tokens, USD) of the search per verified LLM candidate; None when none verified."""
        if self.llm_verified == 0:
            return None
        n = self.llm_verified
        return self.search.calls / n, self.search.total_tokens / n, self.search.cost_usd / n


def run_spend(run_store: RunStore, calls: LLMCallStore, run_id: str) -> LLMSpend:
    """The LLM spend of ``run_id`` (both stores may be the same SQLite file)."""
    llm_edits = {e.id for e in run_store.edits(run_id) if e.edit.proposer.startswith(LLM_PROPOSER_PREFIX)}
    verified = run_store.verified_times(run_id)
    llm_nodes = [n for n in run_store.nodes(run_id) if n.edit_id is not None and n.edit_id in llm_edits]
    models = tuple(calls.models(run_id))
    try:
        table = configured_price_table()
        prices = {m: table.lookup(m) for m in models}
    except LLMConfigError:  # an unreadable optiml.toml must not hide a stored run's figures
        prices = {}
    return LLMSpend(
        total=calls.usage(run_id),
        paid=calls.usage(run_id, network_only=True),
        search=calls.usage(run_id, purpose_prefix="propose", network_only=True),
        generation=calls.usage(run_id, purpose_prefix="generate", network_only=True),
        llm_evaluated=len(llm_nodes),
        llm_verified=sum(1 for n in llm_nodes if n.digest in verified),
        models=models,
        prices=prices,
    )


def load_run_spend(store_path: Path, run_id: str) -> LLMSpend | None:
    """`run_spend` from the run store file, or None when the run made no LLM call."""
    with RunStore(store_path) as run_store, LLMCallStore(store_path) as calls:
        spend = run_spend(run_store, calls, run_id)
    return spend if spend.total.calls else None


def spend_rows(spend: LLMSpend) -> list[tuple[str, str]]:
    """Labelled one-line figures: the run's LLM usage, and the search's spend per verified candidate."""
    paid = spend.paid
    cost = f"${_money(paid.cost_usd)}"
    if spend.unpriced:
        cost += f" (no price known for {', '.join(spend.unpriced)}: cost not counted)"
    cached = spend.total.cached_calls
    answers = f"{spend.total.calls} ({cached} from the cache, free)" if cached else f"{spend.total.calls}"
    models = f" · {', '.join(spend.models)}" if spend.models else ""
    rows = [
        (
            "LLM calls",
            f"{answers}, {paid.input_tokens:,} tokens in, {paid.output_tokens:,} out, {cost}{models}",
        )
    ]
    per = spend.per_verified()
    of = f"{spend.llm_verified} of {spend.llm_evaluated} evaluated LLM candidates verified"
    if per is not None:
        calls, tokens, usd = per
        text = f"{calls:.1f} calls, {tokens:,.0f} tokens, ${_money(usd)} per verified candidate ({of})"
    elif spend.search.calls:
        asked = _plural(spend.search.calls, "call")
        text = f"none verified ({of}): {asked}, ${_money(spend.search.cost_usd)} spent on proposals"
    else:
        text = ""
    if spend.generation.calls:
        gen = spend.generation
        text += ("; " if text else "") + (
            f"root generation: {_plural(gen.calls, 'call')}, {gen.total_tokens:,} tokens, ${_money(gen.cost_usd)}"
        )
    if text:
        rows.append(("LLM per verified", text))
    return rows


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _money(usd: float) -> str:
    """Dollars readable at any size: 12.35, 0.25, 0.015, 0.0037, 0."""
    if usd == 0:
        return "0"
    if usd >= 0.1:
        return f"{usd:.2f}"
    if usd < 1e-4:
        return "<0.0001"
    return f"{usd:.{1 - math.floor(math.log10(usd))}f}"  # two significant digits
