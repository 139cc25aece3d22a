"""The Nsight Compute metrics OptiML collects, and their typed per-kernel view.

:data:`DEFAULT_METRICS` is the list every one of whose names ncu 2025.3 accepted on the H200
(recorded in ``tests/profile/data/ncu_raw.csv``). ncu adds the ``launch__*`` statistics
(grid, waves, SM count, …) to every raw-page row unasked, so they are read too.

A kernel's row becomes a :class:`KernelMetrics`: typed fields, ``None`` where ncu did not
report the metric, and derived figures (sectors per request, flops, bytes) as properties.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Warp-stall reasons, as in ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``.
STALL_REASONS = (
    "long_scoreboard",
    "barrier",
    "short_scoreboard",
    "math_pipe_throttle",
    "mio_throttle",
    "lg_throttle",
    "wait",
    "not_selected",
    "selected",
    "no_instruction",
    "drain",
    "membar",
    "branch_resolving",
    "dispatch_stall",
    "imc_miss",
    "tex_throttle",
    "sleeping",
)

#: What each stall reason means, for evidence text (after the Nsight Compute profiling guide).
STALL_MEANING = {
    "long_scoreboard": "waiting on global/local memory (L1TEX) results",
    "barrier": "waiting at __syncthreads()",
    "short_scoreboard": "waiting on shared memory or special-function results",
    "math_pipe_throttle": "math pipe busy (compute saturation)",
    "mio_throttle": "memory-input/output queue full (shared memory or special instructions)",
    "lg_throttle": "local/global memory instruction queue full (too many memory instructions)",
    "wait": "fixed-latency dependency",
    "not_selected": "eligible but another warp issued",
    "selected": "issuing",
    "no_instruction": "instruction cache miss or branch target",
    "drain": "waiting for memory stores to drain at exit",
    "membar": "waiting at a memory fence",
    "branch_resolving": "resolving a branch target",
    "dispatch_stall": "dispatcher stall",
    "imc_miss": "immediate constant cache miss",
    "tex_throttle": "texture unit queue full",
    "sleeping": "sleeping (nanosleep or yield)",
}

_STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

#: (field of KernelMetrics, ncu metric name) for every scalar field.
FIELD_METRICS: tuple[tuple[str, str], ...] = (
    ("duration_ns", "gpu__time_duration.sum"),
    ("sm_hz", "sm__cycles_elapsed.avg.per_second"),
    ("dram_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("l2_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("l1_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("sm_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("memory_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("dram_read_bytes", "dram__bytes_read.sum"),
    ("dram_write_bytes", "dram__bytes_write.sum"),
    ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct"),
    ("block_limit_registers", "launch__occupancy_limit_registers"),
    ("block_limit_shared_mem", "launch__occupancy_limit_shared_mem"),
    ("block_limit_sm", "launch__occupancy_limit_blocks"),
    ("block_limit_warps", "launch__occupancy_limit_warps"),
    ("registers_per_thread", "launch__registers_per_thread"),
    ("block_size", "launch__block_size"),
    ("grid_size", "launch__grid_size"),
    ("shared_static_bytes", "launch__shared_mem_per_block_static"),
    ("shared_dynamic_bytes", "launch__shared_mem_per_block_dynamic"),
    ("waves_per_sm", "launch__waves_per_multiprocessor"),
    ("sm_count", "launch__sm_count"),
    ("l1_hit_pct", "l1tex__t_sector_hit_rate.pct"),
    ("l2_hit_pct", "lts__t_sector_hit_rate.pct"),
    ("global_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
    ("global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    ("global_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    ("global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    ("shared_load_bank_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    ("shared_store_bank_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    ("tensor_pipe_pct", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("fma_pipe_pct", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("lsu_pipe_pct", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
    ("issue_active_pct", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("eligible_warps_per_cycle", "smsp__warps_eligible.avg.per_cycle_active"),
    ("warp_instructions", "smsp__inst_executed.sum"),
    ("ffma_thread_inst", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"),
    ("fadd_thread_inst", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"),
    ("fmul_thread_inst", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"),
    ("dfma_thread_inst", "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum"),
    ("hfma_thread_inst", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"),
)

_REPORTED_UNASKED = {"launch__waves_per_multiprocessor", "launch__sm_count"}

#: The metric list passed to ``ncu --metrics`` (57 names, all accepted by ncu 2025.3 on an H200).
DEFAULT_METRICS: tuple[str, ...] = (
    *(metric for _, metric in FIELD_METRICS if metric not in _REPORTED_UNASKED),
    *(_STALL_METRIC.format(reason) for reason in STALL_REASONS),
    "launch__occupancy_per_block_size",
)

#: Bytes in one L1/L2 sector: the unit global memory moves in.
SECTOR_BYTES = 32
WARP_SIZE = 32


@dataclass(frozen=True)
class KernelMetrics:
    """One kernel launch's counters; ``None`` where the metric was not collected."""

    duration_ns: float | None = None
    sm_hz: float | None = None
    dram_pct: float | None = None  # throughput as % of peak, elapsed cycles
    l2_pct: float | None = None
    l1_pct: float | None = None
    sm_pct: float | None = None
    memory_pct: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    block_limit_registers: float | None = None  # resident blocks per SM each resource allows
    block_limit_shared_mem: float | None = None
    block_limit_sm: float | None = None
    block_limit_warps: float | None = None
    registers_per_thread: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    shared_static_bytes: float | None = None
    shared_dynamic_bytes: float | None = None
    waves_per_sm: float | None = None
    sm_count: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    global_load_sectors: float | None = None
    global_load_requests: float | None = None
    global_store_sectors: float | None = None
    global_store_requests: float | None = None
    shared_load_bank_conflicts: float | None = None
    shared_store_bank_conflicts: float | None = None
    tensor_pipe_pct: float | None = None
    fma_pipe_pct: float | None = None
    lsu_pipe_pct: float | None = None
    issue_active_pct: float | None = None
    eligible_warps_per_cycle: float | None = None
    warp_instructions: float | None = None
    ffma_thread_inst: float | None = None
    fadd_thread_inst: float | None = None
    fmul_thread_inst: float | None = None
    dfma_thread_inst: float | None = None
    hfma_thread_inst: float | None = None
    #: stall reason → warp cycles per issued instruction spent in it (see :data:`STALL_REASONS`)
    stalls: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: Mapping[str, float | str | None]) -> KernelMetrics:
        """Build from one ncu row (metric name → parsed value); non-numbers become ``None``."""

        def number(name: str) -> float | None:
            value = values.get(name)
            return float(value) if isinstance(value, (int, float)) else None

        scalars = {name: number(metric) for name, metric in FIELD_METRICS}
        stalls = {}
        for reason in STALL_REASONS:
            value = number(_STALL_METRIC.format(reason))
            if value is not None:
                stalls[reason] = value
        return cls(**scalars, stalls=stalls)

    # -- derived figures ---------------------------------------------------------------------
    @property
    def duration_ms(self) -> float | None:
        return self.duration_ns / 1e6 if self.duration_ns is not None else None

    @property
    def dram_bytes(self) -> float | None:
        if self.dram_read_bytes is None and self.dram_write_bytes is None:
            return None
        return (self.dram_read_bytes or 0.0) + (self.dram_write_bytes or 0.0)

    @property
    def dram_bandwidth(self) -> float | None:
        """Achieved DRAM bytes per second."""
        if self.dram_bytes is None or not self.duration_ns:
            return None
        return self.dram_bytes / (self.duration_ns * 1e-9)

    @property
    def flops(self) -> float | None:
        """Floating-point operations executed on the CUDA cores (an FMA counts 2).

        Counts thread-level FFMA/FADD/FMUL/DFMA/HFMA instructions; an HFMA2 packs two halves and
        counts once here, and tensor-core work is not in these counters at all (see
        :attr:`tensor_pipe_pct`).
        """
        parts = (
            self.ffma_thread_inst,
            self.fadd_thread_inst,
            self.fmul_thread_inst,
            self.dfma_thread_inst,
            self.hfma_thread_inst,
        )
        if all(p is None for p in parts):
            return None
        ffma, fadd, fmul, dfma, hfma = (p or 0.0 for p in parts)
        return 2 * ffma + fadd + fmul + 2 * dfma + 2 * hfma

    @property
    def load_sectors_per_request(self) -> float | None:
        return _ratio(self.global_load_sectors, self.global_load_requests)

    @property
    def store_sectors_per_request(self) -> float | None:
        return _ratio(self.global_store_sectors, self.global_store_requests)

    @property
    def bank_conflicts(self) -> float | None:
        if self.shared_load_bank_conflicts is None and self.shared_store_bank_conflicts is None:
            return None
        return (self.shared_load_bank_conflicts or 0.0) + (self.shared_store_bank_conflicts or 0.0)

    @property
    def elapsed_sm_cycles(self) -> float | None:
        """Cycles summed over all SMs while the kernel ran (duration × clock × SMs)."""
        if not self.duration_ns or not self.sm_hz or not self.sm_count:
            return None
        return self.duration_ns * 1e-9 * self.sm_hz * self.sm_count

    @property
    def stall_cycles(self) -> float:
        """Warp cycles per issued instruction, all reasons together (ncu's "Warp Cycles Per Issued Instruction")."""
        return sum(self.stalls.values())

    def top_stalls(self, count: int = 3) -> list[tuple[str, float]]:
        """The largest stall reasons other than ``selected`` (issuing is not a stall)."""
        ranked = sorted(((r, v) for r, v in self.stalls.items() if r != "selected"), key=lambda rv: -rv[1])
        return [(r, v) for r, v in ranked[:count] if v > 0]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stalls"] = dict(self.stalls)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelMetrics:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["stalls"] = dict(values.get("stalls") or {})
        return cls(**values)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator
