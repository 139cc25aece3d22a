"""benchmarks/rmsnorm_nchw_probe.py without a GPU: its CUDA source builds (nvcc, then ptxas for the inline
PTX), its command line says in one line that it needs a GPU, and its pure parts (the configurations, the
floor, the chunked exact reference and comparison) do what they say."""

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
    return benchmark_module("rmsnorm_nchw_probe")


@pytest.mark.nvcc
def test_the_kernels_build_for_sm_90_with_every_hint_in_its_own_instruction(probe: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "probe.cu"
    source.write_text(probe.kernel_source((64,)))
    ptx = tmp_path / "probe.ptx"
    nvcc = ["nvcc", "-arch=sm_90", "-std=c++20", "-O3", "--ptx", str(source), "-o", str(ptx)]
    built = subprocess.run(nvcc, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    text = ptx.read_text()
    for instruction in (
        "ld.global.nc.v4.f32",  # plain and ldg loads (x is const __restrict__)
        "ld.global.cs.v4.f32",
        "ld.global.nc.L1::no_allocate.L2::256B.v4.f32",
        "st.global.wb.v4.f32",  # plain 16-byte stores stay whole
        "st.global.cs.v4.f32",
        "ld.global.nc.v2.f32",
    ):
        assert instruction in text, instruction
    for kernel in ("reg_kernel", "twopass_kernel", "tile_kernel"):
        assert f".entry _ZN8rmsprobe{len(kernel)}{kernel}" in text
    assert_ptx_assembles(ptx, tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the script would run")
def test_without_a_gpu_the_script_exits_2_with_one_line() -> None:
    assert_exits_2_without_a_gpu("rmsnorm_nchw_probe")


def test_dump_source_needs_no_gpu_and_writes_both_halves(probe: ModuleType, tmp_path: Path) -> None:
    text = dumped_source("rmsnorm_nchw_probe", probe, tmp_path)
    assert "#define RMSPROBE_CHANNELS(X) X(32) X(64) X(128)" in text


def test_the_configurations_cover_each_structure_once_per_block_size(probe: ModuleType) -> None:
    configs = probe.variant_configs()
    labels = [(c.variant, c.label()) for c in configs]
    assert len(labels) == len(set(labels)) == 9 + 6 + 6 + 9
    assert {c.block for c in configs} == set(probe.BLOCKS) == {64, 128, 256}
    assert all(c.hint == "plain" for c in configs)
    by_variant: dict[str, set[int]] = {}
    for c in configs:
        by_variant.setdefault(c.variant, set()).add(c.param)
    assert by_variant == {
        "a_scalar_reg": {1},
        "b_vec_reg": {2, 4},
        "b_vec_twopass": {2, 4},
        "c_smem_tile": {32, 64, 128},
    }
    today = probe.Config("a_scalar_reg", 64, 1, acc64=True, divide=True)
    assert today in configs and today.flags == 3 and "acc=fp64 div" in today.label()
    assert {c.flags for c in configs if c.variant != "a_scalar_reg"} == {0}
    assert [c.kind for c in configs[:1]] == [0] and probe.Config("c_smem_tile", 64, 32).kind == 2


def test_register_caching_is_limited_to_256_floats_a_thread(probe: ModuleType) -> None:
    assert probe.Config("b_vec_reg", 64, 4).supports(64)
    assert not probe.Config("b_vec_reg", 64, 4).supports(128)
    assert probe.Config("b_vec_reg", 64, 2).supports(128)
    assert probe.Config("b_vec_twopass", 64, 4).supports(4096)  # nothing cached
    assert probe.Config("c_smem_tile", 64, 128).supports(128)


def test_hints_go_to_the_fastest_passing_configuration_of_the_two_fastest_structures(probe: ModuleType) -> None:
    Config = probe.Config
    measured = [
        (Config("a_scalar_reg", 64, 1, acc64=True, divide=True), {"ms": 1.0, "allclose": True}),  # no hinted kernel
        (Config("b_vec_reg", 128, 4), {"ms": 2.0, "allclose": False}),  # fails the check
        (Config("b_vec_twopass", 256, 4), {"ms": 3.0, "allclose": True}),
        (Config("b_vec_reg", 64, 2), {"ms": 3.5, "allclose": True}),  # same structure (b), slower
        (Config("c_smem_tile", 256, 128), {"ms": 4.0, "allclose": True}),
        (Config("a_scalar_reg", 64), {"ms": 5.0, "allclose": True}),
        (Config("c_smem_tile", 64, 32), {"ms": None, "note": "no kernel"}),
    ]
    targets = probe.hint_targets(measured)
    assert targets == [Config("b_vec_twopass", 256, 4), Config("c_smem_tile", 256, 128)]
    hinted = probe.hint_configs(targets)
    assert len(hinted) == 2 * (len(probe.HINTS) - 1)
    assert {c.hint for c in hinted} == set(probe.HINTS) - {"plain"}
    assert all((c.variant, c.block, c.param) in {(t.variant, t.block, t.param) for t in targets} for c in hinted)
    assert probe.hint_targets([]) == []


def test_shapes_and_the_floor(probe: ModuleType) -> None:
    assert probe.case_shapes(None, False) == [(112, 64, 512, 512)]
    quick = probe.case_shapes(None, True)
    assert quick[0] == (16, 64, 256, 256) and {s[1] for s in quick} == {32, 64, 128}
    assert any((s[2] * s[3]) % 4 for s in quick)  # one exercises the scalar fallback
    assert probe.case_shapes([2, 3, 4, 5], True) == [(2, 3, 4, 5)]
    assert probe.traffic_bytes((112, 64, 512, 512)) == 15_032_385_536
    assert probe.nominal_floor_ms((112, 64, 512, 512)) == pytest.approx(4.487, abs=1e-3)
    assert probe.chunk_images((112, 64, 512, 512)) == 8  # 64 MiB an image, 512 MiB a chunk
    assert probe.chunk_images((1, 4096, 1024, 1024)) == 1


def test_the_chunked_exact_reference_and_comparison(probe: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    x = torch.rand(5, 8, 3, 7)
    monkeypatch.setattr(probe, "CHECK_CHUNK_BYTES", 2 * 8 * 3 * 7 * 4)
    assert probe.chunk_images(x.shape) == 2  # three chunks: 2, 2, 1 images
    exact = probe.exact_reference(x, torch.empty_like(x))
    xd = x.double()
    want = xd / torch.sqrt((xd * xd).mean(1, keepdim=True) + probe.EPS)
    assert torch.equal(exact, want.float())
    assert probe.compare(probe.reference(x), exact)["allclose"]
    assert probe.compare(probe.reference(x), exact)["max_abs_diff"] < 1e-5
    off = exact.clone()
    off[4, 1, 2, 3] += 1e-2  # in the last chunk
    assert probe.compare(off, exact) == {"max_abs_diff": pytest.approx(1e-2, rel=1e-3), "allclose": False}
    off[0, 0, 0, 0] = float("nan")
    result = probe.compare(off, exact)
    assert result["max_abs_diff"] != result["max_abs_diff"] and not result["allclose"]  # NaN


def test_best_kernel_ignores_torch_rows_and_failures(probe: ModuleType) -> None:
    rows = [
        {"variant": "torch_compile", "ms": 1.0, "allclose": True},
        {"variant": "c_smem_tile", "ms": 2.0, "allclose": False},
        {"variant": "b_vec_reg", "ms": 3.0, "allclose": True},
        {"variant": "a_scalar_reg", "ms": None},
    ]
    assert probe.best_kernel(rows)["variant"] == "b_vec_reg"
    assert probe.best_kernel(rows[:2]) is None
