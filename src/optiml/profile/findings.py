"""Bottlenecks: the evidence-backed findings a diagnosis ranks, and the thresholds that fire them.

Each finder looks at one kind of evidence — a kernel's counters, its SASS and ptxas facts, the
roofline — and returns :class:`Bottleneck` values whose severity (0..1) estimates the share of the
candidate's time they cost. Causes (wasted sectors, bank-conflict replays, missing reuse) are
scored by what they waste; symptoms (a saturated unit, a dominant stall) are weighted by
:data:`SYMPTOM_WEIGHT` so that a cause of the same size ranks first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optiml.profile.metrics import SECTOR_BYTES, STALL_MEANING, WARP_SIZE, KernelMetrics
from optiml.profile.results import KernelProfile, Profile
from optiml.profile.roofline import Roofline
from optiml.profile.static import StaticAnalysis, StaticKernel

# -- thresholds (each with why) ----------------------------------------------------------------
#: A unit above 60% of its peak is where the time goes; below it on every unit, throughput is not
#: the limit (Nsight Compute's speed-of-light guidance, also used by its SOLBottleneck rule).
BUSY_PCT = 60.0
#: Sectors per request may exceed the ideal by 25% (a misaligned first access, partial warps at
#: the edges) before accesses count as uncoalesced.
COALESCING_SLACK = 1.25
#: Below this share of wasted sectors, fixing coalescing cannot pay off noticeably.
MIN_WASTED_SECTOR_SHARE = 0.10
#: A bank conflict replays one shared-memory wavefront, and an SM serves one wavefront per cycle:
#: replays filling 10% of the elapsed SM cycles are worth removing.
BANK_CONFLICT_CYCLE_SHARE = 0.10
#: Under 50% achieved occupancy, memory latency is poorly hidden unless each thread has ILP.
LOW_OCCUPANCY_PCT = 50.0
#: A grid under one full wave leaves SMs idle for the whole kernel.
MIN_WAVES = 1.0
#: A stall reason with 30%+ of all stall cycles is named.
DOMINANT_STALL_SHARE = 0.30
#: GPU busy for under half of the timed call: launches and gaps between kernels dominate.
LAUNCH_BUSY_SHARE = 0.5
#: One global load (or more) per FMA in the hottest loop: every operand comes from memory.
NO_REUSE_LOADS_PER_FMA = 1.0
#: Symptoms (a busy unit, a stall reason) rank below causes of the same size.
SYMPTOM_WEIGHT = 0.6
#: Severity given to static-only findings whose cost cannot be measured without counters.
STATIC_SEVERITY = 0.5
#: Under half the roof is worth saying when nothing more specific is known.
ROOFLINE_GAP = 0.5


@dataclass(frozen=True)
class Bottleneck:
    name: str  # stable identifier, e.g. "uncoalesced_stores"
    title: str  # what a person reads
    severity: float  # 0..1, estimated share of the candidate's time it costs
    evidence: dict[str, float]  # metric → value
    threshold: str
    suggestion: str
    kernel: str = ""  # the kernel it concerns ("" = the candidate as a whole)

    def render(self) -> str:
        facts = ", ".join(f"{k} {fmt_value(v)}" for k, v in self.evidence.items())
        where = f" in {self.kernel}" if self.kernel else ""
        return f"{self.title}{where} [severity {self.severity:.2f}]: {facts} ({self.threshold})\n   → {self.suggestion}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "severity": self.severity,
            "evidence": dict(self.evidence),
            "threshold": self.threshold,
            "suggestion": self.suggestion,
            "kernel": self.kernel,
        }


# -- bound of one kernel ------------------------------------------------------------------------
def classify(metrics: KernelMetrics) -> tuple[str, str, float]:
    """(bound, unit, % of peak) of one kernel: ``("memory", "L2", 86.9)``, ``("latency", "", 24.0)``…"""
    dram = metrics.dram_pct or 0.0
    caches = {"L2": metrics.l2_pct or 0.0, "L1": metrics.l1_pct or 0.0}
    memory_unit, memory_pct = ("DRAM", dram) if dram >= BUSY_PCT else max(caches.items(), key=lambda kv: kv[1])
    memory_pct = max(memory_pct, dram)
    compute_pct = max(metrics.sm_pct or 0.0, metrics.fma_pipe_pct or 0.0, metrics.tensor_pipe_pct or 0.0)
    if max(memory_pct, compute_pct) < BUSY_PCT:
        return "latency", "", max(memory_pct, compute_pct)
    if memory_pct >= compute_pct:
        return "memory", memory_unit, memory_pct
    return "compute", "SM", compute_pct


# -- findings from counters --------------------------------------------------------------------
def counter_findings(kernel: KernelProfile, share: float, static: StaticKernel | None, multi: bool) -> list[Bottleneck]:
    m = kernel.metrics
    name = kernel.short_name if multi else ""
    found: list[Bottleneck] = []
    found += _coalescing(m, static, name)
    found += _bank_conflicts(m, name)
    found += _occupancy(m, name)
    found += _saturation(m, static, name)
    found += _stalls(m, name)
    return [scaled(b, share) for b in found]


def _coalescing(m: KernelMetrics, static: StaticKernel | None, kernel: str) -> list[Bottleneck]:
    total = (m.global_load_sectors or 0.0) + (m.global_store_sectors or 0.0)
    if not total:
        return []
    found = []
    for direction, sectors, requests, category in (
        ("loads", m.global_load_sectors, m.global_load_requests, "global_load"),
        ("stores", m.global_store_sectors, m.global_store_requests, "global_store"),
    ):
        if not sectors or not requests:
            continue
        # judged by the widest access present: the counters mix every width, so a narrower access's ideal
        # would call coalesced wide copies uncoalesced
        widths = static.request_widths(category) if static is not None else set()
        assumed = not widths
        width_bits = max(widths, default=32)
        ideal = WARP_SIZE * width_bits / 8 / SECTOR_BYTES  # sectors one fully coalesced warp request touches
        per_request = sectors / requests
        wasted = sectors - requests * ideal
        if per_request <= ideal * COALESCING_SLACK or wasted / total < MIN_WASTED_SECTOR_SHARE:
            continue
        width_note = f"{width_bits}-bit accesses" + (
            " assumed (no SASS)" if assumed else " (the widest of several)" if len(widths) > 1 else ""
        )
        verb = "read" if direction == "loads" else "write"
        found.append(
            Bottleneck(
                name=f"uncoalesced_{direction}",
                title=f"uncoalesced global {direction}",
                severity=min(1.0, wasted / total),
                evidence={
                    "sectors/request": round(per_request, 2),
                    "ideal sectors/request": ideal,
                    "wasted share of global sectors": round(wasted / total, 3),
                },
                threshold=f"> {COALESCING_SLACK} × ideal {ideal:g} sectors/request for {width_note}",
                suggestion=(
                    f"make consecutive threads {verb} consecutive addresses: stage a tile through shared "
                    "memory (pad rows, e.g. [32][33], against bank conflicts) so global accesses go row-wise"
                ),
                kernel=kernel,
            )
        )
    return found


def _bank_conflicts(m: KernelMetrics, kernel: str) -> list[Bottleneck]:
    conflicts, cycles = m.bank_conflicts, m.elapsed_sm_cycles
    if not conflicts or not cycles:
        return []
    share = conflicts / cycles
    if share < BANK_CONFLICT_CYCLE_SHARE:
        return []
    return [
        Bottleneck(
            name="bank_conflicts",
            title="shared-memory bank conflicts",
            severity=min(1.0, share),
            evidence={
                "load conflicts": m.shared_load_bank_conflicts or 0.0,
                "store conflicts": m.shared_store_bank_conflicts or 0.0,
                "replay share of SM cycles": round(share, 3),
                "short_scoreboard stall": m.stalls.get("short_scoreboard", 0.0),
            },
            threshold=f"replayed wavefronts > {BANK_CONFLICT_CYCLE_SHARE:.0%} of elapsed SM cycles",
            suggestion=(
                "make a warp's 32 accesses hit 32 different banks: pad shared arrays by one word per row "
                "(e.g. [32][33]) or swizzle the index; stride-32 word accesses serialise 32-way"
            ),
            kernel=kernel,
        )
    ]


def _occupancy(m: KernelMetrics, kernel: str) -> list[Bottleneck]:
    found = []
    bound, _, _ = classify(m)
    achieved, theoretical = m.achieved_occupancy_pct, m.theoretical_occupancy_pct
    if bound == "latency" and achieved is not None and achieved < LOW_OCCUPANCY_PCT:
        limiter = _occupancy_limiter(m)
        evidence = {"achieved occupancy %": achieved}
        if theoretical is not None:
            evidence["theoretical occupancy %"] = theoretical
        if m.registers_per_thread is not None:
            evidence["registers/thread"] = m.registers_per_thread
        if m.eligible_warps_per_cycle is not None:
            evidence["eligible warps/cycle"] = m.eligible_warps_per_cycle
        found.append(
            Bottleneck(
                name="low_occupancy",
                title="low occupancy",
                severity=min(1.0, 1.0 - achieved / 100.0),
                evidence=evidence,
                threshold=f"latency-bound with achieved occupancy < {LOW_OCCUPANCY_PCT:.0f}%",
                suggestion=(f"{limiter}; or give each thread independent work (ILP) so fewer warps hide latency"),
                kernel=kernel,
            )
        )
    waves = m.waves_per_sm
    if waves is not None and 0 < waves < MIN_WAVES:
        found.append(
            Bottleneck(
                name="small_grid",
                title="grid smaller than one wave",
                severity=min(1.0, 1.0 - waves),
                evidence={"waves per SM": waves, "blocks": m.grid_size or 0.0, "SMs": m.sm_count or 0.0},
                threshold=f"< {MIN_WAVES:g} wave: some SMs get no block",
                suggestion="launch more, smaller blocks (or split the work, e.g. split-K) so every SM is busy",
                kernel=kernel,
            )
        )
    return found


def _occupancy_limiter(m: KernelMetrics) -> str:
    limits = {
        "registers": m.block_limit_registers,
        "shared memory": m.block_limit_shared_mem,
        "block size": m.block_limit_warps,
    }
    known = {k: v for k, v in limits.items() if v is not None}
    if not known or m.theoretical_occupancy_pct is None or m.theoretical_occupancy_pct >= 100:
        return "theoretical occupancy is not the limit: use more blocks/threads or fewer syncs"
    limiter = min(known, key=lambda k: known[k] or 0.0)
    advice = {
        "registers": "reduce registers per thread (__launch_bounds__, fewer live values)",
        "shared memory": "use less shared memory per block (smaller tiles)",
        "block size": "use a block size that fits more warps per SM",
    }
    return f"occupancy is limited by {limiter} ({known[limiter]:g} blocks/SM): {advice[limiter]}"


def _saturation(m: KernelMetrics, static: StaticKernel | None, kernel: str) -> list[Bottleneck]:
    bound, unit, pct = classify(m)
    if bound == "memory" and unit == "DRAM":
        gbps = (m.dram_bandwidth or 0.0) / 1e9
        widths = static.request_widths("global_load") if static is not None else set()
        vector_hint = "; 128-bit (float4) accesses can add a few %" if widths and max(widths) < 128 else ""
        return [
            Bottleneck(
                name="dram_bandwidth",
                title="DRAM bandwidth",
                severity=SYMPTOM_WEIGHT * pct / 100.0,
                evidence={"DRAM % of peak": pct, "DRAM GB/s": round(gbps, 1), "DRAM bytes": m.dram_bytes or 0.0},
                threshold=f"DRAM ≥ {BUSY_PCT:.0f}% of peak",
                suggestion=(
                    "the kernel streams at the memory roof: only moving fewer bytes helps (fuse with "
                    f"neighbouring work, avoid re-reads, narrower types where the tolerance allows){vector_hint}"
                ),
                kernel=kernel,
            )
        ]
    if bound == "memory":
        return [
            Bottleneck(
                name=f"{unit.lower()}_throughput",
                title=f"{unit} cache throughput",
                severity=SYMPTOM_WEIGHT * pct / 100.0,
                evidence={
                    f"{unit} % of peak": pct,
                    "DRAM % of peak": m.dram_pct or 0.0,
                    f"{unit} hit rate %": (m.l2_hit_pct if unit == "L2" else m.l1_hit_pct) or 0.0,
                },
                threshold=f"{unit} ≥ {BUSY_PCT:.0f}% of peak while DRAM < {BUSY_PCT:.0f}%",
                suggestion=(
                    "on-chip traffic, not DRAM, is the limit (re-fetched or wasted sectors, or shared-memory "
                    "replays): keep reused operands in registers/shared memory, coalesce, avoid bank conflicts"
                ),
                kernel=kernel,
            )
        ]
    if bound == "compute":
        return [
            Bottleneck(
                name="compute_throughput",
                title="SM compute throughput",
                severity=SYMPTOM_WEIGHT * pct / 100.0,
                evidence={
                    "SM % of peak": m.sm_pct or 0.0,
                    "FMA pipe %": m.fma_pipe_pct or 0.0,
                    "tensor pipe %": m.tensor_pipe_pct or 0.0,
                },
                threshold=f"SM ≥ {BUSY_PCT:.0f}% of peak",
                suggestion=(
                    "cut instructions per result (less index arithmetic, vector math, hoisted invariants); "
                    "use tensor cores where the precision allows"
                ),
                kernel=kernel,
            )
        ]
    return []


def _stalls(m: KernelMetrics, kernel: str) -> list[Bottleneck]:
    bound, _, _ = classify(m)
    top = m.top_stalls(1)
    if bound != "latency" or not top or not m.stall_cycles:
        return []
    reason, cycles = top[0]
    share = cycles / m.stall_cycles
    if share < DOMINANT_STALL_SHARE:
        return []
    advice = {
        "long_scoreboard": "more loads in flight per thread (unrolling, prefetch into registers) or more warps",
        "barrier": "fewer __syncthreads() or less work imbalance between a block's warps",
        "short_scoreboard": "fewer shared-memory round trips or bank conflicts",
        "mio_throttle": "fewer, wider shared-memory accesses",
        "lg_throttle": "fewer, wider global accesses (vectorised loads/stores)",
        "drain": "fewer scattered stores at the end of the kernel (coalesce the stores)",
        "math_pipe_throttle": "spread work across pipes (mix FMA and integer work) or use tensor cores",
    }.get(reason, "see the Nsight Compute warp-state guide for this stall")
    return [
        Bottleneck(
            name=f"stall_{reason}",
            title=f"warp stalls: {reason}",
            severity=SYMPTOM_WEIGHT * share,
            evidence={"cycles per issued instruction": cycles, "share of stall cycles": round(share, 3)},
            threshold=f"one reason ≥ {DOMINANT_STALL_SHARE:.0%} of stall cycles in a latency-bound kernel",
            suggestion=f"{STALL_MEANING.get(reason, reason)}: {advice}",
            kernel=kernel,
        )
    ]


def launch_overhead(profile: Profile, time_ms: float | None, busy: float) -> Bottleneck:
    totals = profile.totals
    return Bottleneck(
        name="launch_overhead",
        title="launch overhead",
        severity=min(1.0, 1.0 - busy),
        evidence={
            "kernels": float(totals.kernels),
            "GPU time ms": totals.duration_ms or 0.0,
            "timed ms": time_ms or 0.0,
        },
        threshold=f"GPU busy < {LAUNCH_BUSY_SHARE:.0%} of the timed call",
        suggestion="fuse kernels into fewer launches and avoid host work or synchronisation between them",
    )


# -- findings from static analysis -------------------------------------------------------------
def static_findings(
    static: StaticAnalysis, dtype: str, roofline: Roofline | None, profile: Profile | None
) -> list[Bottleneck]:
    found: list[Bottleneck] = []
    for kernel in static.kernels:
        label = kernel.base_name if len(static.kernels) > 1 else ""
        found += _spills(kernel, label)
        if profile is None:
            found += _reuse(kernel, label, None)
            found += _register_occupancy(static, kernel, label)
            continue
        profiled = [k for k in profile.kernels if k.short_name == kernel.base_name]
        if profiled:  # a kernel the candidate did not launch costs nothing
            found += [
                scaled(b, sum(profile.time_share(k) for k in profiled))
                for b in _reuse(kernel, label, profiled[0].metrics)
            ]
    if dtype in {"float16", "bfloat16"} and roofline is not None and roofline.regime == "compute":
        tensor = [op for k in static.kernels if k.sass is not None for op in k.sass.tensor_opcodes]
        if not tensor and any(k.sass is not None for k in static.kernels):
            found.append(
                Bottleneck(
                    name="no_tensor_cores",
                    title="no tensor-core instructions",
                    severity=0.8,
                    evidence={"tensor instructions": 0.0, "task intensity flop/B": roofline.intensity or 0.0},
                    threshold=f"{dtype} task above the ridge point with no *MMA in SASS",
                    suggestion="use tensor cores (mma.sync / wmma, or WGMMA on sm_90) for the matrix products",
                )
            )
    return found


def _spills(kernel: StaticKernel, label: str) -> list[Bottleneck]:
    local_ops = kernel.sass.local_memory_ops if kernel.sass is not None else 0
    if not kernel.spill_bytes and not local_ops:
        return []
    in_loop = bool(kernel.sass and kernel.sass.inner_loops and kernel.sass.inner_loops[0].mix.get("local_memory"))
    return [
        Bottleneck(
            name="local_memory",
            title="register spills / local memory",
            severity=0.6 if in_loop else 0.3,
            evidence={
                "spill bytes": float(kernel.spill_bytes),
                "LDL/STL instructions": float(local_ops),
                "in inner loop": 1.0 if in_loop else 0.0,
            },
            threshold="any spill or local-memory access (worse inside a loop)",
            suggestion="cut live registers (smaller per-thread tiles, no dynamically indexed local arrays) "
            "or relax __launch_bounds__",
            kernel=label,
        )
    ]


def _reuse(kernel: StaticKernel, label: str, metrics: KernelMetrics | None) -> list[Bottleneck]:
    if kernel.sass is None or not kernel.sass.inner_loops:
        return []
    loop = kernel.sass.inner_loops[0]
    loads, fmas = loop.mix.get("global_load", 0), loop.mix.get("fp32", 0) + loop.mix.get("fp16", 0)
    if not fmas or loads / fmas < NO_REUSE_LOADS_PER_FMA:
        return []
    severity = STATIC_SEVERITY
    if metrics is not None:  # measured: as costly as the on-chip memory unit it saturates
        bound, unit, pct = classify(metrics)
        severity = pct / 100.0 if bound == "memory" and unit != "DRAM" else STATIC_SEVERITY * SYMPTOM_WEIGHT
    return [
        Bottleneck(
            name="no_operand_reuse",
            title="no operand reuse in the inner loop",
            severity=min(1.0, severity),
            evidence={
                "global loads in loop": float(loads),
                "FP instructions in loop": float(fmas),
                "loads per FP instruction": round(loads / fmas, 2),
            },
            threshold=f"≥ {NO_REUSE_LOADS_PER_FMA:g} global load per floating-point instruction in the hottest loop",
            suggestion="tile: load blocks of the operands into shared memory once, and have each thread "
            "compute several outputs from registers (register blocking)",
            kernel=label,
        )
    ]


def _register_occupancy(static: StaticAnalysis, kernel: StaticKernel, label: str) -> list[Bottleneck]:
    limits = static.limits
    warps = static.register_limited_warps(kernel)
    if limits is None or warps is None or kernel.resources is None:
        return []
    share = warps / limits.max_warps
    if share * 100 >= LOW_OCCUPANCY_PCT:
        return []
    return [
        Bottleneck(
            name="register_limited_occupancy",
            title="registers cap occupancy",
            severity=STATIC_SEVERITY * (1.0 - share),
            evidence={
                "registers/thread": float(kernel.resources.registers),
                "max warps/SM": float(warps),
                "of": float(limits.max_warps),
            },
            threshold=f"registers allow < {LOW_OCCUPANCY_PCT:.0f}% of the SM's warps",
            suggestion="reduce registers per thread (__launch_bounds__, fewer live values) unless ILP hides latency",
            kernel=label,
        )
    ]


def roofline_gap(roofline: Roofline, fraction: float) -> Bottleneck | None:
    if fraction >= ROOFLINE_GAP:
        return None
    regime = roofline.regime or "memory"
    advice = (
        "the task needs little compute: approach the DRAM roof by moving each byte once, coalesced and vectorised"
        if regime == "memory"
        else "the task has enough arithmetic to be compute-bound: raise work per loaded byte (tiling, "
        "register blocking) and keep the pipes busy"
    )
    return Bottleneck(
        name="far_from_roofline",
        title=f"far from the {regime} roof",
        severity=STATIC_SEVERITY * (1.0 - fraction),
        evidence={"roofline fraction": round(fraction, 3), "floor ms": roofline.floor_ms or 0.0},
        threshold=f"< {ROOFLINE_GAP:.0%} of the roofline",
        suggestion=advice,
    )


# -- helpers -----------------------------------------------------------------------------------
def scaled(bottleneck: Bottleneck, share: float) -> Bottleneck:
    if share >= 1.0:
        return bottleneck
    return Bottleneck(**{**bottleneck.to_dict(), "severity": bottleneck.severity * share})


def fmt_value(value: float) -> str:
    if abs(value) >= 100 or (float(value).is_integer() and value != 0):
        return f"{value:,.0f}"
    return f"{value:.3g}"
