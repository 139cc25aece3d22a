"""The boundaries the search codes against: an evaluator, an optional profiler and its diagnosis.

The search never talks to a GPU itself (Kernel Tuner's lesson): it hands kernels to an
:class:`Evaluator` and reads typed results back. Tests use the seeded synthetic landscape of
:mod:`optiml.search.landscape`; the real evaluator compiles, verifies and times in an isolated
GPU worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from optiml.evaluate.results import EvalResult, TimingStats
from optiml.kernel.source import KernelSource


class Evaluator(Protocol):
    """Turns candidates into results. Must be thread-safe: the search calls it from a pool."""

    @property
    def reference(self) -> dict[str, TimingStats]:
        """Timings of the PyTorch references (``"eager"``, ``"compile"``); may be empty."""
        ...

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        """Compile, verify and time one kernel; failures are returned as results, never raised."""
        ...

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        """Time already-verified kernels interleaved (A B C A B C …); results in the given order."""
        ...


class Diagnosis(Protocol):
    """What the search reads from a profiler diagnosis."""

    @property
    def proxy_score(self) -> float:
        """0..1: how fully the kernel uses the hardware bottleneck (1 = at the roofline)."""
        ...

    @property
    def roofline_fraction(self) -> float | None: ...

    def render(self) -> str:
        """Compact text for prompts."""
        ...


class Profiler(Protocol):
    """Diagnoses verified kernels. A profiler may also offer ``diagnose_many(items)`` — the same
    for several (kernel, result) pairs in one go (one ncu launch); the search uses it when present."""

    def diagnose(self, kernel: KernelSource, result: EvalResult) -> Diagnosis | None:
        """Profile a verified kernel; None when profiling is unavailable for it."""
        ...


@dataclass(frozen=True)
class DiagnosisSnapshot:
    """A diagnosis reduced to what the search keeps and stores (it satisfies :class:`Diagnosis`)."""

    proxy_score: float
    roofline_fraction: float | None
    text: str
    bound: str = "unknown"
    bottlenecks: tuple[tuple[str, float], ...] = ()  # (name, severity), most severe first

    def render(self) -> str:
        return self.text

    @classmethod
    def of(cls, diagnosis: Diagnosis) -> DiagnosisSnapshot:
        found = getattr(diagnosis, "bottlenecks", ()) or ()
        return cls(
            proxy_score=min(max(float(diagnosis.proxy_score), 0.0), 1.0),
            roofline_fraction=diagnosis.roofline_fraction,
            text=diagnosis.render(),
            bound=str(getattr(diagnosis, "bound", "unknown")),
            bottlenecks=tuple((str(b.name), float(b.severity)) for b in found if hasattr(b, "name")),
        )
