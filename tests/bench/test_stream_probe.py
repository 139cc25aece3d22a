"""benchmarks/stream_probe.py without a GPU: its CUDA source builds for sm_90 (nvcc to PTX, then ptxas for the
inline PTX) with every cache hint in its own instruction, its command line says in one line that it needs a GPU,
and its pure parts (the configurations, the choice of hinted and SiLU rows, bytes and floors, the chunked
references and comparisons) do what they say."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import torch

from benchmark_scripts import (
    assert_exits_2_without_a_gpu,
    assert_ptx_assembles,
    benchmark_module,
    dumped_source,
)


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return benchmark_module("stream_probe")


@pytest.mark.nvcc
def test_the_kernels_build_for_sm_90_without_warnings(probe: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "probe.cu"
    source.write_text(probe.kernel_source())
    ptx = tmp_path / "probe.ptx"
    nvcc = ["nvcc", "-arch=sm_90", "-std=c++20", "-O3", "--ptx", str(source), "-o", str(ptx)]
    built = subprocess.run(nvcc, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "warning" not in built.stderr.lower(), built.stderr[-3000:]
    text = ptx.read_text()
    for instruction in (
        "ld.global.nc.v4.f32",  # plain loads (x is const __restrict__)
        "ld.global.cs.v4.f32",
        "ld.global.nc.L1::no_allocate.L2::256B.v4.f32",
        "st.global.v4.f32",  # plain 16-byte stores stay whole
        "st.global.cs.v4.f32",
        "ld.global.nc.v2.f32",  # the V=2 column kernels
    ):
        assert instruction in text, instruction
    for kernel in ("gridstride_kernel", "oneshot_kernel", "read_kernel", "col_kernel", "tile_kernel"):
        assert f".entry _ZN11streamprobe{len(kernel)}{kernel}" in text, kernel
    assert ".entry _ZN11streamprobe14combine_kernel" in text
    assert_ptx_assembles(ptx, tmp_path, no_warnings=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the script would run")
def test_without_a_gpu_the_script_exits_2_with_one_line() -> None:
    assert_exits_2_without_a_gpu("stream_probe")


def test_dump_source_needs_no_gpu_and_writes_both_halves(probe: ModuleType, tmp_path: Path) -> None:
    text = dumped_source("stream_probe", probe, tmp_path)
    for name in ("streamprobe_elementwise", "streamprobe_column", "streamprobe_error"):
        assert name in text and name in probe.TORCH_WRAPPER  # defined there, declared here


def test_the_elementwise_configurations(probe: ModuleType) -> None:
    configs = probe.elementwise_configs()
    labels = [(c.variant, c.label()) for c in configs]
    assert len(labels) == len(set(labels)) == 9 + 9 + 27 + 6
    assert all(c.hint == "plain" and c.op == "relu" for c in configs)
    today = probe.EwConfig("a_gridstride", 512, 1, 4)
    assert today in configs and "grid=4xSM" in today.label() and "loop=nvcc" not in today.label()
    assert probe.EwConfig("a_gridstride", 512, 1, 4, strict=False) in configs
    unrolled = {(c.unroll, c.blocks_per_sm, c.block) for c in configs if c.variant == "b_gridstride_unroll"}
    assert unrolled == {(u, g, b) for u in (2, 4, 8) for g in (2, 4, 8) for b in (512, 256, 128)}
    oneshot = [c for c in configs if c.variant == "c_oneshot"]
    assert {(c.unroll, c.block) for c in oneshot} == {(u, b) for u in (1, 2, 4) for b in (128, 256)}
    assert all(c.blocks_per_sm == 0 and c.structure == 1 and "grid=cover" in c.label() for c in oneshot)
    reads = probe.read_configs()
    assert reads and all(c.structure == 2 and c.blocks_per_sm > 0 and c.label().startswith("read") for c in reads)


def test_the_column_configurations(probe: ModuleType) -> None:
    configs = probe.column_configs()
    labels = [(c.variant, c.label()) for c in configs]
    assert len(labels) == len(set(labels))
    by_variant: dict[str, int] = {}
    for c in configs:
        by_variant[c.variant] = by_variant.get(c.variant, 0) + 1
    assert by_variant == {
        "a_thread_per_column": 8,
        "a_warp_per_column": 2,
        "b_unrolled": 12,
        "c_lanes": 8,
        "d_vector": 8,
        "e_tile_splitk": 8,
    }
    assert set(by_variant) == set(probe.COLUMN_VARIANTS)
    today = probe.ColConfig("a_thread_per_column", 256, 0, acc64=True)
    assert today in configs and today.flags == 1 and "acc=fp64" in today.label() and "U=nvcc" in today.label()
    warp = probe.ColConfig("a_warp_per_column", 256, 0, lanes=32, acc64=True, lanes_fast=True)
    assert warp in configs and warp.flags == 1 | 4
    assert probe.ColConfig("b_unrolled", 256, 8, multi_acc=True).flags == 2
    assert {c.lanes for c in configs if c.variant == "c_lanes"} == {4, 8, 16, 32}
    tiles = [c for c in configs if c.variant == "e_tile_splitk"]
    assert {(c.tile_rows, c.tile_cols) for c in tiles} == {(32, 64), (32, 128), (64, 64), (64, 128)}
    assert all(c.kind == 1 and c.block == 256 and c.splits <= probe.MAX_SPLITS for c in tiles)
    assert all(c.kind == 0 for c in configs if c.variant != "e_tile_splitk")


def test_vector_column_kernels_only_where_rows_stay_aligned(probe: ModuleType) -> None:
    vec4 = probe.ColConfig("d_vector", 256, 4, vec=4)
    assert vec4.supports((128, 4096, 4096)) is None
    assert "N % 4" in vec4.supports((128, 4096, 4095))
    assert probe.ColConfig("d_vector", 256, 4, vec=2).supports((8, 1024, 1022)) is None
    assert probe.ColConfig("b_unrolled", 256, 4).supports((128, 4096, 4095)) is None
    quick = probe.case_shapes(True)["column"]
    assert any(s[2] % 4 == 0 for s in quick) and any(s[2] % 2 for s in quick)


def test_hints_and_silu_go_to_the_fastest_passing_configurations(probe: ModuleType) -> None:
    Ew = probe.EwConfig
    measured = [
        (Ew("b_gridstride_unroll", 256, 4, 4), {"ms": 1.0, "ok": False}),  # fails the check
        (Ew("c_oneshot", 128, 2), {"ms": 2.0, "ok": True}),
        (Ew("b_gridstride_unroll", 512, 8, 2), {"ms": 2.5, "ok": True}),
        (Ew("c_oneshot", 256, 4), {"ms": 2.6, "ok": True}),  # same structure, slower
        (Ew("a_gridstride", 512, 1, 4), {"ms": 3.0, "ok": True}),
        (Ew("a_gridstride", 512, 1, 8, strict=False), {"ms": 2.9, "ok": True}),
        (Ew("a_gridstride", 128, 1, 2), {"ms": None, "note": "no kernel"}),
    ]
    targets = probe.fastest_by_family(measured)
    assert targets == [Ew("c_oneshot", 128, 2), Ew("b_gridstride_unroll", 512, 8, 2)]
    hinted = probe.hint_configs(targets)
    assert len(hinted) == 2 * (len(probe.HINTS) - 1)
    assert {c.hint for c in hinted} == set(probe.HINTS) - {"plain"}
    assert probe.fastest_by_family([]) == []
    measured.append((Ew("b_gridstride_unroll", 512, 8, 2, hint="stcs"), {"ms": 1.5, "ok": True}))
    silu = probe.silu_configs(measured)
    assert silu == [
        Ew("b_gridstride_unroll", 512, 8, 2, hint="stcs", op="silu"),
        Ew("c_oneshot", 128, 2, op="silu"),
        Ew("a_gridstride", 512, 1, 8, strict=False, op="silu"),  # the fastest baseline
    ]


def test_shapes_bytes_and_chunks(probe: ModuleType) -> None:
    full = probe.case_shapes(False)
    assert full == {"elementwise": [(4096, 393216)], "column": [(128, 4096, 4095), (128, 4096, 4096)]}
    quick = probe.case_shapes(True)
    assert probe.numel(quick["elementwise"][0]) % 4 == 3  # the scalar tail runs
    assert any(s[1] % 16 for s in quick["column"])  # rows no unroll divides
    assert probe.case_shapes(True, "column").keys() == {"column"}
    assert probe.elementwise_bytes((4096, 393216)) == 12_884_901_888
    assert probe.column_bytes((128, 4096, 4095)) == 8_587_837_440 + 2_096_640
    assert probe.nominal_floor_ms(12_884_901_888) == pytest.approx(3.846, abs=1e-3)
    assert probe.chunk_rows((4096, 393216)) == 341  # 1.5 MiB a row, 512 MiB a chunk
    assert probe.chunk_rows((128, 4096, 4095)) == 8
    assert probe.chunk_rows((1, 1 << 30)) == 1


def test_the_chunked_elementwise_comparison(probe: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    x = torch.rand(5, 7).mul_(2).sub_(1)
    monkeypatch.setattr(probe, "CHECK_CHUNK_BYTES", 2 * 7 * 4)  # three chunks: 2, 2, 1 rows
    assert probe.compare_elementwise(x, torch.relu(x), "relu") == {"max_abs_diff": 0.0, "ok": True}
    silu = probe.compare_elementwise(x, torch.nn.functional.silu(x), "silu")
    assert silu["ok"] and silu["max_abs_diff"] < 1e-6
    assert not probe.compare_elementwise(x, x.clone(), "relu")["ok"]  # negatives kept
    off = torch.relu(x)
    off[4, 6] += 1e-2  # in the last chunk
    assert probe.compare_elementwise(x, off, "relu") == {"max_abs_diff": pytest.approx(1e-2, rel=1e-3), "ok": False}
    off[0, 0] = float("nan")
    result = probe.compare_elementwise(x, off, "relu")
    assert result["max_abs_diff"] != result["max_abs_diff"] and not result["ok"]


def test_the_chunked_column_reference_and_comparison(probe: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    x = torch.rand(5, 33, 7)
    monkeypatch.setattr(probe, "CHECK_CHUNK_BYTES", 2 * 33 * 7 * 4)
    assert probe.chunk_rows(x.shape) == 2
    ref = probe.column_reference(x)
    assert ref.dtype == torch.float64 and ref.shape == (5, 1, 7)
    assert torch.equal(ref, x.double().sum(1, keepdim=True))
    result = probe.compare_column(probe.torch_column_sum(x), ref)
    assert result["ok"] and result["max_abs_diff"] < 1e-5 and result["rel_diff"] < 1e-6
    flat = probe.torch_column_sum(x).reshape(5 * 7)  # the kernels' M * N output is compared the same
    assert probe.compare_column(flat, ref)["ok"]
    off = probe.torch_column_sum(x)
    scale = float(ref.abs().max())
    off[4, 0, 6] += 2e-4 * scale  # beyond 1e-4 of the largest magnitude
    assert not probe.compare_column(off, ref)["ok"]
    off[4, 0, 6] -= 1.5e-4 * scale  # within it
    assert probe.compare_column(off, ref)["ok"]
    off[0, 0, 0] = float("nan")
    assert not probe.compare_column(off, ref)["ok"]


def test_best_kernel_ignores_torch_read_only_and_failing_rows(probe: ModuleType) -> None:
    rows = [
        {"variant": "torch_compile", "ms": 1.0, "ok": True},
        {"variant": "read_only", "ms": 1.1},
        {"variant": "c_oneshot", "ms": 2.0, "ok": False},
        {"variant": "b_gridstride_unroll", "ms": 3.0, "ok": True},
        {"variant": "a_gridstride", "ms": None},
    ]
    assert probe.best_kernel(rows)["variant"] == "b_gridstride_unroll"
    assert probe.best_kernel(rows[:3]) is None
