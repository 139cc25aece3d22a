"""The values every part passes around: what a compile produced, what an evaluation found, an edit.

:class:`CompileResult` (diagnostics, per-kernel resources, the shared object), :class:`EvalResult`
(the typed record every candidate gets, whatever happened to it, with its :class:`EvalStatus`,
verification and timings) and :class:`Edit` (one change to a kernel) live here, at the bottom, so
the compiler, the evaluator, the proposers, the run store and the search share them without
importing each other. (:class:`~optiml.kernel.source.KernelSource` stays in :mod:`optiml.kernel`,
which every part that handles a candidate may import.)

Failures are values, not exceptions: a kernel that does not compile, crashes, hangs or
computes the wrong answer yields an :class:`EvalResult` with the matching :class:`EvalStatus`
and a one-line message, which the search maps to a penalty and the proposer reads.
Standard library only: the GPU worker builds these and ships them back as JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


@dataclass(frozen=True)
class CompileDiagnostic:
    """One compiler message, located in the candidate's source where nvcc says so."""

    severity: str  # "error" | "warning" | "note"
    message: str
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass(frozen=True)
class KernelResources:
    """``ptxas -v`` figures for one ``__global__`` function."""

    name: str
    arch: str
    registers: int = 0
    shared_bytes: int = 0  # static shared memory (smem)
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    local_bytes: int = 0  # lmem
    barriers: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


@dataclass(frozen=True)
class CompileResult:
    """Outcome of building one candidate with ``nvcc --shared``."""

    ok: bool
    so_path: str | None
    digest: str
    arch: str
    seconds: float
    cached: bool
    diagnostics: tuple[CompileDiagnostic, ...] = ()
    resources: tuple[KernelResources, ...] = ()
    command: tuple[str, ...] = ()
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the build does (device + host code, see optiml.kernel.identity); "" when unknown
    binary_digest: str = ""
    sandbox: str = ""  # the isolation nvcc ran under ("unshare+jail", "bwrap", "none"); "" for old entries

    @property
    def errors(self) -> list[CompileDiagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def error_summary(self, limit: int = 10) -> str:
        """Compiler errors as lines, for a user or an LLM (never swallowed)."""
        errors = self.errors or list(self.diagnostics)
        lines = [d.render() for d in errors[:limit]]
        if not lines and self.log:
            lines = self.log.strip().splitlines()[-limit:]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileResult:
        data = dict(data)
        data["diagnostics"] = tuple(CompileDiagnostic(**d) for d in data.get("diagnostics", ()))
        data["resources"] = tuple(KernelResources(**r) for r in data.get("resources", ()))
        data["command"] = tuple(data.get("command", ()))
        return cls(**data)


class EvalStatus(str, Enum):
    OK = "ok"
    REJECTED = "rejected"  # refused by static screening before compiling
    COMPILE_ERROR = "compile_error"
    LOAD_ERROR = "load_error"  # the shared object would not load or lacks optiml_forward
    RUNTIME_ERROR = "runtime_error"  # nonzero return code or a CUDA error
    CRASH = "crash"  # the worker died (segfault, abort, exit())
    TIMEOUT = "timeout"  # hang: the worker was killed
    OUT_OF_MEMORY = "out_of_memory"
    WRONG_ANSWER = "wrong_answer"  # mismatch, NaN, or unwritten output
    INTEGRITY = "integrity"  # inputs modified, work outside the stream, threads left behind, suspect time

    @property
    def is_failure(self) -> bool:
        return self is not EvalStatus.OK


@dataclass(frozen=True)
class TrialCheck:
    """One correctness trial: one seed, one shape set, one input distribution."""

    seed: int
    shape_set: int
    distribution: str
    passed: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatched: int = 0
    total: int = 0
    nan_count: int = 0
    message: str = ""


@dataclass(frozen=True)
class VerifyReport:
    passed: bool
    trials: tuple[TrialCheck, ...] = ()
    message: str = ""

    @property
    def max_abs_err(self) -> float:
        return max((t.max_abs_err for t in self.trials), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((t.max_rel_err for t in self.trials), default=0.0)

    @property
    def distributions(self) -> list[str]:
        """The input distributions the trials actually used, in first-use order."""
        return list(dict.fromkeys(t.distribution for t in self.trials))


@dataclass(frozen=True)
class TimingStats:
    """Per-call device times in milliseconds, from CUDA events with the L2 flushed between calls."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    trials: int
    wall_median_ms: float = 0.0  # host clock around call + device-wide sync, for cross-checks
    stop: str = ""  # why timing stopped: tight (estimate converged), slower (than the incumbent), trials, time

    @property
    def spread_ms(self) -> float:
        """Half the inter-quartile range: the noise figure quoted as median ± spread."""
        return (self.q3_ms - self.q1_ms) / 2

    @classmethod
    def from_samples(cls, samples_ms: list[float], wall_ms: list[float] | None = None, stop: str = "") -> TimingStats:
        if not samples_ms:
            raise ValueError("no timing samples")
        ordered = sorted(samples_ms)
        walls = sorted(wall_ms or [])
        return cls(
            median_ms=_quantile(ordered, 0.5),
            q1_ms=_quantile(ordered, 0.25),
            q3_ms=_quantile(ordered, 0.75),
            min_ms=ordered[0],
            max_ms=ordered[-1],
            trials=len(ordered),
            wall_median_ms=_quantile(walls, 0.5) if walls else 0.0,
            stop=stop,
        )


def _quantile(ordered: list[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Speedup:
    """Reference time over candidate time, with a band from the two spreads."""

    value: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        """True when the whole band is above 1: faster beyond the measured noise."""
        return self.low > 1.0

    @classmethod
    def between(cls, reference: TimingStats, candidate: TimingStats) -> Speedup:
        value = reference.median_ms / candidate.median_ms
        low = (reference.median_ms - reference.spread_ms) / (candidate.median_ms + candidate.spread_ms)
        high = (reference.median_ms + reference.spread_ms) / max(candidate.median_ms - candidate.spread_ms, 1e-9)
        return cls(value=value, low=low, high=high)


@dataclass
class EvalResult:
    """Everything known about one candidate after evaluation."""

    status: EvalStatus
    message: str = ""
    kernel_digest: str = ""
    compile: CompileResult | None = None
    verify: VerifyReport | None = None
    timing: TimingStats | None = None
    reference: dict[str, TimingStats] = field(default_factory=dict)  # "eager", "compile"
    warnings: list[str] = field(default_factory=list)  # e.g. suspect-fast flags, screening notes
    floor_ms: float | None = None  # physical lower bound from bytes and flops, when known
    phase_seconds: dict[str, float] = field(default_factory=dict)  # compile, load, verify, time, …
    #: how the task was judged: distributions dropped, tolerances adjusted per output, the floor's roofs
    task_notes: list[str] = field(default_factory=list)
    #: device memory of the evaluation: peak_bytes, footprint_bytes (inputs + outputs + references), plan
    memory: dict[str, Any] = field(default_factory=dict)
    #: how the judge's clock read the time: where its windows ended, calls per window, the round trip
    #: subtracted and the candidate process's own events for the call (a claim, shown for comparison)
    clock: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is EvalStatus.OK

    @property
    def time_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    def speedup(self, against: str = "eager") -> Speedup | None:
        ref = self.reference.get(against)
        if ref is None or self.timing is None:
            return None
        return Speedup.between(ref, self.timing)

    def feedback(self) -> str:
        """One paragraph for a proposer: what happened and the evidence (compiler text included)."""
        if self.status is EvalStatus.COMPILE_ERROR and self.compile is not None:
            return f"compile error:\n{self.compile.error_summary()}"
        if self.ok and self.timing is not None:
            parts = [f"correct; {self.timing.median_ms:.4f} ms ± {self.timing.spread_ms:.4f}"]
            eager = self.speedup("eager")
            if eager is not None:
                parts.append(f"{eager.value:.2f}x vs PyTorch eager")
            return "; ".join(parts)
        if self.ok and self.verify is None and self.compile is not None:  # a compile check (no GPU run)
            return f"compiles for {self.compile.arch}; not yet verified or timed (no run on a GPU)"
        if self.message.startswith(self.status.value):  # "rejected by screening: …" says its status already
            return self.message
        return f"{self.status.value}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        verify = data.get("verify")
        timing = data.get("timing")
        compile_ = data.get("compile")
        return cls(
            status=EvalStatus(data["status"]),
            message=data.get("message", ""),
            kernel_digest=data.get("kernel_digest", ""),
            compile=CompileResult.from_dict(compile_) if compile_ else None,
            verify=VerifyReport(
                passed=verify["passed"],
                trials=tuple(TrialCheck(**t) for t in verify.get("trials", ())),
                message=verify.get("message", ""),
            )
            if verify
            else None,
            timing=TimingStats(**timing) if timing else None,
            reference={k: TimingStats(**v) for k, v in data.get("reference", {}).items()},
            warnings=list(data.get("warnings", [])),
            floor_ms=data.get("floor_ms"),
            phase_seconds=dict(data.get("phase_seconds", {})),
            task_notes=list(data.get("task_notes", [])),
            memory=dict(data.get("memory", {})),
            clock=dict(data.get("clock", {})),
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
