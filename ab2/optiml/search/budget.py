"""Budget accounting: evaluations, active wall time and LLM spend (dollars, calls, tokens), carried
across resumes."""

from __future__ import annotations

import time
from collections.abc import Callable

from optiml.search.config import Budgets

#: (API calls, input + output tokens) spent on the LLM so far
LLMSpent = tuple[int, int]


class BudgetTracker:
    """Counts what a run has spent against its :class:`Budgets`.

    ``evaluations``, ``elapsed_s`` and ``cost_usd`` start from what earlier sessions of the run
    spent (zero for a new run); ``session_cost`` reports what this session's proposers spent.
    In-flight evaluations count as spent, so the evaluation budget is never overshot.

    LLM calls and tokens come from :meth:`track_llm` (the engine wires it to its proposers' LLM
    clients): what the run had spent before this session, plus what the clients spent since.
    """

    def __init__(
        self,
        limits: Budgets,
        *,
        session_cost: Callable[[], float],
        evaluations: int = 0,
        elapsed_s: float = 0.0,
        cost_usd: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.evaluations = evaluations
        self._session_cost = session_cost
        self._prior_elapsed = elapsed_s
        self._prior_cost = cost_usd
        self._clock = clock
        self._started = clock()
        self._llm_spent = ""  # set when a proposer reports an LLM budget as spent: why
        self._prior_llm: LLMSpent = (0, 0)
        self._session_llm: Callable[[], LLMSpent] = lambda: (0, 0)

    @property
    def elapsed_s(self) -> float:
        return self._prior_elapsed + (self._clock() - self._started)

    @property
    def cost_usd(self) -> float:
        return self._prior_cost + self._session_cost()

    def track_llm(self, session: Callable[[], LLMSpent], prior: LLMSpent = (0, 0)) -> None:
        """Count LLM calls and tokens: ``prior`` (earlier sessions) plus ``session()`` (this one)."""
        self._session_llm = session
        self._prior_llm = prior

    @property
    def llm_calls(self) -> int:
        return self._prior_llm[0] + self._session_llm()[0]

    @property
    def llm_tokens(self) -> int:
        return self._prior_llm[1] + self._session_llm()[1]

    def start_evaluation(self) -> None:
        self.evaluations += 1

    def mark_cost_spent(self, reason: str = "") -> None:
        """A proposer's LLM layer refused a call for its own budget; ``reason`` says which."""
        self._llm_spent = reason or "LLM budget spent (the LLM layer's limit)"

    def evaluations_left(self) -> int | None:
        if self.limits.max_evaluations is None:
            return None
        return max(self.limits.max_evaluations - self.evaluations, 0)

    def seconds_left(self) -> float | None:
        if self.limits.max_seconds is None:
            return None
        return max(self.limits.max_seconds - self.elapsed_s, 0.0)

    def _evaluations_spent(self) -> bool:
        return self.evaluations_left() == 0

    def _time_spent(self) -> bool:
        return self.seconds_left() == 0.0

    def _llm_exhausted(self) -> str:
        """Which LLM budget is spent, as a stop reason, or ``""``."""
        limits = self.limits
        if limits.max_cost_usd is not None and self.cost_usd >= limits.max_cost_usd:
            return f"LLM cost budget spent (${limits.max_cost_usd:g})"
        if limits.max_llm_calls is not None and self.llm_calls >= limits.max_llm_calls:
            return f"LLM call budget spent ({limits.max_llm_calls} calls)"
        if limits.max_llm_tokens is not None and self.llm_tokens >= limits.max_llm_tokens:
            return f"LLM token budget spent ({limits.max_llm_tokens} tokens)"
        return self._llm_spent

    def can_evaluate(self) -> bool:
        return not (self._evaluations_spent() or self._time_spent())

    def can_propose(self) -> bool:
        return self.can_evaluate() and not self._llm_exhausted()

    def exhausted(self) -> str:
        """Which budget is spent, as a phrase for the run's stop reason, or ``""``."""
        if self._evaluations_spent():
            return f"evaluation budget spent ({self.evaluations} evaluations)"
        if self._time_spent():
            return f"time budget spent ({self.limits.max_seconds:g} s)"
        return self._llm_exhausted()
