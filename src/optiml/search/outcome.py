"""What a finished search hands back: the best kernel, how sure we are, and how we got there."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from optiml.kernel.source import KernelSource
from optiml.search.verdict import Retimed, Verdict
from optiml.values import Edit, EvalResult, Speedup, TimingStats


@dataclass(frozen=True)
class PathStep:
    """One edit on the path from the root to the best kernel, with its search-time gain."""

    edit: Edit
    digest: str
    time_ms: float
    parent_time_ms: float

    @property
    def gain(self) -> float:
        """Parent time over this step's time (> 1: the edit made it faster)."""
        return self.parent_time_ms / self.time_ms if self.time_ms > 0 else 0.0


@dataclass(frozen=True)
class SearchOutcome:
    run_id: str
    task_name: str
    strategy: str
    stop_reason: str
    root_digest: str
    root_timing: TimingStats  # re-timed alongside the best when re-timing ran
    best_digest: str
    best_kernel: KernelSource
    best_result: EvalResult
    best_timing: TimingStats
    confirmed: bool  # the best beat the root beyond the noise in an interleaved re-timing
    speedup: Speedup  # best over root
    reference_speedups: dict[str, Speedup]  # "eager" / "compile" → best over that reference
    path: tuple[PathStep, ...]
    status_counts: dict[str, int]  # EvalStatus value → evaluations
    evaluations: int
    elapsed_s: float
    cost_usd: float
    roofline_fraction: float | None = None  # of the best, when it was profiled
    root_roofline_fraction: float | None = None
    retimed: tuple[Retimed, ...] = field(default=())
    note: str = ""  # why the result is unconfirmed, when it is
    reference_timings: dict[str, TimingStats] = field(default_factory=dict)  # what reference_speedups divide
    references_retimed: bool = False  # reference_timings come from the final re-timing's rounds

    @property
    def improved(self) -> bool:
        return self.best_digest != self.root_digest

    @property
    def evaluations_per_minute(self) -> float:
        return 60.0 * self.evaluations / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def failures(self) -> int:
        return sum(n for status, n in self.status_counts.items() if status != "ok")


def path_steps(nodes: list[tuple[Edit | None, str, float | None]]) -> tuple[PathStep, ...]:
    """Steps from (edit, digest, time) triples ordered root first; the root has no edit."""
    steps = []
    for (_, _, parent_ms), (edit, digest, time_ms) in itertools.pairwise(nodes):
        if edit is None or time_ms is None or parent_ms is None:
            raise ValueError(f"path node {digest} is not a verified edit")
        steps.append(PathStep(edit=edit, digest=digest, time_ms=time_ms, parent_time_ms=parent_ms))
    return tuple(steps)


def build_outcome(
    *,
    run_id: str,
    task_name: str,
    strategy: str,
    stop_reason: str,
    verdict: Verdict,
    path_nodes: list[tuple[Edit | None, str, float | None]],
    references: dict[str, TimingStats],
    status_counts: dict[str, int],
    elapsed_s: float,
    cost_usd: float,
    root_roofline_fraction: float | None,
) -> SearchOutcome:
    best = verdict.best
    assert best.result is not None
    root_digest = path_nodes[0][1]
    return SearchOutcome(
        run_id=run_id,
        task_name=task_name,
        strategy=strategy,
        stop_reason=stop_reason,
        root_digest=root_digest,
        root_timing=verdict.root_timing,
        best_digest=best.digest,
        best_kernel=best.kernel,
        best_result=best.result,
        best_timing=verdict.best_timing,
        confirmed=verdict.confirmed,
        speedup=Speedup.between(verdict.root_timing, verdict.best_timing),
        reference_speedups={
            name: Speedup.between(timing, verdict.best_timing) for name, timing in sorted(references.items())
        },
        reference_timings=dict(sorted(references.items())),
        references_retimed=bool(verdict.references),
        path=path_steps(path_nodes),
        status_counts=dict(sorted(status_counts.items())),
        evaluations=sum(status_counts.values()),
        elapsed_s=elapsed_s,
        cost_usd=cost_usd,
        roofline_fraction=best.diagnosis.roofline_fraction if best.diagnosis is not None else None,
        root_roofline_fraction=root_roofline_fraction,
        retimed=verdict.retimed,
        note=verdict.note,
    )
