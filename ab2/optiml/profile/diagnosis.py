"""Diagnosis: from counters, static facts and the roofline to a ranked list of bottlenecks.

Inputs are whatever evidence exists — an ncu :class:`Profile`, a :class:`StaticAnalysis`
(ptxas + SASS), a :class:`Roofline` and the measured time — and the diagnosis says which
evidence was missing. It is rendered as compact text for prompts (:meth:`Diagnosis.render`)
and as data for the reward and the report (:meth:`Diagnosis.to_dict`).

**Bound.** The unit nearest its peak decides, after Nsight Compute's speed-of-light guidance:
DRAM when it is busy (the off-chip roof is what a streaming kernel hits, even though L2 carries
the same bytes), else the busier of L2 and L1, else the SM (compute). When no unit reaches
:data:`BUSY_PCT` the kernel is *latency*-bound: too little work in flight to keep any unit busy.
When the GPU is busy for less than :data:`LAUNCH_BUSY_SHARE` of the timed call, it is
*launch_overhead*-bound. Without counters the bound is ``"unknown"``.

**Severity** (0..1) estimates the share of the candidate's time a bottleneck costs: wasted
sectors for coalescing, replay cycles for bank conflicts, idle-SM share for a short grid, and
so on, scaled by the kernel's share of GPU time. The finders and their named thresholds live in
:mod:`optiml.profile.findings`.

**proxy_score** (0..1, the search reward's hardware term) is how close the candidate is to the
roof that applies to it:

1. the roofline fraction ``floor_time / measured_time`` (clamped to 1) when the task's flops or
   bytes, the peaks and a time are known — the floor uses the task's minimum bytes and useful
   flops, so wasted traffic or work lowers it;
2. otherwise, with counters, the time-weighted utilisation of the *useful* roofs,
   ``max(DRAM %, FMA-pipe %, tensor-pipe %) / 100`` (L1/L2 throughput is left out: it also
   counts wasted traffic);
3. otherwise 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optiml.profile.findings import (
    BUSY_PCT,
    LAUNCH_BUSY_SHARE,
    ROOFLINE_GAP,
    Bottleneck,
    classify,
    counter_findings,
    launch_overhead,
    roofline_gap,
    static_findings,
)
from optiml.profile.results import KernelProfile, Profile
from optiml.profile.roofline import Roofline
from optiml.profile.static import StaticAnalysis, StaticKernel

#: Bottlenecks shown by :meth:`Diagnosis.render` (keeps prompts within ~25 lines).
RENDER_BOTTLENECKS = 5


@dataclass(frozen=True)
class Diagnosis:
    bound: str  # "memory" | "compute" | "latency" | "launch_overhead" | "unknown"
    summary: str  # one line: the bound and its evidence
    bottlenecks: tuple[Bottleneck, ...]
    missing_evidence: tuple[str, ...]
    roofline_fraction: float | None
    proxy_score: float
    time_ms: float | None = None
    roofline: Roofline | None = None
    profile: Profile | None = None
    static: StaticAnalysis | None = None
    kernel_lines: tuple[str, ...] = field(default=())

    def render(self) -> str:
        """Compact text for an LLM prompt (at most ~25 lines)."""
        lines = [f"Bound: {self.summary}"]
        if self.roofline is not None:
            lines.append(f"Roofline: {_roofline_line(self.roofline, self.time_ms, self.roofline_fraction)}")
        if self.bottlenecks:
            lines.append("Bottlenecks, most severe first:")
            for rank, bottleneck in enumerate(self.bottlenecks[:RENDER_BOTTLENECKS], 1):
                lines.append(f"{rank}. {bottleneck.render()}")
        else:
            lines.append("Bottlenecks: none found in the available evidence.")
        lines.extend(self.kernel_lines[:6])
        if self.missing_evidence:
            lines.append("Missing evidence: " + "; ".join(self.missing_evidence))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "summary": self.summary,
            "bottlenecks": [b.to_dict() for b in self.bottlenecks],
            "missing_evidence": list(self.missing_evidence),
            "roofline_fraction": self.roofline_fraction,
            "proxy_score": self.proxy_score,
            "time_ms": self.time_ms,
            "roofline": self.roofline.to_dict() if self.roofline else None,
            "profile": self.profile.to_dict() if self.profile else None,
            "static": self.static.to_dict() if self.static else None,
        }


def diagnose(
    *,
    profile: Profile | None,
    static: StaticAnalysis | None,
    roofline: Roofline | None,
    time_ms: float | None,
    dtype: str = "float32",
    missing: tuple[str, ...] = (),
) -> Diagnosis:
    """Combine the available evidence into a :class:`Diagnosis` (never raises for missing parts)."""
    missing_list = list(missing)
    usable = profile is not None and profile.ok
    if profile is not None and not profile.ok:
        reason = "; ".join(profile.errors) or "no kernel was profiled"
        missing_list.append(f"hardware counters ({reason})")
    elif profile is None and not any(m.startswith("hardware counters") for m in missing_list):
        missing_list.append("hardware counters (not profiled)")
    if static is None:
        missing_list.append("static analysis (not compiled)")
    elif static.sass_error:
        missing_list.append(f"SASS ({static.sass_error})")
    if roofline is None or roofline.floor_ms is None:
        missing_list.append("roofline (task flops/bytes or device peaks unknown)")
    if time_ms is None:
        missing_list.append("timing (candidate not timed)")

    fraction = roofline.fraction(time_ms) if roofline is not None else None
    findings: list[Bottleneck] = []
    kernel_lines: list[str] = []
    if usable:
        assert profile is not None
        bound, summary = _bound(profile, time_ms)
        for kernel in profile.kernels:
            share = profile.time_share(kernel)
            static_kernel = static.find(kernel.name) if static is not None else None
            findings += counter_findings(kernel, share, static_kernel, multi=len(profile.kernels) > 1)
            kernel_lines.append(_kernel_line(kernel, share, static_kernel))
        busy = _busy_share(profile, time_ms)
        if busy is not None and busy < LAUNCH_BUSY_SHARE:
            findings.append(launch_overhead(profile, time_ms, busy))
    else:
        bound, summary = "unknown", "unknown (no hardware counters; static analysis and timing only)"
    if static is not None:
        findings += static_findings(static, dtype, roofline, profile if usable else None)
    if roofline is not None and fraction is not None and not any(f.severity >= ROOFLINE_GAP for f in findings):
        gap = roofline_gap(roofline, fraction)
        if gap is not None:
            findings.append(gap)
    findings.sort(key=lambda b: -b.severity)
    return Diagnosis(
        bound=bound,
        summary=summary,
        bottlenecks=tuple(findings),
        missing_evidence=tuple(missing_list),
        roofline_fraction=fraction,
        proxy_score=_proxy(fraction, profile if usable else None),
        time_ms=time_ms,
        roofline=roofline,
        profile=profile,
        static=static,
        kernel_lines=tuple(kernel_lines),
    )


# -- bound -------------------------------------------------------------------------------------
def _bound(profile: Profile, time_ms: float | None) -> tuple[str, str]:
    busy = _busy_share(profile, time_ms)
    if busy is not None and busy < LAUNCH_BUSY_SHARE:
        total = profile.totals
        return "launch_overhead", (
            f"launch_overhead: the GPU runs kernels {busy:.0%} of the timed {time_ms:.4f} ms "
            f"({total.kernels} kernel(s), {total.duration_ms or 0:.4f} ms of GPU time)"
        )
    dominant = max(profile.kernels, key=lambda k: k.metrics.duration_ns or 0.0)
    bound, unit, pct = classify(dominant.metrics)
    m = dominant.metrics
    units = f"DRAM {_pct(m.dram_pct)}, L2 {_pct(m.l2_pct)}, L1 {_pct(m.l1_pct)}, SM {_pct(m.sm_pct)}"
    where = f"{dominant.short_name} ({profile.time_share(dominant):.0%} of GPU time)"
    if bound == "latency":
        stall = m.top_stalls(1)
        stall_text = ""
        if stall and m.stall_cycles:
            reason, cycles = stall[0]
            stall_text = f"; top stall {reason} ({cycles / m.stall_cycles:.0%} of stall cycles)"
        return bound, f"latency: no unit above {BUSY_PCT:.0f}% of peak ({units}){stall_text} in {where}"
    return bound, f"{bound} at {unit} ({pct:.1f}% of peak; {units}) in {where}"


def _busy_share(profile: Profile, time_ms: float | None) -> float | None:
    gpu_ms = profile.totals.duration_ms
    if not time_ms or gpu_ms is None:
        return None
    return min(1.0, gpu_ms / time_ms)


# -- helpers -----------------------------------------------------------------------------------
def _proxy(fraction: float | None, profile: Profile | None) -> float:
    if fraction is not None:
        return max(0.0, min(1.0, fraction))
    if profile is None:
        return 0.0
    score = 0.0
    for kernel in profile.kernels:
        m = kernel.metrics
        useful = max(m.dram_pct or 0.0, m.fma_pipe_pct or 0.0, m.tensor_pipe_pct or 0.0) / 100.0
        score += profile.time_share(kernel) * useful
    return max(0.0, min(1.0, score))


def _kernel_line(kernel: KernelProfile, share: float, static: StaticKernel | None) -> str:
    m = kernel.metrics
    parts = [f"Kernel {kernel.short_name}: {_ms(m.duration_ms)} ({share:.0%})"]
    if m.achieved_occupancy_pct is not None:
        parts.append(f"occupancy {m.achieved_occupancy_pct:.0f}% of {_pct(m.theoretical_occupancy_pct)} theoretical")
    if m.registers_per_thread is not None:
        parts.append(f"{m.registers_per_thread:g} regs")
    parts.append(f"DRAM {_pct(m.dram_pct)} L2 {_pct(m.l2_pct)} L1 {_pct(m.l1_pct)} SM {_pct(m.sm_pct)}")
    if static is not None and static.sass is not None:
        loads, stores = static.sass.widths("global_load"), static.sass.widths("global_store")
        widths = "/".join(f"{w}" for w in sorted(set(loads) | set(stores))) or "-"
        tensor = ",".join(static.sass.tensor_opcodes) or "no tensor cores"
        parts.append(f"access widths {widths}-bit, {tensor}")
    return " | ".join(parts)


def _roofline_line(roofline: Roofline, time_ms: float | None, fraction: float | None) -> str:
    floor = roofline.floor_ms
    intensity = roofline.intensity
    parts = []
    if time_ms is not None:
        parts.append(f"{_ms(time_ms)} vs floor {_ms(floor)}")
    elif floor is not None:
        parts.append(f"floor {_ms(floor)}")
    if roofline.regime:
        parts.append(f"{roofline.regime}-bound task")
    if intensity is not None:
        parts.append(f"intensity {intensity:.3g} flop/B (ridge {roofline.ridge or 0:.3g})")
    if fraction is not None:
        parts.append(f"{fraction:.0%} of the roof")
    parts.append(f"peaks: {roofline.peaks.source}")
    return "; ".join(parts)


def _pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else "n/a"


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "n/a"
