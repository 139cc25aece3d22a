"""One search's evaluations spread over several GPUs, with every time kept in one GPU's units.

A :class:`GPUPool` is a cost function over one :class:`~optiml.evaluate.evaluator.Evaluator` per GPU
(each with its own judge, all sharing one compiler and its cache). An evaluation goes to the first
idle GPU, so a search with ``parallel_evaluations`` ≥ the number of GPUs keeps them all busy.

Times from different GPUs are never compared raw: two H200s of one host differ by a few per cent,
which is as large as many of the wins a search looks for. The first GPU is the *primary*: its
references are the search's references, and a result timed on another GPU has its timing scaled
by ``eager(primary) / eager(its GPU)`` — the ratio of the same PyTorch reference timed on both —
and says so in its warnings, with the raw figure. The verdict's interleaved re-timing
(:meth:`retime`) runs on the primary alone, so the speedup a run reports is one GPU's measurement.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from optiml.evaluate.cost import CostFunction
from optiml.evaluate.evaluator import Evaluator, TaskFacts
from optiml.kernel.source import KernelSource
from optiml.values import EvalResult, TimingStats

#: The reference the scale between two GPUs is taken from.
SCALE_REFERENCE = "eager"


class GPUPool(CostFunction):
    """Evaluates on whichever of ``members`` is idle; see the module docstring. Thread-safe."""

    def __init__(self, members: Sequence[Evaluator], names: Sequence[str] | None = None) -> None:
        if not members:
            raise ValueError("a GPU pool needs at least one evaluator")
        self.members = list(members)
        self.names = list(names) if names is not None else [f"GPU {i}" for i in range(len(self.members))]
        self._idle: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(len(self.members)):
            self._idle.put(index)
        self._lock = threading.Lock()
        self.evaluations = [0] * len(self.members)  # per member, for the run's summary

    @property
    def primary(self) -> Evaluator:
        return self.members[0]

    @property
    def reference(self) -> dict[str, TimingStats]:
        return self.primary.reference

    def prepare(self) -> TaskFacts:
        """Prepare every GPU's judge in parallel (inputs, references, the round trip); the primary's facts."""
        with ThreadPoolExecutor(len(self.members), thread_name_prefix="optiml-gpu-prepare") as pool:
            facts = list(pool.map(lambda member: member.prepare(), self.members))
        return facts[0]

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        """Built first (a GPU is not held while nvcc runs), then judged on the first idle GPU."""
        if self.primary.passes_screening(kernel):  # a rejected source is never compiled
            self.primary.compiler.compile(kernel)  # joins a prefetched build; the member's is then a cache hit
        index = self._idle.get()
        try:
            result = self.members[index].evaluate(kernel)
        finally:
            self._idle.put(index)
        with self._lock:
            self.evaluations[index] += 1
        return self._in_primary_units(index, result)

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        """All compiled on the shared pool first, then evaluated on the GPUs in parallel; input order."""
        self.prefetch(kernels)
        with ThreadPoolExecutor(len(self.members), thread_name_prefix="optiml-gpu-pool") as pool:
            return list(pool.map(self.evaluate, kernels))

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        return self.primary.retime(kernels, rounds)

    def retime_with_references(
        self, kernels: Sequence[KernelSource], rounds: int
    ) -> tuple[list[TimingStats], dict[str, TimingStats]]:
        return self.primary.retime_with_references(kernels, rounds)

    def prefetch(self, kernels: Sequence[KernelSource]) -> None:
        self.primary.prefetch(kernels)  # the members share the primary's compiler

    def close(self) -> None:
        for member in self.members:
            member.close()

    def _in_primary_units(self, index: int, result: EvalResult) -> EvalResult:
        if index == 0 or result.timing is None:
            return result
        scale = self.scale(index)
        if scale is None:
            note = f"timed on {self.names[index]}; not scaled: a reference time is missing on one of the GPUs"
            return replace(result, warnings=[*result.warnings, note])
        timing = result.timing
        scaled = replace(
            timing,
            median_ms=timing.median_ms * scale,
            q1_ms=timing.q1_ms * scale,
            q3_ms=timing.q3_ms * scale,
            min_ms=timing.min_ms * scale,
            max_ms=timing.max_ms * scale,
            wall_median_ms=timing.wall_median_ms * scale,
        )
        note = (
            f"timed on {self.names[index]} ({timing.median_ms:.4f} ms); scaled by {scale:.4f} = "
            f"{SCALE_REFERENCE}({self.names[0]}) / {SCALE_REFERENCE}({self.names[index]}) into {self.names[0]}'s units"
        )
        return replace(
            result,
            timing=scaled,
            floor_ms=result.floor_ms * scale if result.floor_ms is not None else None,
            reference=dict(self.reference),
            warnings=[*result.warnings, note],
        )

    def scale(self, index: int) -> float | None:
        """``eager(primary) / eager(member index)``, or None while either is unknown."""
        mine = self.members[index].reference.get(SCALE_REFERENCE)
        if SCALE_REFERENCE not in self.reference:
            self.primary.prepare()  # idempotent: the primary's references are what the others scale to
        primary = self.reference.get(SCALE_REFERENCE)
        if mine is None or primary is None or mine.median_ms <= 0:
            return None
        return primary.median_ms / mine.median_ms
