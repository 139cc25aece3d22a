"""Budget accounting: evaluations, active wall time and LLM cost, carried across resumes."""

from __future__ import annotations

import time
from collections.abc import Callable

from optiml.search.config import Budgets


class BudgetTracker:
    """Counts what a run has spent against its :class:`Budgets`.

    ``evaluations``, ``elapsed_s`` and ``cost_usd`` start from what earlier sessions of the run
    spent (zero for a new run); ``session_cost`` reports what this session's proposers spent.
    In-flight evaluations count as spent, so the evaluation budget is never overshot.
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
        self._cost_spent = False  # set when a proposer reports the LLM budget as spent

    @property
    def elapsed_s(self) -> float:
        return self._prior_elapsed + (self._clock() - self._started)

    @property
    def cost_usd(self) -> float:
        return self._prior_cost + self._session_cost()

    def start_evaluation(self) -> None:
        self.evaluations += 1

    def mark_cost_spent(self) -> None:
        self._cost_spent = True

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

    def _money_spent(self) -> bool:
        limit = self.limits.max_cost_usd
        return self._cost_spent or (limit is not None and self.cost_usd >= limit)

    def can_evaluate(self) -> bool:
        return not (self._evaluations_spent() or self._time_spent())

    def can_propose(self) -> bool:
        return self.can_evaluate() and not self._money_spent()

    def exhausted(self) -> str:
        """Which budget is spent, as a phrase for the run's stop reason, or ``""``."""
        if self._evaluations_spent():
            return f"evaluation budget spent ({self.evaluations} evaluations)"
        if self._time_spent():
            return f"time budget spent ({self.limits.max_seconds:g} s)"
        if self._money_spent():
            limit = self.limits.max_cost_usd
            what = f"${limit:g}" if limit is not None else "the LLM layer's limit"
            return f"LLM cost budget spent ({what})"
        return ""
