"""OptiML-X: search over kernel edits (MCTS, greedy, best-of-N) under verification.

Entry points for the CLI::

    run_search(task, root, evaluator, proposers, profiler, store, config, on_event) -> SearchOutcome
    resume_search(store, run_id, evaluator, proposers, profiler, on_event, task=, budgets=) -> SearchOutcome
    list_runs(store) -> list[RunSummary]
    best_path(store, run_id) -> RunPath

The CLI draws their results (:mod:`optiml.cli.views.search`, :mod:`optiml.cli.views.runs`).
"""

from optiml.search.config import Budgets, RewardWeights, SearchConfig
from optiml.search.events import EventKind, Progress, SearchEvent
from optiml.search.outcome import PathStep, SearchOutcome
from optiml.search.protocols import Diagnosis, Profiler
from optiml.search.queries import RunPath, RunSummary, best_path, list_runs
from optiml.search.runner import SearchError, resume_search, run_search

__all__ = [
    "Budgets",
    "Diagnosis",
    "EventKind",
    "PathStep",
    "Profiler",
    "Progress",
    "RewardWeights",
    "RunPath",
    "RunSummary",
    "SearchConfig",
    "SearchError",
    "SearchEvent",
    "SearchOutcome",
    "best_path",
    "list_runs",
    "resume_search",
    "run_search",
]
