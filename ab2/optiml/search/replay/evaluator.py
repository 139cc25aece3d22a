"""The replay evaluator: recorded results served as a stand-in GPU (Kernel Tuner's simulation runner).

It satisfies :class:`optiml.evaluate.cost.CostFunction`. ``evaluate(kernel)`` asks its records in
order; the first that knows the kernel answers, and its recorded result comes back with the
timing multiplied by ``exp(N(0, noise))`` — ``noise`` defaults to the run-to-run noise the first
record measured, so a replayed search sees the same spread between two evaluations of a kernel as
the GPU showed. The draw is seeded by (seed, kernel, how many times it was asked), so a replay is
reproducible whatever the thread order, and two seeds give two plausible runs of the same
landscape. ``retime`` answers the same way, one draw per kernel per call. A kernel no record
knows gets ``rejected`` with "not in the record" and is counted in :attr:`misses`.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from optiml.evaluate.cost import CostFunction
from optiml.kernel.source import KernelSource
from optiml.search.replay.record import scale_timing
from optiml.values import EvalResult, EvalStatus, TimingStats

NOT_RECORDED = "not in the record: the replayed landscape has no result for this kernel"


class Record(Protocol):
    """A source of recorded results."""

    @property
    def reference(self) -> dict[str, TimingStats]:
        """The PyTorch reference timings recorded with it."""
        ...

    def answer(self, kernel: KernelSource) -> EvalResult | None:
        """The recorded result of ``kernel``, or None when the record does not know it."""
        ...

    def run_to_run_noise(self) -> float:
        """Relative standard deviation of one kernel's median between two evaluations."""
        ...


class ReplayEvaluator(CostFunction):
    """Answers evaluations from ``records`` (see the module docstring); thread-safe."""

    def __init__(self, records: Sequence[Record], *, seed: int = 0, noise: float | None = None) -> None:
        if not records:
            raise ValueError("a replay evaluator needs at least one record")
        self.records = list(records)
        self.seed = seed
        self.noise = self.records[0].run_to_run_noise() if noise is None else noise
        self.calls: Counter[str] = Counter()  # digest → evaluate() calls
        self.misses: Counter[str] = Counter()  # digest → evaluate() calls no record answered
        self._retimes = 0
        self._lock = threading.Lock()

    @property
    def reference(self) -> dict[str, TimingStats]:
        return dict(self.records[0].reference)

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        digest = kernel.digest
        with self._lock:
            self.calls[digest] += 1
            occurrence = self.calls[digest]
        recorded = self._recorded(kernel)
        if recorded is None:
            with self._lock:
                self.misses[digest] += 1
            return EvalResult(EvalStatus.REJECTED, NOT_RECORDED, kernel_digest=digest)
        timing = recorded.timing
        if recorded.ok and timing is not None:
            timing = self._jitter(timing, "evaluate", digest, occurrence)
        return replace(recorded, kernel_digest=digest, timing=timing, reference=self.reference)

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        with self._lock:
            self._retimes += 1
            call = self._retimes
        timings = []
        for position, kernel in enumerate(kernels):
            recorded = self._recorded(kernel)
            if recorded is None or recorded.timing is None:
                raise ValueError(f"kernel {kernel.digest} has no recorded timing to re-time")
            timings.append(self._jitter(recorded.timing, "retime", kernel.digest, call, position))
        return timings

    def _recorded(self, kernel: KernelSource) -> EvalResult | None:
        for record in self.records:
            found = record.answer(kernel)
            if found is not None:
                return found
        return None

    def _jitter(self, timing: TimingStats, *key: object) -> TimingStats:
        if self.noise <= 0:
            return timing
        rng = random.Random(hashlib.sha256(repr((self.seed, *key)).encode()).hexdigest())
        return scale_timing(timing, math.exp(rng.gauss(0.0, self.noise)))
