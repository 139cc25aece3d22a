"""The engine every strategy runs on: evaluations and proposers in flight, rewards, persistence.

One thread (the caller's) owns the tree. Three thread pools do the waiting: evaluations
(``parallel_evaluations`` at once), proposer requests (``parallel_proposals`` at once) and
profiling (one at a time: ncu replays each kernel many times and is the slowest GPU work).
The loop::

    dispatch   while a slot is free and the budgets allow, ask the strategy for an action:
               Try(node)    → the node's next queued candidate becomes a PENDING child (transposition
                              table entry + virtual loss on its path) and goes to the evaluator
               Expand(node) → a proposer gets the node's kernel, result, diagnosis and path history
    wait       for a result (any, or the oldest one when ``reproducible``), at most a second
    handle     evaluation → journal it at once and finalise it (value, back-up, close the parent if
                            its children keep failing): a node is final when it is timed; then queue
                            it for profiling if it is within ``profile_margin`` of the best
               profile    → keep the diagnosis (stored, and shown to the node's later proposals)
               proposals  → queue the new kernels on the node, note the unusable ones
    profiling  starts when ``profile_batch`` nodes wait, or when the GPU would idle

Profiling is advisory (issue 12): no strategy waits for a diagnosis — a node may be expanded
before its profile arrives, and its proposers then rank by timing and the roofline floor alone.
The profiler holds the evaluator's GPU lock, so it delays the evaluations queued behind it but
never disturbs a timing. The run ends when no work is in flight and nothing more can start: a
budget is spent, the proposers keep failing, or no node has anything left to try; nodes still
queued for profiling then (at most those within the margin of the best) are profiled before it
returns, so the outcome can report the best kernel's roofline.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from optiml.errors import BudgetSpent
from optiml.evaluate.cost import CostFunction
from optiml.kernel.source import KernelSource
from optiml.propose.base import DiagnosisFacts, HistoryEntry, Proposal, ProposalContext, Proposer
from optiml.search.budget import BudgetTracker
from optiml.search.config import SearchConfig
from optiml.search.events import EventKind, EventSink, Progress, SearchEvent
from optiml.search.journal import Journal
from optiml.search.policy import close_reason
from optiml.search.protocols import DiagnosisSnapshot, PaidProposer, Profiler
from optiml.search.reward import node_value
from optiml.search.strategy import Expand, Strategy, Try
from optiml.search.tree import Candidate, Node, NodeState, Tree
from optiml.task import Task
from optiml.values import EvalResult

_EVALUATE = "evaluate"
_PROPOSE = "propose"
_PROFILE = "profile"
_HEARTBEAT_S = 1.0


@dataclass(frozen=True)
class _Flight:
    """What an in-flight future stands for."""

    kind: str
    node: Node
    order: int
    proposer: Proposer | None = None
    batch: tuple[Node, ...] = ()  # profile flights: every node the one profiler call covers


class Engine:
    """Runs one session of one search; single use."""

    def __init__(
        self,
        *,
        run_id: str,
        task: Task,
        tree: Tree,
        config: SearchConfig,
        strategy: Strategy,
        evaluator: CostFunction,
        proposers: Sequence[Proposer],
        profiler: Profiler | None,
        journal: Journal,
        budget: BudgetTracker,
        on_event: EventSink | None = None,
        duplicates: int = 0,
    ) -> None:
        self.run_id = run_id
        self.task = task
        self.tree = tree
        self.config = config
        self.strategy = strategy
        self.evaluator = evaluator
        self.proposers = list(proposers)
        self.profiler = profiler
        self.journal = journal
        self.budget = budget
        self.on_event = on_event
        self.duplicates = duplicates
        self._flights: dict[Future[Any], _Flight] = {}
        self._in_flight: Counter[str] = Counter()
        self._order = itertools.count()
        self._proposer_turn = 0
        self._proposer_errors = 0
        self._fatal = ""
        self._profile_queue: list[Node] = []
        self._track_llm_spend()
        self._pools = {
            _EVALUATE: ThreadPoolExecutor(config.parallel_evaluations, thread_name_prefix="optiml-evaluate"),
            _PROPOSE: ThreadPoolExecutor(config.parallel_proposals, thread_name_prefix="optiml-propose"),
            _PROFILE: ThreadPoolExecutor(1, thread_name_prefix="optiml-profile"),
        }

    def _track_llm_spend(self) -> None:
        """Let the budget count the run's paid calls and tokens: what the run recorded so far (earlier
        sessions, the root's generation) plus what the paid proposers spend from now on; with call or
        token budgets, cap each proposer at what is left, so a limit binds inside a request too."""
        paid = [p for p in self.proposers if isinstance(p, PaidProposer)]
        if not paid:
            return
        start = [p.spent() for p in paid]

        def session() -> tuple[int, int]:
            now = [p.spent() for p in paid]
            calls = sum(n.calls - s.calls for n, s in zip(now, start, strict=True))
            return calls, sum(n.tokens - s.tokens for n, s in zip(now, start, strict=True))

        prior = (0, 0)
        limits = self.config.budgets
        if limits.max_llm_calls is not None or limits.max_llm_tokens is not None:
            recorded = paid[0].spent_by_run(self.run_id)  # the run's calls, whichever client made them
            prior = (recorded.calls, recorded.tokens)
            calls_left = None if limits.max_llm_calls is None else max(limits.max_llm_calls - prior[0], 0)
            tokens_left = None if limits.max_llm_tokens is None else max(limits.max_llm_tokens - prior[1], 0)
            for proposer, now in zip(paid, start, strict=True):
                proposer.cap(
                    calls=None if calls_left is None else now.calls + calls_left,
                    tokens=None if tokens_left is None else now.tokens + tokens_left,
                )
        self.budget.track_llm(session, prior)

    # the two entry points -------------------------------------------------------------------------

    def evaluate_root(self) -> EvalResult:
        """Evaluate the root synchronously (its profile, like any node's, comes later); the caller
        checks that it passed."""
        root = self.tree.root
        self.budget.start_evaluation()
        result = self.evaluator.evaluate(root.kernel)
        self._record(root, result)
        if root.state is NodeState.OK:
            self._settle(root)
        self.emit(EventKind.EVALUATED, f"root: {_outcome_text(root)}")
        return result

    def run(self) -> str:
        """Search until the budgets, the proposers or the search space end it; returns why it ended."""
        try:
            for node in self.tree.evaluated():
                if not node.finalised and node.state is not NodeState.PENDING:
                    self._settle(node)  # evaluated before a crash, not finalised yet
            while True:
                self._dispatch()
                if not self._in_flight[_EVALUATE] and not self._in_flight[_PROPOSE]:
                    self._start_profiling()  # nothing else will want the GPU soon: profile what waits
                if not self._has_work():
                    break
                self._wait()
        finally:
            for pool in self._pools.values():
                pool.shutdown(wait=False, cancel_futures=True)
        return self._stop_reason()

    # dispatch ------------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            can_try = self._in_flight[_EVALUATE] < self.config.parallel_evaluations and self.budget.can_evaluate()
            can_expand = (
                self._in_flight[_PROPOSE] < self.config.parallel_proposals
                and self.budget.can_propose()
                and not self._fatal
            )
            if not (can_try or can_expand):
                return
            action = self.strategy.next_action(self.tree, can_try=can_try, can_expand=can_expand)
            if isinstance(action, Try):
                self._try(action.node)
            elif isinstance(action, Expand) and not self._ran_dry(action.node):
                self._expand(action.node)
            else:
                return

    def _try(self, node: Node) -> None:
        candidate = node.untried.pop(0)
        if candidate.kernel.digest in self.tree:
            self.duplicates += 1
            self.journal.dropped(candidate)
            return
        child = self.tree.add_child(node, candidate)
        self.tree.add_virtual(child, +1)
        self.budget.start_evaluation()
        self._submit(_EVALUATE, child, self.evaluator.evaluate, child.kernel)

    def _expand(self, node: Node) -> None:
        proposer = self.proposers[self._proposer_turn % len(self.proposers)]
        self._proposer_turn += 1
        context = ProposalContext(
            task=self.task,
            kernel=node.kernel,
            result=node.result,
            diagnosis_text=node.diagnosis.text if node.diagnosis is not None else "",
            diagnosis=_facts(node.diagnosis),
            history=self.tree.history(node, self.config.history_limit),
            tried_digests=self.tree.tried_digests(),
        )
        node.requesting += 1
        self._submit(_PROPOSE, node, proposer.propose, context, self.config.proposals_per_request, proposer=proposer)

    def _ran_dry(self, node: Node) -> bool:
        """Its last ``max_dry_requests`` requests brought nothing new, but one is still in flight (so the
        node is not closed yet): wait for that answer instead of paying for yet another request."""
        return node.requesting > 0 and node.dry_requests >= self.config.max_dry_requests

    def _submit(
        self, kind: str, node: Node, fn: Any, *args: Any, proposer: Proposer | None = None, batch: tuple[Node, ...] = ()
    ) -> None:
        future = self._pools[kind].submit(fn, *args)
        self._flights[future] = _Flight(
            kind=kind, node=node, order=next(self._order), proposer=proposer, batch=batch or (node,)
        )
        self._in_flight[kind] += 1

    # waiting and handling ------------------------------------------------------------------------

    def _has_work(self) -> bool:
        if self._in_flight[_EVALUATE] or self._in_flight[_PROFILE] or self._profile_queue:
            return True
        return bool(self._in_flight[_PROPOSE]) and self.budget.can_evaluate() and not self._fatal

    def _wait(self) -> None:
        futures = list(self._flights)
        if self.config.reproducible:
            futures = [min(futures, key=lambda f: self._flights[f].order)]
        timeout = _HEARTBEAT_S
        seconds_left = self.budget.seconds_left()
        if seconds_left is not None and seconds_left > 0:
            timeout = min(timeout, seconds_left)
        done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        if not done:
            if not self._in_flight[_EVALUATE]:
                self._start_profiling()  # a slow proposer (an LLM) keeps the GPU idle: use it
            self.emit(EventKind.TICK, "")
            return
        broken: BaseException | None = None  # an evaluator that raises is broken: stop, after saving the rest
        for future in sorted(done, key=lambda f: self._flights[f].order):
            flight = self._flights.pop(future)
            self._in_flight[flight.kind] -= 1
            if flight.kind == _EVALUATE:
                self.tree.add_virtual(flight.node, -1)
                if future.exception() is not None:
                    broken = broken or future.exception()
                    continue
                self._record(flight.node, future.result())
                self.emit(EventKind.EVALUATED, _outcome_text(flight.node))
                self._settle(flight.node)
            elif flight.kind == _PROFILE:
                self._on_profiled(flight.batch, future)
            else:
                assert flight.proposer is not None
                self._on_proposals(flight.node, flight.proposer, future)
        if broken is not None:
            raise broken

    def _record(self, node: Node, result: EvalResult) -> None:
        """Attach a result and commit it to the store before anything else happens."""
        self.tree.set_result(node, result, self.tree.next_tick())
        self.journal.evaluation(node, elapsed_s=self.budget.elapsed_s, cost_usd=self.budget.cost_usd)

    def _settle(self, node: Node) -> None:
        """Finalise an evaluated node now — its value needs only its timing — and queue it for
        profiling if it is worth it: the diagnosis is advisory, for the proposers of later requests."""
        self._finalise(node)
        if self.profiler is not None and self._worth_profiling(node):
            self._profile_queue.append(node)
            self._profile_full_batch()

    def _start_profiling(self) -> None:
        """While the profiler is idle, hand it the queued nodes still worth it (up to a batch).

        One ncu launch costs ~6 s of start-up plus ~2.5 s per candidate, and it holds the GPU, so
        queued candidates wait until a batch is full or the GPU would otherwise be idle (no
        evaluation in flight, and no proposal either or one slower than the heartbeat): they share
        the start-up instead of paying it one by one."""
        if self.profiler is None or self._in_flight[_PROFILE]:
            return
        worth = [node for node in self._profile_queue if self._worth_profiling(node)]  # the best may have moved on
        batch, self._profile_queue = tuple(worth[: self.config.profile_batch]), worth[self.config.profile_batch :]
        if batch:
            self._submit(_PROFILE, batch[0], _diagnose_batch, self.profiler, batch, batch=batch)

    def _worth_profiling(self, node: Node) -> bool:
        """Verified, not yet profiled, and the root (the baseline every report compares with) or
        within ``profile_margin`` of the best time so far."""
        best = self.tree.best().time_ms
        time_ms = node.time_ms
        if time_ms is None or best is None or node.diagnosis is not None:
            return False
        return node is self.tree.root or time_ms <= best * (1.0 + self.config.profile_margin)

    def _on_profiled(self, batch: tuple[Node, ...], future: Future[Any]) -> None:
        snapshots = self._fetch_diagnoses(batch, future.result)
        for node, snapshot in zip(batch, snapshots, strict=True):
            if snapshot is not None:
                self._keep_diagnosis(node, snapshot)
        self._profile_full_batch()

    def _profile_full_batch(self) -> None:
        if len(self._profile_queue) >= self.config.profile_batch:
            self._start_profiling()

    def _fetch_diagnoses(
        self, nodes: tuple[Node, ...], fetch: Callable[[], list[DiagnosisSnapshot | None]]
    ) -> list[DiagnosisSnapshot | None]:
        """What the profiler found; a profiler failure costs the diagnoses only, never the run."""
        try:
            return fetch()
        except Exception as exc:  # the profiler is optional
            for node in nodes:
                self.emit(EventKind.WARNING, f"profiling {node.digest[:8]} failed: {type(exc).__name__}: {exc}")
            return [None] * len(nodes)

    def _keep_diagnosis(self, node: Node, diagnosis: DiagnosisSnapshot) -> None:
        node.diagnosis = diagnosis
        self.journal.profile(node)
        fraction = diagnosis.roofline_fraction
        roofline = f", {fraction:.0%} of roofline" if fraction is not None else ""
        self.emit(EventKind.PROFILED, f"profiled {node.digest[:8]}: proxy {diagnosis.proxy_score:.2f}{roofline}")

    def _finalise(self, node: Node) -> None:
        """Fix the node's value (:mod:`optiml.search.reward`: its speed over the root's) and back it up."""
        parent = node.parent
        reward = 0.0
        if parent is not None:
            assert node.result is not None and self.tree.root.timing is not None
            reward = node_value(node.result, self.tree.root.timing, self.config.reward)
        self.tree.finalise(node, reward)
        self.journal.reward(node)
        if parent is not None:
            self._maybe_close(parent)

    def _maybe_close(self, node: Node) -> None:
        if node.closed:
            return
        reason = close_reason(node, self.config, prune_failures=self.strategy.prune_failures)
        if reason:
            node.closed_reason = reason
            if node.seq is not None:
                self.journal.closed(node)

    def _on_proposals(self, node: Node, proposer: Proposer, future: Future[Any]) -> None:
        node.requesting -= 1
        try:
            proposals: Sequence[Proposal] = future.result()
        except BudgetSpent as exc:
            self.budget.mark_cost_spent(exc.reason or str(exc))
            self.emit(EventKind.WARNING, f"{proposer.name}: {exc}")
            return
        except Exception as exc:  # proposers are plug-ins: a crash is reported, repeated crashes end the run
            self._proposer_errors += 1
            message = f"proposer {proposer.name} failed: {type(exc).__name__}: {exc}"
            if self._proposer_errors >= self.config.max_proposer_errors:
                self._fatal = f"proposers keep failing ({self._proposer_errors} in a row); last: {message}"
            self.emit(EventKind.WARNING, message)
            node.dry_requests += 1  # a failed request brought nothing new either: the node is not asked forever
            self._maybe_close(node)
            return
        self._proposer_errors = 0
        known = set(self.tree.tried_digests())
        new = duplicates = unusable = 0
        for rank, proposal in enumerate(proposals):
            tick = self.tree.next_tick()
            if proposal.kernel is None or proposal.error is not None:
                message = proposal.error or "the proposer returned no kernel"
                self.tree.add_note(node, HistoryEntry(proposal.edit, "not_applied", message=message), tick)
                self.journal.not_applied(node, proposal.edit, message, tick)
                unusable += 1
            elif proposal.kernel.digest in known:
                self.journal.duplicate(node, proposal.edit, proposal.kernel, tick)
                duplicates += 1
            else:
                prior = 1.0 / (rank + 1)
                edit_id = self.journal.candidate(node, proposal.edit, proposal.kernel, prior, tick)
                node.untried.append(Candidate(proposal.edit, proposal.kernel, prior, edit_id))
                known.add(proposal.kernel.digest)
                new += 1
        if new:  # compiled on the pool while the GPU times others: a later Try finds the build done
            self.evaluator.prefetch([candidate.kernel for candidate in node.untried[-new:]])
        self.duplicates += duplicates
        node.dry_requests = 0 if new else node.dry_requests + 1
        self._maybe_close(node)
        cached = sum(1 for p in proposals if proposer.from_cache(p)) if isinstance(proposer, PaidProposer) else 0
        self.emit(
            EventKind.PROPOSED,
            f"{proposer.name} → {node.digest[:8]}: {new} new, {duplicates} known, {unusable} not applied"
            + (f" ({cached} answers from the cache)" if cached else ""),
        )

    # reporting -----------------------------------------------------------------------------------

    def _stop_reason(self) -> str:
        if self._fatal:
            return self._fatal
        return self.budget.exhausted() or "search space exhausted: no node has anything left to try"

    def progress(self) -> Progress:
        counts = Counter(n.result.status.value for n in self.tree if n.result is not None)
        best = self.tree.best()
        return Progress(
            run_id=self.run_id,
            strategy=self.strategy.name,
            budgets=self.config.budgets,
            evaluations=sum(counts.values()),
            in_flight=self._in_flight[_EVALUATE],
            elapsed_s=self.budget.elapsed_s,
            cost_usd=self.budget.cost_usd,
            root_ms=self.tree.root.time_ms,
            best_ms=best.time_ms,
            best_depth=best.depth,
            nodes=len(self.tree),
            status_counts=dict(sorted(counts.items())),
            reference_ms={name: t.median_ms for name, t in self.evaluator.reference.items()},
            duplicates=self.duplicates,
            not_applied=sum(len(n.notes) for n in self.tree),
        )

    def emit(self, kind: EventKind, message: str) -> None:
        if self.on_event is not None:
            self.on_event(SearchEvent(kind=kind, message=message, progress=self.progress()))


def _facts(diagnosis: DiagnosisSnapshot | None) -> DiagnosisFacts | None:
    if diagnosis is None:
        return None
    return DiagnosisFacts(diagnosis.bound, diagnosis.bottlenecks, diagnosis.roofline_fraction)


def _diagnose_batch(profiler: Profiler, nodes: tuple[Node, ...]) -> list[DiagnosisSnapshot | None]:
    """Diagnoses of ``nodes`` in order, from one ``diagnose_many`` call."""
    items: list[tuple[KernelSource, EvalResult]] = []
    for node in nodes:
        assert node.result is not None  # only evaluated nodes are queued for profiling
        items.append((node.kernel, node.result))
    diagnoses = profiler.diagnose_many(items)
    return [DiagnosisSnapshot.of(d) if d is not None else None for d in diagnoses]


def _outcome_text(node: Node) -> str:
    """One line for the live view: the edit and what came of it."""
    what = node.edit.summary(60) if node.edit is not None else "root"
    if node.result is None:
        return f"{what} → pending"
    if node.time_ms is None:
        lines = node.result.feedback().strip().splitlines() or [""]
        return f"{what} → {' '.join(lines[:2])[:120]}"
    text = f"{what} → {node.time_ms:.4f} ms"
    parent_ms = node.parent.time_ms if node.parent is not None else None
    if parent_ms:
        text += f" ({parent_ms / node.time_ms:.2f}x vs parent)"
    return text
