"""The proposer contract: given a kernel and its evidence, return candidate edits.

A proposer never evaluates anything; the search decides which proposals to try and the
evaluator verifies them. An :class:`Edit` is a small frozen value, so a node's state is the
chain of edits that produced it (tinygrad's idea) and can be replayed or shown to a user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from optiml.evaluate.results import EvalResult
from optiml.kernel.source import KernelSource
from optiml.task import Task

#: Optimisation categories an edit can claim (free text is allowed, these are the usual ones).
CATEGORIES = (
    "tiling",
    "vectorization",
    "coalescing",
    "occupancy",
    "fusion",
    "unrolling",
    "warp_reduction",
    "shared_memory",
    "tensor_cores",
    "launch_config",
    "compiler_flags",
    "qualifiers",
    "algorithm",
    "other",
)


@dataclass(frozen=True)
class Edit:
    """One change to a kernel.

    ``kind`` says how ``payload`` applies: ``"search_replace"`` (blocks in the
    SEARCH/REPLACE format of :mod:`optiml.propose.edits`), ``"full_source"`` (a whole new
    source), ``"knob"`` (``NAME=value`` for a compile-time constant) or ``"flags"`` (the new
    nvcc flag list, space separated).
    """

    kind: str
    payload: str
    category: str
    rationale: str
    proposer: str

    def summary(self, width: int = 100) -> str:
        text = f"[{self.category}] {self.rationale}".replace("\n", " ")
        return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class Proposal:
    """An edit and the kernel it yields, or why it could not be applied."""

    edit: Edit
    kernel: KernelSource | None
    error: str | None = None

    @property
    def usable(self) -> bool:
        return self.kernel is not None and self.error is None


@dataclass(frozen=True)
class HistoryEntry:
    """What happened to one edit on the current search path (fed back to proposers)."""

    edit: Edit
    status: str  # an EvalStatus value, or "not_applied"
    time_ms: float | None = None
    parent_time_ms: float | None = None
    message: str = ""

    def render(self) -> str:
        if self.time_ms is not None and self.parent_time_ms:
            change = f"{self.parent_time_ms / self.time_ms:.2f}x vs parent"
            return f"- {self.edit.summary()} → {self.status}, {self.time_ms:.4f} ms ({change})"
        detail = f": {self.message}" if self.message else ""
        return f"- {self.edit.summary()} → {self.status}{detail}"


@dataclass(frozen=True)
class DiagnosisFacts:
    """The profiler's diagnosis as data, for proposers that rank by it (the text is for LLMs)."""

    bound: str = "unknown"  # "memory" | "compute" | "latency" | "launch_overhead" | "unknown"
    bottlenecks: tuple[tuple[str, float], ...] = ()  # (stable name, severity 0..1), most severe first
    roofline_fraction: float | None = None

    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.bottlenecks)


@dataclass(frozen=True)
class ProposalContext:
    """Everything a proposer may look at for one request."""

    task: Task
    kernel: KernelSource
    result: EvalResult | None = None  # the current kernel's evaluation
    diagnosis_text: str = ""  # rendered profiler diagnosis (optiml.profile), may be empty
    diagnosis: DiagnosisFacts | None = None  # the same diagnosis as data, when the node was profiled
    history: tuple[HistoryEntry, ...] = field(default=())
    tried_digests: frozenset[str] = field(default=frozenset())  # kernels already evaluated anywhere


@runtime_checkable
class Proposer(Protocol):
    """Anything that turns a context into up to ``n`` proposals."""

    name: str

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        """Return at most ``n`` proposals; never raise for a bad model answer (return it as an error)."""
        ...
