"""The final re-timing: only a win beyond the noise, measured interleaved with the root, is accepted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from search_helpers import BrokenRetimeEvaluator

from optiml.kernel.source import KernelSource
from optiml.search import Budgets, SearchConfig, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.store import RunStore
from optiml.task import Task
from optiml.values import TimingStats

CONFIG = SearchConfig(parallel_evaluations=1, parallel_proposals=1, reproducible=True, budgets=Budgets(30))


def test_a_lucky_search_time_measurement_is_not_accepted(task: Task, store: RunStore) -> None:
    # flat landscape: every kernel is as fast as the root, but search-time timings read 10 % fast
    evaluator = LandscapeEvaluator(Landscape(seed=0, strength=0.0, fail_rate=0.0), optimism=0.1)
    outcome = run_search(task, landscape_kernel(), evaluator, [KnobProposer(0)], None, store, CONFIG)
    assert not outcome.confirmed and not outcome.improved
    assert outcome.best_digest == outcome.root_digest and outcome.path == ()
    assert outcome.note == "no candidate beat the root beyond the noise when re-timed"
    assert len(outcome.retimed) == CONFIG.retime_top_k and not any(r.significant for r in outcome.retimed)
    assert 0.97 < outcome.speedup.value < 1.03
    run = store.get_run(outcome.run_id)
    assert run.best_digest == outcome.root_digest and not run.confirmed


def test_top_candidates_are_retimed_interleaved_with_the_root(task: Task, store: RunStore) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=2))
    config = replace(CONFIG, retime_top_k=3, retime_rounds=7)
    outcome = run_search(task, landscape_kernel(), evaluator, [KnobProposer(2)], None, store, config)
    assert len(evaluator.retimes) == 1
    retimed = evaluator.retimes[0]
    ranked = sorted(
        (r.time_ms, d) for d, r in store.evaluations(outcome.run_id).items() if r.ok and d != outcome.root_digest
    )
    assert retimed == [outcome.root_digest] + [d for _, d in ranked[:3]]
    assert outcome.confirmed and outcome.best_digest in retimed
    assert outcome.best_timing.trials == 7 * 5  # the re-timing's figures, not the search's
    assert set(store.retimes(outcome.run_id)) == set(retimed)


def test_a_failed_retiming_falls_back_unconfirmed(task: Task, store: RunStore) -> None:
    evaluator = BrokenRetimeEvaluator(Landscape(seed=2))
    outcome = run_search(task, landscape_kernel(), evaluator, [KnobProposer(2)], None, store, CONFIG)
    assert not outcome.confirmed and outcome.improved  # the search-time win is clear, but unconfirmed
    assert outcome.note == "re-timing failed (RuntimeError: the GPU worker died)"
    assert outcome.speedup.value > 1.2


def test_retiming_can_be_disabled(task: Task, store: RunStore) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=2))
    outcome = run_search(
        task, landscape_kernel(), evaluator, [KnobProposer(2)], None, store, replace(CONFIG, retime_top_k=0)
    )
    assert evaluator.retimes == [] and outcome.note == "re-timing is disabled" and not outcome.confirmed


class RetimedReferences(LandscapeEvaluator):
    """A landscape whose re-timing also times eager in the same rounds, reading it 20 % slower than at the start."""

    def retime_with_references(
        self, kernels: Sequence[KernelSource], rounds: int
    ) -> tuple[list[TimingStats], dict[str, TimingStats]]:
        eager = self.reference["eager"]
        slower = replace(eager, median_ms=eager.median_ms * 1.2, q1_ms=eager.q1_ms * 1.2, q3_ms=eager.q3_ms * 1.2)
        return self.retime(kernels, rounds), {"eager": slower}


def test_references_timed_in_the_final_rounds_are_what_the_speedups_divide(task: Task, store: RunStore) -> None:
    evaluator = RetimedReferences(Landscape(seed=2))
    outcome = run_search(task, landscape_kernel(), evaluator, [KnobProposer(2)], None, store, CONFIG)
    eager = outcome.reference_timings["eager"]
    assert outcome.references_retimed
    assert eager.median_ms == evaluator.reference["eager"].median_ms * 1.2
    assert outcome.reference_speedups["eager"].value == eager.median_ms / outcome.best_timing.median_ms
    assert store.retimed_references(outcome.run_id) == {"eager": eager}
    assert not any(key.startswith("reference:") for key in store.retimes(outcome.run_id))


def test_without_retimed_references_the_start_ones_stand(task: Task, store: RunStore) -> None:
    evaluator = LandscapeEvaluator(Landscape(seed=2))
    outcome = run_search(task, landscape_kernel(), evaluator, [KnobProposer(2)], None, store, CONFIG)
    assert not outcome.references_retimed
    assert outcome.reference_timings == evaluator.reference
    assert store.retimed_references(outcome.run_id) == {}
