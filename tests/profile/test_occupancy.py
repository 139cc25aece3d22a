"""The occupancy calculator against ncu's own launch statistics on the H200."""

from __future__ import annotations

import pytest

from optiml.profile.metrics import KernelMetrics
from optiml.profile.ncu_csv import NcuRow
from optiml.profile.occupancy import limits_for, register_limited_warps, theoretical_occupancy
from optiml.profile.static import StaticAnalysis

H100 = limits_for("sm_90a")


@pytest.mark.parametrize("kernel", ["vecadd", "transpose_naive", "matmul_naive", "smem_conflict"])
def test_register_and_warp_limits_match_ncu(kernel: str, raw_rows: dict[str, NcuRow]) -> None:
    m = KernelMetrics.from_values(raw_rows[kernel].values)
    assert H100 is not None and m.block_size and m.registers_per_thread is not None
    occupancy = theoretical_occupancy(
        H100,
        block_size=int(m.block_size),
        registers_per_thread=int(m.registers_per_thread),
        shared_bytes_per_block=int((m.shared_static_bytes or 0) + (m.shared_dynamic_bytes or 0)),
    )
    assert occupancy.by_registers == m.block_limit_registers
    assert occupancy.by_warps == m.block_limit_warps
    assert occupancy.by_blocks == m.block_limit_sm
    assert occupancy.fraction * 100 == m.theoretical_occupancy_pct


def test_ptxas_registers_give_the_same_limits(probe_static: StaticAnalysis) -> None:
    """ptxas said 12 registers where the launch reports 16: the per-warp granularity absorbs it."""
    assert H100 is not None
    smem = probe_static.find("smem_conflict")
    assert smem is not None and smem.resources is not None
    assert smem.resources.registers == 12 and smem.resources.shared_bytes == 4096
    occupancy = theoretical_occupancy(H100, 1024, smem.resources.registers, smem.resources.shared_bytes)
    assert (occupancy.by_registers, occupancy.by_warps, occupancy.blocks_per_sm) == (4, 2, 2)


def test_register_heavy_kernel_is_register_limited() -> None:
    assert H100 is not None
    occupancy = theoretical_occupancy(H100, block_size=256, registers_per_thread=128, shared_bytes_per_block=0)
    assert occupancy.by_registers == 2  # 4096 registers per warp: 4 warps per sub-partition
    assert occupancy.fraction == 0.25
    assert occupancy.limiter == "registers"
    assert register_limited_warps(H100, 128) == 16
    assert register_limited_warps(H100, 32) == 64


def test_shared_memory_heavy_kernel_is_smem_limited() -> None:
    assert H100 is not None
    occupancy = theoretical_occupancy(H100, block_size=256, registers_per_thread=32, shared_bytes_per_block=100 * 1024)
    assert occupancy.by_shared_memory == 2  # 228 KB / (100 KB + 1 KB reserved)
    assert occupancy.limiter == "shared memory"
    assert occupancy.active_warps == 16


@pytest.mark.parametrize(("arch", "warps"), [("sm_90a", 64), ("sm_90", 64), ("9.0", 64), ("sm_89", 48), ("sm_80", 64)])
def test_limits_for_known_architectures(arch: str, warps: int) -> None:
    limits = limits_for(arch)
    assert limits is not None and limits.max_warps == warps


def test_unknown_architecture_has_no_limits() -> None:
    assert limits_for("sm_75") is None
    assert limits_for("gfx90a") is None
    with pytest.raises(ValueError, match="block size"):
        theoretical_occupancy(limits_for("sm_90"), 0, 32, 0)  # type: ignore[arg-type]
