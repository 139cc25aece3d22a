"""The evaluation cache: each distinct source is evaluated once, concurrent requests join, errors propagate."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from optiml.errors import NoGPUError
from optiml.evaluate.cost import REUSED_NOTE, CostFunction, EvaluationCache
from optiml.kernel.source import KernelSource
from optiml.values import EvalResult, EvalStatus, TimingStats


class CountingEvaluator(CostFunction):
    """Evaluates one at a time (inheriting ``evaluate_many``); can be held mid-evaluation or made to fail."""

    def __init__(self) -> None:
        self._reference = {"eager": TimingStats.from_samples([1.0])}
        self.evaluated: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()
        self.error: Exception | None = None

    @property
    def reference(self) -> dict[str, TimingStats]:
        return self._reference

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        self.evaluated.append(kernel.digest)
        self.entered.set()
        self.release.wait(10)
        if self.error is not None:
            raise self.error
        timing = TimingStats.from_samples([0.5])
        return EvalResult(EvalStatus.OK, kernel_digest=kernel.digest, timing=timing, phase_seconds={"total": 1.0})

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        return [TimingStats.from_samples([0.4]) for _ in kernels]


def _kernel(i: int) -> KernelSource:
    return KernelSource(f"__global__ void kernel_{i}() {{}}\n")


def test_a_source_is_evaluated_once_and_repeats_say_their_result_is_reused() -> None:
    inner = CountingEvaluator()
    cache = EvaluationCache(inner)
    first = cache.evaluate(_kernel(1))
    again, other, twice = cache.evaluate_many([_kernel(1), _kernel(2), _kernel(2)])
    assert inner.evaluated == [_kernel(1).digest, _kernel(2).digest]
    assert first.timing == again.timing and REUSED_NOTE in again.warnings and REUSED_NOTE not in first.warnings
    assert again.phase_seconds == {"total": 0.0} and first.phase_seconds == {"total": 1.0}  # nothing ran twice
    assert REUSED_NOTE not in other.warnings and REUSED_NOTE in twice.warnings
    assert cache.hits == 2
    assert cache.reference is inner.reference and cache.retime([_kernel(1)], 3)[0].median_ms == 0.4


def test_a_request_for_a_kernel_in_flight_waits_for_that_evaluation() -> None:
    inner = CountingEvaluator()
    inner.release.clear()
    cache = EvaluationCache(inner)
    results: list[EvalResult] = []
    threads = [threading.Thread(target=lambda: results.append(cache.evaluate(_kernel(3)))) for _ in range(3)]
    threads[0].start()
    assert inner.entered.wait(10)
    for thread in threads[1:]:
        thread.start()
    inner.release.set()
    for thread in threads:
        thread.join(10)
    assert len(results) == 3 and inner.evaluated == [_kernel(3).digest]
    assert sum(REUSED_NOTE in r.warnings for r in results) == 2


def test_an_environment_error_reaches_every_waiting_caller_and_is_not_cached() -> None:
    inner = CountingEvaluator()
    inner.error = NoGPUError("no CUDA GPU is visible")
    cache = EvaluationCache(inner)
    with pytest.raises(NoGPUError):
        cache.evaluate(_kernel(4))
    inner.error = None
    assert cache.evaluate(_kernel(4)).ok  # evaluated afresh once the environment is fixed
    assert inner.evaluated == [_kernel(4).digest, _kernel(4).digest]


def test_sharing_a_cache_keeps_sharing_it() -> None:
    cache = EvaluationCache(CountingEvaluator())
    assert EvaluationCache.of(cache) is cache


def test_prefetch_hints_pass_through_except_for_kernels_already_judged() -> None:
    hinted: list[str] = []

    class Hinted(CountingEvaluator):
        def prefetch(self, kernels: Sequence[KernelSource]) -> None:
            hinted.extend(k.digest for k in kernels)

    cache = EvaluationCache(Hinted())
    cache.evaluate(_kernel(5))
    cache.prefetch([_kernel(5), _kernel(6)])
    assert hinted == [_kernel(6).digest]
    CountingEvaluator().prefetch([_kernel(7)])  # the protocol's default: a hint that does nothing
