"""Replay from a run store: every evaluation the store holds for one task, by kernel digest.

Each run's nodes were evaluated on a real GPU; a kernel verified in several runs (or re-timed at
the end of one) gives two medians of the same kernel, and their log ratios measure the run-to-run
noise. The first evaluation of a kernel (in run creation order) is its answer. Only runs of the
exact task source (``task_digest``) count: another version of the task is another landscape.
"""

from __future__ import annotations

import math
from collections import defaultdict

from optiml.kernel.source import KernelSource
from optiml.store import RunStore
from optiml.values import EvalResult, TimingStats


class StoredResults:
    """Recorded results of one task read from a :class:`RunStore` (a :class:`Record` for replay)."""

    def __init__(
        self, results: dict[str, EvalResult], medians: dict[str, list[float]], reference: dict[str, TimingStats]
    ) -> None:
        self.results = results
        self._medians = medians
        self._reference = reference

    @classmethod
    def from_store(cls, store: RunStore, task_digest: str) -> StoredResults:
        results: dict[str, EvalResult] = {}
        medians: dict[str, list[float]] = defaultdict(list)
        reference: dict[str, TimingStats] = {}
        for run in sorted(store.runs(), key=lambda r: r.created_at):
            if run.task_digest != task_digest:
                continue
            for digest, result in store.evaluations(run.id).items():
                results.setdefault(digest, result)
                if result.timing is not None:
                    medians[digest].append(result.timing.median_ms)
                if not reference and result.reference:
                    reference = dict(result.reference)
            for digest, timing in store.retimes(run.id).items():
                medians[digest].append(timing.median_ms)
        return cls(results, dict(medians), reference)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def reference(self) -> dict[str, TimingStats]:
        return dict(self._reference)

    def answer(self, kernel: KernelSource) -> EvalResult | None:
        return self.results.get(kernel.digest)

    def run_to_run_noise(self) -> float:
        """From kernels timed more than once: ``log`` ratios to their first median (0 with none)."""
        ratios = [math.log(m / times[0]) for times in self._medians.values() for m in times[1:] if times[0] > 0]
        if len(ratios) < 2:
            return 0.0
        return math.sqrt(sum(r * r for r in ratios) / len(ratios) / 2.0)
