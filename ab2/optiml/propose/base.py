"""The proposer contract: given a kernel and its evidence, return candidate edits.

A proposer never evaluates anything; the search decides which proposals to try and the
evaluator verifies them. An :class:`~optiml.values.Edit` is a small frozen value, so a node's state is the
chain of edits that produced it (tinygrad's idea) and can be replayed or shown to a user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.values import Edit, EvalResult

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
class TargetGPU:
    """The GPU a kernel is written for, as far as it is known here: at least the architecture it is
    compiled for; with a GPU visible, its name, SM count, shared memory, L2 and memory."""

    arch: str
    name: str = ""
    sm_count: int | None = None
    smem_per_block_bytes: int | None = None  # opt-in maximum per block
    smem_per_sm_bytes: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    bandwidth_gbs: float | None = None  # measured device-to-device copy bandwidth

    def describe(self) -> str:
        """One line for a prompt."""
        if self.sm_count is None:
            return (
                f"{self.arch} (the architecture kernels are compiled for; no GPU is visible where this was "
                "written, so its SM count and memory sizes are not known)"
            )
        facts = [f"{self.sm_count} SMs"]
        if self.smem_per_block_bytes:
            facts.append(f"{self.smem_per_block_bytes // 1024} KiB shared memory per block (opt-in)")
        if self.smem_per_sm_bytes:
            facts.append(f"{self.smem_per_sm_bytes // 1024} KiB per SM")
        if self.l2_bytes:
            facts.append(f"{self.l2_bytes / 2**20:.0f} MiB L2")
        if self.memory_bytes:
            facts.append(f"{self.memory_bytes / 2**30:.0f} GiB device memory")
        if self.bandwidth_gbs:
            facts.append(f"{self.bandwidth_gbs:.0f} GB/s measured copy bandwidth")
        return f"{self.name or 'a GPU'}, {self.arch}: " + ", ".join(facts)


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
    target: TargetGPU | None = None  # the GPU the kernel is for, when known


@dataclass(frozen=True)
class Spend:
    """What proposals cost: dollars, paid API calls, and those calls' input + output tokens."""

    usd: float = 0.0
    calls: int = 0
    tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.usd + other.usd, self.calls + other.calls, self.tokens + other.tokens)


@runtime_checkable
class Proposer(Protocol):
    """Anything that turns a context into up to ``n`` proposals."""

    name: str

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        """Return at most ``n`` proposals; never raise for a bad model answer (return it as an error)."""
        ...
