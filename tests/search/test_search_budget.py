from __future__ import annotations

import pytest

from optiml.errors import ConfigError
from optiml.search.budget import BudgetTracker
from optiml.search.config import Budgets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_evaluation_budget_counts_in_flight_and_prior_sessions() -> None:
    budget = BudgetTracker(Budgets(max_evaluations=3), session_cost=lambda: 0.0, evaluations=1)
    assert budget.can_evaluate()
    budget.start_evaluation()
    budget.start_evaluation()
    assert not budget.can_evaluate()
    assert not budget.can_propose()
    assert budget.exhausted() == "evaluation budget spent (3 evaluations)"


def test_time_budget_includes_earlier_sessions() -> None:
    clock = Clock()
    budget = BudgetTracker(Budgets(max_seconds=10), session_cost=lambda: 0.0, elapsed_s=6.0, clock=clock)
    assert budget.seconds_left() == 4.0
    clock.now += 4.0
    assert budget.elapsed_s == 10.0
    assert not budget.can_evaluate()
    assert budget.exhausted().startswith("time budget spent")


def test_cost_budget_stops_proposals_but_not_evaluations() -> None:
    spent = [0.0]
    budget = BudgetTracker(Budgets(max_cost_usd=1.0), session_cost=lambda: spent[0], cost_usd=0.5)
    assert budget.can_propose()
    spent[0] = 0.5
    assert budget.cost_usd == 1.0
    assert not budget.can_propose()
    assert budget.can_evaluate()
    assert budget.exhausted() == "LLM cost budget spent ($1)"


def test_a_proposer_can_report_the_llm_budget_spent() -> None:
    budget = BudgetTracker(Budgets(max_cost_usd=None), session_cost=lambda: 0.0)
    assert budget.exhausted() == ""
    budget.mark_cost_spent()
    assert not budget.can_propose()
    assert "LLM layer's limit" in budget.exhausted()


def test_unlimited_budgets_never_run_out() -> None:
    budget = BudgetTracker(Budgets(None, None, None), session_cost=lambda: 1e9)
    for _ in range(1000):
        budget.start_evaluation()
    assert budget.can_propose() and budget.evaluations_left() is None and budget.seconds_left() is None


def test_llm_call_and_token_budgets_count_earlier_sessions_and_stop_proposals() -> None:
    spent = [(0, 0)]
    budget = BudgetTracker(Budgets(max_llm_calls=10, max_llm_tokens=5000), session_cost=lambda: 0.0)
    budget.track_llm(lambda: spent[0], prior=(6, 1000))
    assert budget.can_propose() and (budget.llm_calls, budget.llm_tokens) == (6, 1000)
    spent[0] = (3, 3000)
    assert budget.can_propose() and budget.exhausted() == ""
    spent[0] = (4, 3000)
    assert not budget.can_propose() and budget.can_evaluate()
    assert budget.exhausted() == "LLM call budget spent (10 calls)"
    spent[0] = (3, 4000)
    assert budget.exhausted() == "LLM token budget spent (5000 tokens)"


def test_a_proposer_reports_which_llm_budget_was_spent() -> None:
    budget = BudgetTracker(Budgets(), session_cost=lambda: 0.0)
    budget.mark_cost_spent("LLM call budget spent (3 calls)")
    assert not budget.can_propose() and budget.exhausted() == "LLM call budget spent (3 calls)"


def test_llm_budgets_must_be_positive() -> None:
    for field in ("max_llm_calls", "max_llm_tokens"):
        with pytest.raises(ConfigError, match=f"{field} must be >= 1"):
            Budgets(**{field: 0})  # type: ignore[arg-type]
    assert Budgets(max_llm_calls=5).max_llm_tokens is None
