"""The search machinery on the seeded synthetic landscape: strategies, transpositions, budgets, feedback."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace

import pytest
from search_helpers import (
    AllFailEvaluator,
    FailingProposer,
    FakeDiagnosis,
    KnobProfiler,
    RecordingProposer,
    SlowProposer,
)

from optiml.errors import ConfigError
from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposer
from optiml.search import Budgets, SearchConfig, SearchError, SearchEvent, run_search
from optiml.search.events import EventKind
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel, read_knobs
from optiml.search.outcome import SearchOutcome
from optiml.search.protocols import Profiler
from optiml.store import RunStore
from optiml.task import Task
from optiml.values import EvalResult

SEQUENTIAL = SearchConfig(strategy="mcts", parallel_evaluations=1, parallel_proposals=1, reproducible=True)


def search(
    task: Task,
    store: RunStore,
    config: SearchConfig,
    *,
    evaluator: LandscapeEvaluator | None = None,
    proposers: Sequence[Proposer] | None = None,
    profiler: Profiler | None = None,
    events: list[SearchEvent] | None = None,
    seed: int = 0,
) -> SearchOutcome:
    evaluator = evaluator or LandscapeEvaluator(Landscape(seed=seed))
    return run_search(
        task,
        landscape_kernel(),
        evaluator,
        proposers if proposers is not None else [KnobProposer(seed)],
        profiler,
        store,
        config,
        on_event=events.append if events is not None else None,
    )


def true_speedup(landscape: Landscape, outcome: SearchOutcome) -> float:
    knobs = read_knobs(outcome.best_kernel.code)
    assert knobs is not None
    return landscape.true_ms(read_knobs(landscape_kernel().code) or {}) / landscape.true_ms(knobs)


@pytest.mark.parametrize("strategy", ["mcts", "greedy"])
def test_strategies_find_a_verified_real_speedup(task: Task, store: RunStore, strategy: str) -> None:
    landscape = Landscape(seed=3)
    config = replace(SEQUENTIAL, strategy=strategy, budgets=Budgets(max_evaluations=80))
    outcome = search(task, store, config, evaluator=LandscapeEvaluator(landscape))
    optimum_speedup = landscape.true_ms(read_knobs(landscape_kernel().code) or {}) / landscape.optimum()[1]
    assert outcome.confirmed and outcome.improved
    assert true_speedup(landscape, outcome) >= 0.8 * optimum_speedup
    assert outcome.speedup.significant and outcome.speedup.value > 1.5
    assert outcome.evaluations == 80 and outcome.stop_reason == "evaluation budget spent (80 evaluations)"
    assert [s.gain for s in outcome.path] and outcome.path[-1].digest == outcome.best_digest
    assert set(outcome.reference_speedups) == {"eager", "compile"}


@pytest.mark.parametrize("strategy", ["mcts", "greedy", "best-of-n"])
def test_no_kernel_is_evaluated_twice_even_with_evaluations_in_flight(
    task: Task, store: RunStore, strategy: str
) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=1), delay_s=0.02)
    proposers = [KnobProposer(1, name="a"), KnobProposer(2, name="b")]
    config = SearchConfig(strategy=strategy, parallel_evaluations=3, parallel_proposals=2, budgets=Budgets(40))
    outcome = search(task, store, config, evaluator=evaluator, proposers=proposers)
    assert max(evaluator.calls.values()) == 1
    assert sum(evaluator.calls.values()) == outcome.evaluations == store.evaluation_count(outcome.run_id)
    if strategy != "best-of-n":  # the root has only four neighbours
        assert evaluator.max_in_flight == 3
        assert outcome.evaluations == 40


def test_best_of_n_only_edits_the_root(task: Task, store: RunStore) -> None:
    recorder = RecordingProposer(KnobProposer(0))
    outcome = search(task, store, replace(SEQUENTIAL, strategy="best-of-n"), proposers=[recorder])
    assert all(call.context.kernel == landscape_kernel() for call in recorder.calls)
    assert {n.depth for n in store.nodes(outcome.run_id)} == {0, 1}
    assert len(outcome.path) <= 1
    assert outcome.stop_reason.startswith("search space exhausted")


def test_best_of_n_samples_in_parallel_but_mcts_asks_once_per_node(task: Task, store: RunStore) -> None:
    sampler = SlowProposer(KnobProposer(0), delay_s=0.05)
    config = SearchConfig(strategy="best-of-n", parallel_proposals=3, proposals_per_request=1, budgets=Budgets(5))
    search(task, store, config, proposers=[sampler])
    assert sampler.max_in_flight == 3
    one_at_a_time = SlowProposer(KnobProposer(0), delay_s=0.05)
    config = SearchConfig(strategy="mcts", parallel_proposals=3, proposals_per_request=1, budgets=Budgets(2))
    search(task, store, config, proposers=[one_at_a_time])  # only the root can be expanded
    assert one_at_a_time.max_in_flight == 1


def test_greedy_always_widens_the_fastest_open_kernel(task: Task, store: RunStore) -> None:
    recorder = RecordingProposer(KnobProposer(5))
    config = replace(SEQUENTIAL, strategy="greedy", prune_after_failures=50, budgets=Budgets(50))
    outcome = search(task, store, config, proposers=[recorder], seed=5)
    times = store.verified_times(outcome.run_id)
    assert len(recorder.calls) > 10
    empty_answers: dict[str, int] = {}
    for call in recorder.calls:
        known = [d for d in call.context.tried_digests if d in times]
        open_ = [d for d in known if empty_answers.get(d, 0) < config.max_dry_requests]
        fastest = min(open_, key=lambda d: times[d])
        assert call.context.kernel.digest == fastest
        if not call.proposals:
            empty_answers[fastest] = empty_answers.get(fastest, 0) + 1


@pytest.mark.parametrize("parallel", [1, 3])
def test_reproducible_runs_repeat_exactly(task: Task, store: RunStore, parallel: int) -> None:
    config = SearchConfig(parallel_evaluations=parallel, parallel_proposals=2, reproducible=True, budgets=Budgets(30))
    outcomes = [
        search(task, store, config, evaluator=LandscapeEvaluator(Landscape(seed=7), delay_s=delay), seed=7)
        for delay in (0.0, 0.002)  # different timing, same run
    ]
    order = [list(store.evaluations(o.run_id)) for o in outcomes]
    assert order[0] == order[1] and len(order[0]) == 30
    assert outcomes[0].best_digest == outcomes[1].best_digest


def test_failure_messages_reach_the_proposers_through_the_history(task: Task, store: RunStore) -> None:
    recorder = RecordingProposer(KnobProposer(0, unusable_rate=0.3))
    landscape = Landscape(seed=0, fail_rate=0.3)
    config = replace(SEQUENTIAL, budgets=Budgets(60), history_limit=50)
    search(task, store, config, evaluator=LandscapeEvaluator(landscape), proposers=[recorder])
    entries = [e for call in recorder.calls for e in call.context.history]
    statuses = {e.status for e in entries}
    assert {"runtime_error", "not_applied", "ok"} <= statuses
    crash = next(e for e in entries if e.status == "runtime_error")
    assert "illegal memory access" in crash.message
    assert any("no line `#define" in e.message for e in entries if e.status == "not_applied")


def test_compile_errors_close_a_node_whose_children_keep_failing(task: Task, store: RunStore) -> None:
    root = landscape_kernel()
    evaluator = AllFailEvaluator(Landscape(seed=0), root.digest)
    proposers = [KnobProposer(0), KnobProposer(1)]
    config = replace(SEQUENTIAL, prune_after_failures=3, proposals_per_request=2, budgets=Budgets(50))
    outcome = search(task, store, config, evaluator=evaluator, proposers=proposers)
    assert outcome.status_counts == {"ok": 1, "compile_error": 3}
    assert outcome.stop_reason.startswith("search space exhausted")
    assert not outcome.improved and not outcome.confirmed
    root_node = store.nodes(outcome.run_id)[0]
    assert root_node.closed_reason == "its last 3 children failed"


def test_best_of_n_never_closes_the_root_for_failures(task: Task, store: RunStore) -> None:
    evaluator = AllFailEvaluator(Landscape(seed=0), landscape_kernel().digest)
    config = replace(SEQUENTIAL, strategy="best-of-n", prune_after_failures=2, budgets=Budgets(50))
    outcome = search(task, store, config, evaluator=evaluator)
    assert outcome.status_counts == {"ok": 1, "compile_error": 4}  # all four neighbours of the root


def test_time_budget_ends_the_run_cleanly(task: Task, store: RunStore) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=0), delay_s=0.05)
    config = SearchConfig(budgets=Budgets(max_evaluations=None, max_seconds=0.5))
    started = time.monotonic()
    outcome = search(task, store, config, evaluator=evaluator)
    assert outcome.stop_reason == "time budget spent (0.5 s)"
    assert time.monotonic() - started < 3.0
    assert 3 <= outcome.evaluations == store.evaluation_count(outcome.run_id)
    assert store.get_run(outcome.run_id).status == "finished"


def test_cost_budget_stops_asking_but_evaluates_what_was_paid_for(task: Task, store: RunStore) -> None:
    proposer = KnobProposer(0, cost_per_call=0.1)
    config = replace(SEQUENTIAL, budgets=Budgets(max_evaluations=100, max_cost_usd=0.25))
    outcome = search(task, store, config, proposers=[proposer])
    assert proposer.spent_usd == pytest.approx(0.3)  # the third call crossed the limit
    assert outcome.cost_usd == pytest.approx(0.3)
    assert outcome.stop_reason == "LLM cost budget spent ($0.25)"
    edits = store.edits(outcome.run_id)
    assert edits and all(e.outcome != "untried" for e in edits)  # every paid-for candidate was tried


def test_a_broken_proposer_ends_the_run_with_its_message(task: Task, store: RunStore) -> None:
    events: list[SearchEvent] = []
    config = replace(SEQUENTIAL, max_proposer_errors=2)
    outcome = search(task, store, config, proposers=[FailingProposer()], events=events)
    assert outcome.stop_reason.startswith("proposers keep failing (2 in a row)")
    assert "RuntimeError: index out of range in the proposer" in outcome.stop_reason
    assert sum(e.kind is EventKind.WARNING for e in events) == 2


def test_a_failing_root_is_a_one_line_search_error(task: Task, store: RunStore) -> None:
    root_fails = AllFailEvaluator(Landscape(), root_digest="not the root")
    with pytest.raises(SearchError, match=r"^the starting kernel does not pass: compile_error: error: expected ';'$"):
        search(task, store, SEQUENTIAL, evaluator=root_fails)
    run = store.runs()[0]
    assert run.status == "failed" and run.stop_reason.startswith("the starting kernel does not pass")
    assert store.evaluation_count(run.id) == 1


def test_a_search_needs_a_proposer(task: Task, store: RunStore) -> None:
    with pytest.raises(ConfigError, match="at least one proposer"):
        search(task, store, SEQUENTIAL, proposers=[])


def test_only_candidates_near_the_best_are_profiled(task: Task, store: RunStore) -> None:
    profiler = KnobProfiler()
    recorder = RecordingProposer(KnobProposer(0))
    config = replace(SEQUENTIAL, budgets=Budgets(40), profile_margin=0.05)
    outcome = search(task, store, config, proposers=[recorder], profiler=profiler)
    order = list(store.evaluations(outcome.run_id))
    times = store.verified_times(outcome.run_id)
    assert profiler.calls[0] == order[0]  # the root is always profiled
    assert 1 < len(profiler.calls) < len(times)
    for digest in profiler.calls:
        best_so_far = min(t for d, t in times.items() if order.index(d) <= order.index(digest))
        assert times[digest] <= best_so_far * 1.05
    assert set(store.profiles(outcome.run_id)) == set(profiler.calls)
    diagnosed = [c for c in recorder.calls if c.context.diagnosis_text]
    assert diagnosed and all("memory-bound" in c.context.diagnosis_text for c in diagnosed)
    if outcome.best_digest in profiler.calls:
        assert outcome.roofline_fraction is not None
    assert outcome.root_roofline_fraction == pytest.approx(0.1)


def test_a_failing_profiler_costs_only_the_diagnosis(task: Task, store: RunStore) -> None:
    events: list[SearchEvent] = []
    config = replace(SEQUENTIAL, budgets=Budgets(15))
    outcome = search(task, store, config, profiler=KnobProfiler(fail=True), events=events)
    assert outcome.evaluations == 15
    assert any("ERR_NVGPUCTRPERM" in e.message for e in events if e.kind is EventKind.WARNING)
    assert store.profiles(outcome.run_id) == {}


def test_events_report_progress(task: Task, store: RunStore) -> None:
    events: list[SearchEvent] = []
    outcome = search(task, store, replace(SEQUENTIAL, budgets=Budgets(12)), events=events)
    kinds = [e.kind for e in events]
    assert kinds[0] is EventKind.STARTED and kinds[-1] is EventKind.FINISHED
    assert EventKind.RETIMED in kinds and EventKind.PROPOSED in kinds
    evaluated = [e for e in events if e.kind is EventKind.EVALUATED]
    assert len(evaluated) == 12 and evaluated[0].message.startswith("root: ")
    assert [e.progress.evaluations for e in evaluated] == list(range(1, 13))
    last = events[-1].progress
    assert last.run_id == outcome.run_id and last.best_ms is not None and last.best_speedup is not None


class BatchingProfiler(KnobProfiler):
    """A slow profiler with ``diagnose_many``: candidates that arrive while it works must share a call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[FakeDiagnosis | None]:
        self.batches.append(len(items))
        time.sleep(0.2)
        return super().diagnose_many(items)


def test_candidates_waiting_for_the_profiler_share_one_call(task: Task, store: RunStore) -> None:
    profiler = BatchingProfiler()
    config = SearchConfig(
        parallel_evaluations=3, budgets=Budgets(30), profile_margin=100.0, profile_batch=3, retime_top_k=0
    )
    outcome = search(
        task, store, config, evaluator=LandscapeEvaluator(Landscape(seed=1), delay_s=0.02), profiler=profiler
    )
    assert max(profiler.batches) > 1  # a batch formed while the profiler was busy
    assert max(profiler.batches) <= 3  # and never beyond profile_batch
    assert sum(profiler.batches) == len(profiler.calls)
    verified = store.verified_times(outcome.run_id)
    assert set(store.profiles(outcome.run_id)) == set(profiler.calls) == set(verified)


class GpuLock:
    """One lock for the evaluator and the profiler, as on the GPU: ncu and timings never overlap."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class LockedLandscapeEvaluator(LandscapeEvaluator):
    def __init__(self, landscape: Landscape, gpu: GpuLock) -> None:
        super().__init__(landscape, delay_s=0.01)
        self.gpu = gpu

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        with self.gpu.lock:
            return super().evaluate(kernel)


class LockedBatchingProfiler(BatchingProfiler):
    def __init__(self, gpu: GpuLock) -> None:
        super().__init__()
        self.gpu = gpu

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[FakeDiagnosis | None]:
        with self.gpu.lock:
            return super().diagnose_many(items)


@pytest.mark.parametrize("strategy", ["mcts", "greedy"])
def test_profiling_that_holds_the_gpu_still_batches(task: Task, store: RunStore, strategy: str) -> None:
    """Evaluations cannot run while ncu does, so nothing arrives during a launch: candidates must
    wait for a full batch (or an idle GPU) instead of each paying ncu's start-up alone."""
    gpu = GpuLock()
    profiler = LockedBatchingProfiler(gpu)
    config = SearchConfig(strategy=strategy, budgets=Budgets(30), profile_margin=100.0, retime_top_k=0)
    evaluator = LockedLandscapeEvaluator(Landscape(seed=2), gpu)
    outcome = search(task, store, config, evaluator=evaluator, profiler=profiler)
    profiled = sum(profiler.batches)
    assert set(store.profiles(outcome.run_id)) == set(store.verified_times(outcome.run_id))  # none left behind
    assert max(profiler.batches) <= config.profile_batch
    # MCTS works elsewhere in the tree while candidates wait, so batches fill; greedy waits for its
    # new incumbent's diagnosis, so its batches are the evaluations that were in flight together.
    least_mean = 2.5 if strategy == "mcts" else 0.9 * config.parallel_evaluations
    assert profiled / len(profiler.batches) >= least_mean, profiler.batches


def test_mcts_follows_improvements_before_widening_their_parents(task: Task, store: RunStore) -> None:
    """deepen_first: on the landscape's mostly separable knobs, small budgets go much further."""

    def geomean_speedup(deepen_first: bool) -> float:
        product = 1.0
        for seed in range(4):
            landscape = Landscape(seed=seed)
            config = replace(SEQUENTIAL, budgets=Budgets(14), retime_top_k=0, deepen_first=deepen_first)
            outcome = search(task, store, config, evaluator=LandscapeEvaluator(landscape), seed=seed)
            product *= true_speedup(landscape, outcome)
        return product ** (1 / 4)

    assert geomean_speedup(True) > 1.15 * geomean_speedup(False)


class HeldProfiler(KnobProfiler):
    """A profiler whose first launch waits until the search has evaluated ``release_after`` kernels
    (a search that waited for the diagnosis would stall here until the safety timeout)."""

    def __init__(self, evaluator: LandscapeEvaluator, release_after: int) -> None:
        super().__init__()
        self.evaluator = evaluator
        self.release_after = release_after
        self.waited_out = False

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[FakeDiagnosis | None]:
        deadline = time.monotonic() + 10.0
        while sum(self.evaluator.calls.values()) < self.release_after and not self.waited_out:
            time.sleep(0.005)
            self.waited_out = time.monotonic() > deadline
        return super().diagnose_many(items)


@pytest.mark.parametrize("strategy", ["mcts", "greedy"])
def test_profiling_is_advisory_the_search_never_waits_for_a_diagnosis(
    task: Task, store: RunStore, strategy: str
) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=2))
    profiler = HeldProfiler(evaluator, release_after=12)
    recorder = RecordingProposer(KnobProposer(2))
    config = SearchConfig(strategy=strategy, budgets=Budgets(20), profile_margin=100.0, retime_top_k=0)
    outcome = search(task, store, config, evaluator=evaluator, proposers=[recorder], profiler=profiler)
    assert not profiler.waited_out  # the first launch (the root's) was held while 12 kernels were evaluated
    assert outcome.evaluations == 20
    rewards = [n.reward for n in store.nodes(outcome.run_id)]
    assert all(r is not None for r in rewards)  # every node final once timed
    root_requests = [c for c in recorder.calls if c.context.kernel == landscape_kernel()]
    assert root_requests[0].context.diagnosis is None  # the root was expanded before its diagnosis came
    assert profiler.calls[0] == landscape_kernel().digest and store.profiles(outcome.run_id)
    # diagnoses that arrived fed the requests made after them (test_only_candidates_near_the_best_are_profiled
    # shows that they do arrive in a sequential run)
    assert all("memory-bound" in c.context.diagnosis_text for c in recorder.calls if c.context.diagnosis is not None)


class PrefetchRecordingEvaluator(LandscapeEvaluator):
    """Records the prefetch hints the engine gives, and which kernels were evaluated."""

    def __init__(self, landscape: Landscape) -> None:
        super().__init__(landscape)
        self.hinted: list[str] = []

    def prefetch(self, kernels: Sequence[KernelSource]) -> None:
        with self._lock:
            self.hinted.extend(k.digest for k in kernels)


def test_queued_candidates_are_handed_to_the_compile_pool_before_they_are_tried(task: Task, store: RunStore) -> None:
    evaluator = PrefetchRecordingEvaluator(Landscape(seed=3))
    outcome = search(task, store, replace(SEQUENTIAL, budgets=Budgets(max_evaluations=12)), evaluator=evaluator)
    evaluated = set(evaluator.calls) - {landscape_kernel().digest}
    assert outcome.evaluations >= 5 and evaluated
    assert evaluated <= set(evaluator.hinted)  # every candidate tried was prefetched first
    assert len(evaluator.hinted) == len(set(evaluator.hinted))  # each one hinted once
