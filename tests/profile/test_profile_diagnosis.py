"""Diagnoses of the four recorded probe kernels, and how the diagnosis degrades without evidence."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from profile_data import kernel_profile, single_profile

from optiml.profile.diagnosis import Diagnosis, diagnose
from optiml.profile.findings import classify
from optiml.profile.metrics import KernelMetrics
from optiml.profile.ncu_csv import NcuRow
from optiml.profile.results import KernelProfile, Profile
from optiml.profile.roofline import Roofline, datasheet_peaks
from optiml.profile.static import StaticAnalysis

H200 = datasheet_peaks("NVIDIA H200")
N = 2048
VEC = 1 << 26


def _diagnose(row: NcuRow, static: StaticAnalysis | None, roofline: Roofline | None = None) -> Diagnosis:
    m = KernelMetrics.from_values(row.values)
    return diagnose(profile=single_profile(row), static=static, roofline=roofline, time_ms=m.duration_ms)


def test_transpose_is_diagnosed_as_uncoalesced_stores(
    raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis
) -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=0.0, min_bytes=2 * 8192 * 8192 * 4)
    d = _diagnose(raw_rows["transpose_naive"], probe_static, roofline)
    assert d.bound == "memory"
    assert "L2" in d.summary
    top = d.bottlenecks[0]
    assert top.name == "uncoalesced_stores"
    assert top.evidence["sectors/request"] == pytest.approx(32.0, abs=0.01)
    assert top.evidence["ideal sectors/request"] == 4.0
    assert top.evidence["wasted share of global sectors"] == pytest.approx(0.78, abs=0.01)
    assert top.severity == pytest.approx(0.78, abs=0.01)
    assert "uncoalesced_loads" not in {b.name for b in d.bottlenecks}  # reads are row-wise
    text = d.render()
    assert "uncoalesced global stores" in text and "sectors/request 32" in text
    assert len(text.splitlines()) <= 25
    assert d.roofline_fraction == pytest.approx(roofline.floor_ms / 0.976224)  # type: ignore[operator]
    assert d.proxy_score == pytest.approx(d.roofline_fraction)


def test_vecadd_is_memory_bound_near_the_dram_roof(raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis) -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=float(VEC), min_bytes=3 * VEC * 4)
    d = _diagnose(raw_rows["vecadd"], probe_static, roofline)
    assert d.bound == "memory" and "DRAM" in d.summary
    assert d.bottlenecks[0].name == "dram_bandwidth"
    assert d.bottlenecks[0].evidence["DRAM % of peak"] == pytest.approx(71.89)
    assert d.roofline_fraction is not None and 0.6 < d.roofline_fraction < 1.0
    assert not any(b.name.startswith("uncoalesced") for b in d.bottlenecks)  # 4 sectors/request is ideal
    assert "float4" in d.bottlenecks[0].suggestion  # SASS shows only 32-bit accesses


def test_smem_conflict_is_diagnosed_as_bank_conflicts(
    raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis
) -> None:
    d = _diagnose(raw_rows["smem_conflict"], probe_static)
    top = d.bottlenecks[0]
    assert top.name == "bank_conflicts"
    assert top.evidence["load conflicts"] == 1_017_124
    assert top.evidence["replay share of SM cycles"] == pytest.approx(0.72, abs=0.02)
    assert "[32][33]" in top.suggestion


def test_matmul_is_on_chip_memory_bound_far_from_the_compute_roof(
    raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis
) -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=2.0 * N**3, min_bytes=3 * N * N * 4)
    d = _diagnose(raw_rows["matmul_naive"], probe_static, roofline)
    assert d.bound == "memory" and "L1" in d.summary
    assert roofline.regime == "compute"
    assert d.roofline_fraction is not None and d.roofline_fraction < 0.15
    names = [b.name for b in d.bottlenecks]
    assert names[0] == "no_operand_reuse"
    assert d.bottlenecks[0].evidence["loads per FP instruction"] == 2.0
    assert "l1_throughput" in names
    assert "no_tensor_cores" not in names  # fp32: tensor cores are not the roof
    assert "of the roof" in d.render()


def test_without_sass_coalescing_assumes_32_bit_accesses(raw_rows: dict[str, NcuRow]) -> None:
    d = _diagnose(raw_rows["transpose_naive"], static=None)
    assert d.bottlenecks[0].name == "uncoalesced_stores"
    assert "assumed" in d.bottlenecks[0].threshold
    assert any(m.startswith("static analysis") for m in d.missing_evidence)


def test_wide_accesses_raise_the_ideal(raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis) -> None:
    """16 sectors per request is ideal for 128-bit stores: not flagged when SASS shows STG.128."""
    transpose = probe_static.find("transpose_naive")
    assert transpose is not None and transpose.sass is not None
    wide = [replace(i, opcode="STG.E.128") if i.base == "STG" else i for i in transpose.sass.instructions]
    static = replace(
        probe_static,
        kernels=(replace(transpose, sass=replace(transpose.sass, instructions=tuple(wide))),),
    )
    row = raw_rows["transpose_naive"]
    values = {**row.values, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 16 * 2_097_152.0}
    d = _diagnose(replace(row, values=values), static)
    assert not any(b.name == "uncoalesced_stores" for b in d.bottlenecks)


def test_no_counters_falls_back_to_static_and_timing(raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis) -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=2.0 * N**3, min_bytes=3 * N * N * 4)
    failed = Profile("candidate 0", errors=("ncu (Nsight Compute) not found: install it or put ncu on PATH",))
    matmul = probe_static.find("matmul_naive")
    assert matmul is not None
    static = replace(probe_static, kernels=(matmul,))
    d = diagnose(profile=failed, static=static, roofline=roofline, time_ms=3.129312)
    assert d.bound == "unknown"
    assert any("ncu (Nsight Compute) not found" in m for m in d.missing_evidence)
    assert d.bottlenecks[0].name == "no_operand_reuse"  # from SASS alone
    # of the 3xTF32 roof (989 / 6 TFLOP/s): 0.082 of the FMA rate
    assert d.roofline_fraction == pytest.approx(0.033, abs=0.001)
    assert d.proxy_score == d.roofline_fraction
    assert "Missing evidence" in d.render()


def test_nothing_known_still_gives_a_diagnosis() -> None:
    d = diagnose(profile=None, static=None, roofline=None, time_ms=None)
    assert d.bound == "unknown" and d.bottlenecks == () and d.proxy_score == 0.0
    assert len(d.missing_evidence) == 4
    assert "none found" in d.render()


def test_proxy_uses_useful_roofs_without_a_roofline(raw_rows: dict[str, NcuRow]) -> None:
    d = _diagnose(raw_rows["vecadd"], static=None)
    assert d.roofline_fraction is None
    assert d.proxy_score == pytest.approx(0.7189)  # DRAM % of peak, not the busier L2
    assert _diagnose(raw_rows["transpose_naive"], static=None).proxy_score == pytest.approx(0.1184)


def test_launch_overhead_when_the_gpu_is_mostly_idle(raw_rows: dict[str, NcuRow]) -> None:
    profile = single_profile(raw_rows["smem_conflict"])
    d = diagnose(profile=profile, static=None, roofline=None, time_ms=0.1)  # kernel: 0.0107 ms
    assert d.bound == "launch_overhead"
    assert d.bottlenecks[0].name == "launch_overhead"
    assert d.bottlenecks[0].severity == pytest.approx(1 - 0.010688 / 0.1)


def test_several_kernels_are_each_attributed_and_weighted(
    raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis
) -> None:
    profile = Profile(
        "candidate 0",
        kernels=(kernel_profile(raw_rows["vecadd"]), kernel_profile(raw_rows["transpose_naive"])),
    )
    d = diagnose(profile=profile, static=probe_static, roofline=None, time_ms=1.3)
    share = 0.976224 / (0.976224 + 0.229312)
    stores = next(b for b in d.bottlenecks if b.name == "uncoalesced_stores")
    assert stores.kernel == "transpose_naive"
    assert stores.severity == pytest.approx(0.778 * share, abs=0.01)
    assert "transpose_naive" in d.summary  # the longer kernel decides the bound
    assert sum(line.startswith("Kernel ") for line in d.render().splitlines()) == 2
    assert not any(b.name == "no_operand_reuse" for b in d.bottlenecks)  # matmul_naive was not launched


def test_latency_bound_kernel_with_low_occupancy() -> None:
    metrics = KernelMetrics(
        duration_ns=50_000.0,
        dram_pct=12.0,
        l2_pct=15.0,
        l1_pct=20.0,
        sm_pct=10.0,
        achieved_occupancy_pct=18.0,
        theoretical_occupancy_pct=25.0,
        block_limit_registers=2.0,
        block_limit_shared_mem=8.0,
        block_limit_warps=8.0,
        registers_per_thread=128.0,
        stalls={"long_scoreboard": 30.0, "selected": 1.0, "wait": 3.0},
    )
    assert classify(metrics) == ("latency", "", 20.0)
    profile = Profile("candidate 0", kernels=(KernelProfile("k(float *)", 0, (256, 1, 1), (132, 1, 1), metrics),))
    d = diagnose(profile=profile, static=None, roofline=None, time_ms=0.05)
    names = [b.name for b in d.bottlenecks]
    assert d.bound == "latency" and "long_scoreboard" in d.summary
    assert "low_occupancy" in names and "stall_long_scoreboard" in names
    occupancy = next(b for b in d.bottlenecks if b.name == "low_occupancy")
    assert "limited by registers" in occupancy.suggestion


def test_to_dict_is_json(raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis) -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=0.0, min_bytes=2 * 8192 * 8192 * 4)
    d = _diagnose(raw_rows["transpose_naive"], probe_static, roofline)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["bound"] == "memory"
    assert data["bottlenecks"][0]["name"] == "uncoalesced_stores"
    assert data["profile"]["kernels"][0]["metrics"]["global_store_requests"] == 2_097_152
    assert data["roofline"]["regime"] == "memory"
    assert Profile.from_dict(data["profile"]) == d.profile
