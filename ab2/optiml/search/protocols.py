"""The boundaries the search codes against: a profiler and its diagnosis, what proposals cost.

The search never talks to a GPU itself (Kernel Tuner's lesson): it hands kernels to a cost
function (:class:`optiml.evaluate.cost.CostFunction`, the one every consumer of evaluations
shares) and reads typed results back. Tests use the seeded synthetic landscape of
:mod:`optiml.search.landscape` and the replayed GPU landscapes of :mod:`optiml.search.replay`;
the real evaluator compiles, verifies and times in an isolated GPU worker. Proposers follow
:class:`optiml.propose.base.Proposer`; those that pay for their proposals (an LLM's) also follow
:class:`PaidProposer`, and a spent budget reaches the search as :class:`optiml.errors.BudgetSpent`
— so the search imports nothing of the LLM layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposal, Spend
from optiml.values import EvalResult


class Finding(Protocol):
    """One bottleneck a diagnosis names."""

    @property
    def name(self) -> str:
        """Stable name (``optiml.profile.findings``), e.g. ``low_occupancy``."""
        ...

    @property
    def severity(self) -> float:
        """0..1, most severe first in a diagnosis."""
        ...


class Diagnosis(Protocol):
    """What the search reads from a profiler diagnosis."""

    @property
    def proxy_score(self) -> float:
        """0..1: how fully the kernel uses the hardware bottleneck (1 = at the roofline)."""
        ...

    @property
    def roofline_fraction(self) -> float | None: ...

    @property
    def bound(self) -> str:
        """``"memory"``, ``"compute"``, ``"latency"``, ``"launch_overhead"`` or ``"unknown"``."""
        ...

    @property
    def bottlenecks(self) -> Sequence[Finding]: ...

    def render(self) -> str:
        """Compact text for prompts."""
        ...


class Profiler(Protocol):
    """Diagnoses verified kernels, several at a time (one ncu launch shares its start-up among them).

    Profiling is advisory: the search never waits for it to rank a node, it only passes the
    diagnoses to later proposals (see :mod:`optiml.search.engine`)."""

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> Sequence[Diagnosis | None]:
        """Diagnoses of ``items`` in order; None where profiling is unavailable for one."""
        ...


@runtime_checkable
class PaidProposer(Protocol):
    """A proposer whose proposals cost money (an LLM's). Proposers that pay nothing (the offline
    ones) need not implement it; the search counts the spend of those that do against its budgets.
    When a limit binds inside a proposer, ``propose`` raises :class:`optiml.errors.BudgetSpent`."""

    def spent(self) -> Spend:
        """What it has spent in this process so far."""
        ...

    def spent_by_run(self, run_id: str) -> Spend:
        """The calls and tokens recorded for ``run_id`` before now (earlier sessions, the root's
        generation), as the service's own records count them; dollars are not included."""
        ...

    def cap(self, *, calls: int | None, tokens: int | None) -> None:
        """Make no call that would take :meth:`spent` beyond these totals (None: no cap)."""
        ...

    def from_cache(self, proposal: Proposal) -> bool:
        """Whether one of its recent proposals was answered from a cache (paid for earlier)."""
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
        return cls(
            proxy_score=min(max(float(diagnosis.proxy_score), 0.0), 1.0),
            roofline_fraction=diagnosis.roofline_fraction,
            text=diagnosis.render(),
            bound=diagnosis.bound,
            bottlenecks=tuple((b.name, float(b.severity)) for b in diagnosis.bottlenecks),
        )
