"""The cost function every consumer of evaluations codes against, and its cache.

Kernel Tuner's lesson: the search strategy, the generator and the benchmark runner all ask one
*cost function* for the cost of a candidate and never touch a GPU themselves. :class:`CostFunction`
is that boundary: :class:`optiml.evaluate.evaluator.Evaluator` is the real one (compile, screen,
verify and time in the isolated judge, every phase's wall time in ``phase_seconds``, including
``gpu_wait``, the time spent queued for the GPU), and the search's synthetic and replayed landscapes
are stand-ins for tests and benchmarks.

:class:`EvaluationCache` wraps any cost function so that each distinct kernel (by source digest) is
evaluated once per process however many callers ask for it — a thought and a repair that converge
on one source, the root a generation found and the search then starts from — and a request for a
kernel being evaluated on another thread waits for that evaluation instead of starting a second one.
Kernels whose sources differ but whose builds are identical are caught one level down, by the
evaluator's binary-digest reuse.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Protocol

from optiml.kernel.source import KernelSource
from optiml.values import EvalResult, TimingStats

REUSED_NOTE = "evaluated earlier in this process (same source): its result is reused, not repeated"


class CostFunction(Protocol):
    """Turns candidates into results. Thread-safe: callers evaluate from pools.

    Implementations that evaluate one at a time may subclass this protocol to inherit
    :meth:`evaluate_many`."""

    @property
    def reference(self) -> dict[str, TimingStats]:
        """Timings of the PyTorch references (``"eager"``, ``"eager_tf32"``, ``"compile"``); may be empty."""
        ...

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        """Compile, verify and time one kernel; failures are results, never raised (an environment
        error — no GPU, no nvcc, a broken worker — is raised)."""
        ...

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        """Results in input order; the real evaluator compiles them in parallel first."""
        return [self.evaluate(kernel) for kernel in kernels]

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        """Time already-verified kernels interleaved (A B C A B C …); results in the given order."""
        ...

    def retime_with_references(
        self, kernels: Sequence[KernelSource], rounds: int
    ) -> tuple[list[TimingStats], dict[str, TimingStats]]:
        """:meth:`retime`, and the references of :attr:`reference` timed again in the same rounds, so a
        speedup over them is read in one state of the GPU. The default times no reference (``{}``: the
        caller keeps the ones timed at the start); the real evaluator times them all."""
        return self.retime(kernels, rounds), {}

    def prefetch(self, kernels: Sequence[KernelSource]) -> None:
        """A hint: these will likely be evaluated soon (the real evaluator starts compiling them on its
        compile pool, off the critical path, while the GPU times others). Returns at once."""
        return None


class EvaluationCache(CostFunction):
    """A cost function that evaluates each distinct kernel once (see the module docstring)."""

    def __init__(self, inner: CostFunction) -> None:
        self.inner = inner
        self.hits = 0  # requests answered from the cache or by joining an evaluation in flight
        self._results: dict[str, EvalResult] = {}
        self._in_flight: dict[str, Future[EvalResult]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, evaluator: CostFunction) -> EvaluationCache:
        """``evaluator`` itself when it is a cache already (callers that share one keep sharing it)."""
        return evaluator if isinstance(evaluator, EvaluationCache) else cls(evaluator)

    @property
    def reference(self) -> dict[str, TimingStats]:
        return self.inner.reference

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        return self.evaluate_many([kernel])[0]

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        mine: dict[str, Future[EvalResult]] = {}
        theirs: dict[str, Future[EvalResult]] = {}
        todo: list[KernelSource] = []
        with self._lock:
            for kernel in kernels:
                digest = kernel.digest
                if digest in self._results or digest in mine or digest in theirs:
                    continue
                if digest in self._in_flight:
                    theirs[digest] = self._in_flight[digest]
                    continue
                mine[digest] = self._in_flight[digest] = Future()
                todo.append(kernel)
        if todo:
            self._evaluate_mine(todo, mine)
        for future in theirs.values():
            future.result()  # raises what the other caller's evaluation raised
        first = {kernel.digest for kernel in todo}
        answers = []
        with self._lock:
            for kernel in kernels:
                result = self._results[kernel.digest]
                if kernel.digest in first:
                    first.discard(kernel.digest)  # the evaluation made for this request is its own
                    answers.append(result)
                else:
                    self.hits += 1
                    answers.append(_reused(result))
        return answers

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        return self.inner.retime(kernels, rounds)

    def retime_with_references(
        self, kernels: Sequence[KernelSource], rounds: int
    ) -> tuple[list[TimingStats], dict[str, TimingStats]]:
        return self.inner.retime_with_references(kernels, rounds)

    def prefetch(self, kernels: Sequence[KernelSource]) -> None:
        with self._lock:
            fresh = [k for k in kernels if k.digest not in self._results and k.digest not in self._in_flight]
        if fresh:
            self.inner.prefetch(fresh)

    def _evaluate_mine(self, todo: list[KernelSource], mine: dict[str, Future[EvalResult]]) -> None:
        try:
            results = self.inner.evaluate_many(todo)
        except BaseException as exc:
            with self._lock:
                for digest, future in mine.items():
                    del self._in_flight[digest]
                    future.set_exception(exc)
            raise
        with self._lock:
            for kernel, result in zip(todo, results, strict=True):
                self._results[kernel.digest] = result
                del self._in_flight[kernel.digest]
        for future, result in zip(mine.values(), results, strict=True):
            future.set_result(result)


def _reused(result: EvalResult) -> EvalResult:
    """A copy for another request: the same verdict, no phase time of its own (nothing was run)."""
    return replace(result, warnings=[*result.warnings, REUSED_NOTE], phase_seconds={"total": 0.0})
