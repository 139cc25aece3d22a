"""Shared pieces of the search tests: a task file, recording wrappers, fake profilers."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposal, ProposalContext, Proposer
from optiml.search.landscape import Landscape, LandscapeEvaluator, read_knobs
from optiml.task import Task, load_task
from optiml.values import EvalResult, EvalStatus, TimingStats

TASK_SOURCE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.rand(4096)]


def get_init_inputs():
    return []
"""


def write_task(directory: Path, source: str = TASK_SOURCE) -> Task:
    path = directory / "scale.py"
    path.write_text(source)
    return load_task(path)


@dataclass
class Call:
    context: ProposalContext
    proposals: list[Proposal]


class RecordingProposer:
    """Wraps a proposer and keeps every context it was given and what it answered."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        proposals = list(self.inner.propose(context, n))
        with self._lock:
            self.calls.append(Call(context, proposals))
        return proposals


class FailingProposer:
    """Raises on every call, like a proposer with a bug."""

    name = "broken"

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        raise RuntimeError("index out of range in the proposer")


@dataclass(frozen=True)
class Finding:
    name: str
    severity: float


@dataclass(frozen=True)
class FakeDiagnosis:
    proxy_score: float
    roofline_fraction: float | None
    text: str
    bound: str = "memory"
    bottlenecks: tuple[Finding, ...] = ()

    def render(self) -> str:
        return self.text


@dataclass
class KnobProfiler:
    """Diagnoses landscape kernels: bigger VEC uses the memory bandwidth better."""

    fail: bool = False
    calls: list[str] = field(default_factory=list)

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[FakeDiagnosis | None]:
        return [self.diagnose(kernel) for kernel, _ in items]

    def diagnose(self, kernel: KernelSource) -> FakeDiagnosis:
        self.calls.append(kernel.digest)
        if self.fail:
            raise RuntimeError("ncu: permission denied (ERR_NVGPUCTRPERM)")
        knobs = read_knobs(kernel.code)
        assert knobs is not None
        fraction = knobs["VEC"] / 10
        text = f"memory-bound; DRAM {fraction:.0%} of peak; VEC={knobs['VEC']}"
        return FakeDiagnosis(fraction, fraction, text, bottlenecks=(Finding("dram_bandwidth", 1 - fraction),))


class AllFailEvaluator(LandscapeEvaluator):
    """Every kernel but the root fails to compile."""

    def __init__(self, landscape: Landscape, root_digest: str) -> None:
        super().__init__(landscape)
        self.root_digest = root_digest

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        if kernel.digest == self.root_digest:
            return super().evaluate(kernel)
        with self._lock:
            self.calls[kernel.digest] += 1
        return EvalResult(EvalStatus.COMPILE_ERROR, "error: expected ';'", kernel_digest=kernel.digest)


class BrokenRetimeEvaluator(LandscapeEvaluator):
    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        raise RuntimeError("the GPU worker died")


class SlowProposer:
    """Wraps a proposer, sleeping in every call and recording how many calls overlapped."""

    def __init__(self, inner: Proposer, delay_s: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.delay_s = delay_s
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            time.sleep(self.delay_s)
            return self.inner.propose(context, n)
        finally:
            with self._lock:
                self._in_flight -= 1
