"""A search run from start to finish, and its resumption after a crash or Ctrl-C.

:func:`run_search` creates the run in the store, evaluates (and profiles) the root, runs the
engine under the chosen strategy, re-times the top candidates against the root
(:mod:`optiml.search.verdict`) and returns a :class:`SearchOutcome`. Every evaluation is
committed to the store the moment it arrives, so :func:`resume_search` rebuilds the tree,
re-queues the proposals not yet evaluated and continues with the budgets that remain, never
evaluating a stored candidate again.

Ctrl-C marks the run ``interrupted`` and re-raises ``KeyboardInterrupt``; any other error
marks it ``interrupted`` with the error as its stop reason and re-raises. Both can be resumed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from optiml.errors import ConfigError, OptimlError, StoreError, TaskError
from optiml.evaluate.cost import CostFunction
from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposer
from optiml.search.best_of_n import BestOfN
from optiml.search.budget import BudgetTracker
from optiml.search.config import Budgets, SearchConfig
from optiml.search.engine import Engine
from optiml.search.events import EventKind, EventSink
from optiml.search.greedy import Greedy
from optiml.search.journal import Journal
from optiml.search.mcts import MCTS
from optiml.search.outcome import SearchOutcome, build_outcome
from optiml.search.protocols import PaidProposer, Profiler
from optiml.search.strategy import Strategy
from optiml.search.tree import Tree
from optiml.search.verdict import confirm_best
from optiml.store import RUN_FAILED, RUN_FINISHED, RUN_INTERRUPTED, RUN_RUNNING, RunStore
from optiml.task import Task, load_task


class SearchError(OptimlError):
    """A search cannot start or continue (e.g. the starting kernel itself fails)."""


def make_strategy(config: SearchConfig) -> Strategy:
    strategies: dict[str, type[MCTS] | type[Greedy] | type[BestOfN]] = {
        "mcts": MCTS,
        "greedy": Greedy,
        "best-of-n": BestOfN,
    }
    return strategies[config.strategy](config)


def run_search(
    task: Task,
    root: KernelSource,
    evaluator: CostFunction,
    proposers: Sequence[Proposer],
    profiler: Profiler | None,
    store: RunStore,
    config: SearchConfig | None = None,
    on_event: EventSink | None = None,
    run_id: str | None = None,
) -> SearchOutcome:
    """Optimise ``root`` for ``task``; raises SearchError when the root itself does not pass.
    ``run_id`` (default: a fresh one) names the run in the store."""
    config = config or SearchConfig()
    _check_proposers(proposers)
    run = store.create_run(
        task_name=task.name,
        task_path=str(task.path),
        task_digest=task.digest,
        strategy=config.strategy,
        config_json=config.to_json(),
        root=root,
        run_id=run_id,
    )
    budget = BudgetTracker(config.budgets, session_cost=_session_cost(proposers))
    return _drive(run.id, task, Tree(root), config, evaluator, proposers, profiler, store, budget, 0, on_event)


def resume_search(
    store: RunStore,
    run_id: str,
    evaluator: CostFunction,
    proposers: Sequence[Proposer],
    profiler: Profiler | None = None,
    on_event: EventSink | None = None,
    *,
    task: Task | None = None,
    budgets: Budgets | None = None,
) -> SearchOutcome:
    """Continue a stored run where it stopped.

    ``task`` defaults to the task file the run was started with (it must be unchanged).
    ``budgets`` replaces the run's budgets, e.g. to extend a finished run; budgets count what
    every session of the run spent.
    """
    _check_proposers(proposers)
    run = store.get_run(run_id)
    if run.status == RUN_FINISHED and budgets is None:
        raise StoreError(f"run {run.id} already finished ({run.stop_reason}); pass larger budgets to continue it")
    config = SearchConfig.from_json(run.config_json)
    if budgets is not None:
        config = config.with_budgets(budgets)
    task = task or load_task(run.task_path)
    if task.digest != run.task_digest:
        raise TaskError(f"{task.path}: the task changed since run {run.id} started; start a new run")
    journal = Journal(store, run.id)
    restored = journal.restore()
    tree = restored.tree if restored is not None else Tree(store.kernel(run.root_digest))
    budget = BudgetTracker(
        config.budgets,
        session_cost=_session_cost(proposers),
        evaluations=sum(1 for n in tree if n.result is not None),
        elapsed_s=run.elapsed_s,
        cost_usd=run.cost_usd,
    )
    duplicates = restored.duplicates if restored is not None else 0
    return _drive(run.id, task, tree, config, evaluator, proposers, profiler, store, budget, duplicates, on_event)


def _drive(
    run_id: str,
    task: Task,
    tree: Tree,
    config: SearchConfig,
    evaluator: CostFunction,
    proposers: Sequence[Proposer],
    profiler: Profiler | None,
    store: RunStore,
    budget: BudgetTracker,
    duplicates: int,
    on_event: EventSink | None,
) -> SearchOutcome:
    journal = Journal(store, run_id)
    engine = Engine(
        run_id=run_id,
        task=task,
        tree=tree,
        config=config,
        strategy=make_strategy(config),
        evaluator=evaluator,
        proposers=proposers,
        profiler=profiler,
        journal=journal,
        budget=budget,
        on_event=on_event,
        duplicates=duplicates,
    )
    resumed = tree.root.result is not None
    try:
        journal.status(RUN_RUNNING)
        engine.emit(EventKind.STARTED, f"run {run_id} {'resumed' if resumed else 'started'} ({config.strategy})")
        if not resumed:
            engine.evaluate_root()
        root_result = tree.root.result
        assert root_result is not None
        if not root_result.ok:
            reason = f"the starting kernel does not pass: {_one_line(root_result.feedback())}"
            journal.status(RUN_FAILED, reason, elapsed_s=budget.elapsed_s, cost_usd=budget.cost_usd)
            raise SearchError(reason)
        stop_reason = engine.run()
        verdict = confirm_best(tree, evaluator, config)
        if verdict.retimed:
            store.record_retimes(
                run_id,
                config.retime_rounds,
                [(tree.root.digest, verdict.root_timing)] + [(r.digest, r.timing) for r in verdict.retimed],
                verdict.references,
            )
        engine.emit(EventKind.RETIMED, verdict.note or f"best {verdict.best.digest[:8]} confirmed")
        outcome = build_outcome(
            run_id=run_id,
            task_name=task.name,
            strategy=config.strategy,
            stop_reason=stop_reason,
            verdict=verdict,
            path_nodes=[(n.edit, n.digest, n.time_ms) for n in tree.path(verdict.best)],
            references=verdict.references or dict(evaluator.reference) or dict(root_result.reference),
            status_counts=dict(Counter(n.result.status.value for n in tree if n.result is not None)),
            elapsed_s=budget.elapsed_s,
            cost_usd=budget.cost_usd,
            root_roofline_fraction=tree.root.diagnosis.roofline_fraction if tree.root.diagnosis else None,
        )
        store.update_run(
            run_id,
            status=RUN_FINISHED,
            stop_reason=stop_reason,
            elapsed_s=outcome.elapsed_s,
            cost_usd=outcome.cost_usd,
            best_digest=outcome.best_digest,
            confirmed=outcome.confirmed,
        )
        engine.emit(EventKind.FINISHED, stop_reason)
        return outcome
    except SearchError:
        raise
    except KeyboardInterrupt:
        journal.status(RUN_INTERRUPTED, "interrupted", elapsed_s=budget.elapsed_s, cost_usd=budget.cost_usd)
        raise
    except BaseException as exc:
        reason = f"stopped by {type(exc).__name__}: {_one_line(str(exc))}"
        journal.status(RUN_INTERRUPTED, reason, elapsed_s=budget.elapsed_s, cost_usd=budget.cost_usd)
        raise


def _check_proposers(proposers: Sequence[Proposer]) -> None:
    if not proposers:
        raise ConfigError("a search needs at least one proposer")


def _session_cost(proposers: Sequence[Proposer]) -> Callable[[], float]:
    """What this session's paid proposers have spent, in dollars (offline proposers cost nothing)."""
    paid = [p for p in proposers if isinstance(p, PaidProposer)]

    def cost() -> float:
        return float(sum(p.spent().usd for p in paid))

    return cost


def _one_line(text: str, width: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
