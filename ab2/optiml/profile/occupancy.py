"""Theoretical occupancy from a kernel's resources, as the CUDA occupancy calculator computes it.

Per SM, resident blocks are limited by four resources; the smallest limit wins:

* **warps**: ``max_warps // warps_per_block``;
* **blocks**: a fixed hardware cap;
* **registers**: registers are allocated per warp in units of 256, and each of the SM's four
  sub-partitions holds a quarter of the register file (16 K on sm_90), so the warps that fit are
  ``4 · ⌊16384 / ⌈32·regs / 256⌉·256⌋``, then divided among blocks;
* **shared memory**: ``⌊smem_per_SM / (smem_per_block + reserved_per_block)⌋`` with the driver
  free to pick the largest carve-out (1 KB per block is reserved by the system on sm_80+).

Checked against ncu's ``launch__occupancy_limit_*`` on the H200 (tests/profile). Stdlib only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    """Per-SM resources of one compute capability."""

    max_warps: int
    max_blocks: int
    registers: int = 65536
    register_granularity: int = 256  # registers, allocated per warp
    sub_partitions: int = 4
    max_registers_per_thread: int = 255
    shared_bytes: int = 233472  # largest shared-memory carve-out per SM
    reserved_shared_per_block: int = 1024


#: compute capability (major, minor) → limits (CUDA C Programming Guide, "Compute Capabilities")
ARCH_LIMITS: dict[tuple[int, int], SmLimits] = {
    (8, 0): SmLimits(max_warps=64, max_blocks=32, shared_bytes=167936),  # A100: 164 KB
    (8, 6): SmLimits(max_warps=48, max_blocks=16, shared_bytes=102400),  # RTX 30: 100 KB
    (8, 9): SmLimits(max_warps=48, max_blocks=24, shared_bytes=102400),  # L4/L40/RTX 40: 100 KB
    (9, 0): SmLimits(max_warps=64, max_blocks=32, shared_bytes=233472),  # H100/H200: 228 KB
    (10, 0): SmLimits(max_warps=64, max_blocks=32, shared_bytes=233472),  # B200: 228 KB
}


def limits_for(arch: str) -> SmLimits | None:
    """Limits for ``sm_90a``/``sm_90``/``9.0`` style names; None for an unknown architecture."""
    digits = arch.lower().removeprefix("sm_").removeprefix("compute_").rstrip("af").replace(".", "")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return ARCH_LIMITS.get((int(digits[:-1]), int(digits[-1])))


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM allowed by each resource, and the resulting theoretical occupancy."""

    block_size: int
    warps_per_block: int
    by_warps: int
    by_blocks: int
    by_registers: int
    by_shared_memory: int
    max_warps: int

    @property
    def blocks_per_sm(self) -> int:
        return min(self.by_warps, self.by_blocks, self.by_registers, self.by_shared_memory)

    @property
    def active_warps(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps

    @property
    def limiter(self) -> str:
        """Which resource caps occupancy ("registers", "shared memory", "block size", "blocks per SM")."""
        named = [
            ("registers", self.by_registers),
            ("shared memory", self.by_shared_memory),
            ("block size", self.by_warps),
            ("blocks per SM", self.by_blocks),
        ]
        return min(named, key=lambda item: item[1])[0]


def theoretical_occupancy(
    limits: SmLimits, block_size: int, registers_per_thread: int, shared_bytes_per_block: int
) -> Occupancy:
    """Occupancy of a launch with ``block_size`` threads, given registers/thread and smem/block."""
    if block_size <= 0:
        raise ValueError("block size must be positive")
    warps_per_block = math.ceil(block_size / 32)
    by_warps = limits.max_warps // warps_per_block
    regs = min(max(registers_per_thread, 1), limits.max_registers_per_thread)
    regs_per_warp = _round_up(regs * 32, limits.register_granularity)
    warps_per_partition = (limits.registers // limits.sub_partitions) // regs_per_warp
    by_registers = (warps_per_partition * limits.sub_partitions) // warps_per_block
    per_block = shared_bytes_per_block + limits.reserved_shared_per_block
    by_shared = limits.shared_bytes // per_block if per_block else limits.max_blocks
    return Occupancy(
        block_size=block_size,
        warps_per_block=warps_per_block,
        by_warps=by_warps,
        by_blocks=limits.max_blocks,
        by_registers=by_registers,
        by_shared_memory=by_shared,
        max_warps=limits.max_warps,
    )


def register_limited_warps(limits: SmLimits, registers_per_thread: int) -> int:
    """Warps per SM the register file allows, whatever the block size (an upper bound)."""
    regs = min(max(registers_per_thread, 1), limits.max_registers_per_thread)
    regs_per_warp = _round_up(regs * 32, limits.register_granularity)
    return min(limits.max_warps, ((limits.registers // limits.sub_partitions) // regs_per_warp) * limits.sub_partitions)


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step
