"""SASS parsing on the recorded `cuobjdump -sass` of probe.cu, and finding cuobjdump."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from profile_data import DATA, read

from optiml import cuda_tools
from optiml.profile.sass import SassKernel, disassemble, find_cuobjdump, parse_sass


@pytest.fixture(scope="module")
def kernels() -> dict[str, SassKernel]:
    return {k.mangled: k for k in parse_sass(read("probe_sass.txt"))}


def test_four_kernels_with_names(kernels: dict[str, SassKernel]) -> None:
    assert set(kernels) == {
        "_Z13smem_conflictPf",
        "_Z12matmul_naivePKfS0_Pfi",
        "_Z15transpose_naivePKfPfii",
        "_Z6vecaddPKfS0_Pfl",
    }
    assert all(k.instructions for k in kernels.values())
    assert not any(i.base == "NOP" for k in kernels.values() for i in k.instructions)


def test_vecadd_global_accesses_are_scalar(kernels: dict[str, SassKernel]) -> None:
    vecadd = kernels["_Z6vecaddPKfS0_Pfl"]
    assert vecadd.widths("global_load") == {32: 2}  # two LDG.E.CONSTANT (read-only path), 32-bit
    assert vecadd.widths("global_store") == {32: 1}
    assert [i.opcode for i in vecadd.instructions if i.category == "global_load"] == ["LDG.E.CONSTANT"] * 2
    assert vecadd.mix["fp32"] == 1  # the FADD
    assert vecadd.loops == ()
    assert vecadd.local_memory_ops == 0
    assert vecadd.tensor_opcodes == ()


def test_matmul_inner_loop_loads_two_operands_per_fma(kernels: dict[str, SassKernel]) -> None:
    matmul = kernels["_Z12matmul_naivePKfS0_Pfi"]
    assert len(matmul.loops) == 3  # unrolled x16 main loop, x4 loop, remainder
    hottest = matmul.inner_loops[0]
    assert (hottest.start, hottest.end) == (0x2D0, 0x840)
    assert hottest.mix["global_load"] == 32
    assert hottest.mix["fp32"] == 16
    assert matmul.widths("global_load") == {32: 58}
    assert matmul.tensor_opcodes == ()
    assert not any(i.category == "tensor" for k in kernels.values() for i in k.instructions)


def test_smem_conflict_uses_shared_memory_and_a_barrier(kernels: dict[str, SassKernel]) -> None:
    smem = kernels["_Z13smem_conflictPf"]
    assert sorted(i.opcode for i in smem.instructions if i.category == "shared_memory") == ["LDS", "STS"]
    assert any(i.opcode.startswith("BAR.SYNC") for i in smem.instructions)


def test_predicates_branches_and_the_trap_after_exit(kernels: dict[str, SassKernel]) -> None:
    matmul = kernels["_Z12matmul_naivePKfS0_Pfi"]
    exit_ = next(i for i in matmul.instructions if i.base == "EXIT")
    assert exit_.predicate == "@P0"
    back = next(i for i in matmul.instructions if i.address == 0x840)
    assert back.base == "BRA" and back.branch_target == 0x2D0
    # `BRA 0xf50` at 0xf50 spins after EXIT: not a loop
    assert all(loop.start != loop.end for loop in matmul.loops)


def test_widths_tensor_and_local_memory_opcodes() -> None:
    text = "\n".join(
        [
            "\t\tFunction : _Z1kPf",
            "        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;",
            "        /*0010*/                   STG.E.64 desc[UR4][R2.64], R4 ;",
            "        /*0020*/                   LDG.E.U8 R7, desc[UR4][R2.64] ;",
            "        /*0030*/                   HMMA.16816.F32 R8, R4, R6, R8 ;",
            "        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;",
            "        /*0050*/                   STL [R1], R9 ;",
            "        /*0060*/                   LDL R9, [R1] ;",
            "        /*0070*/              @!P0 BRA 0x10 ;",
            "        /*0080*/                   EXIT ;",
        ]
    )
    (kernel,) = parse_sass(text, demangle_names=False)
    assert kernel.widths("global_load") == {128: 1, 8: 1}
    assert kernel.widths("global_store") == {64: 1}
    assert kernel.tensor_opcodes == ("HGMMA", "HMMA")
    assert kernel.local_memory_ops == 2
    (loop,) = kernel.inner_loops
    assert loop.mix["local_memory"] == 2 and loop.mix["tensor"] == 2


def _fake_tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    recorded = str(DATA / "probe_sass.txt")
    tool.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({recorded!r}).read())\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_cuobjdump_is_found_beside_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    tool = _fake_tool(tmp_path / "cuda" / "bin", "cuobjdump")
    assert find_cuobjdump(nvcc=str(tmp_path / "cuda" / "bin" / "nvcc")) == str(tool)
    report = disassemble(str(tmp_path / "any.so"), nvcc=str(tmp_path / "cuda" / "bin" / "nvcc"))
    assert report.error is None
    assert {k.mangled for k in report.kernels} >= {"_Z6vecaddPKfS0_Pfl"}


def test_cuobjdump_is_found_in_the_nvidia_pip_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    tool = _fake_tool(tmp_path / "site" / "nvidia" / "cu13" / "bin", "cuobjdump")
    monkeypatch.setattr(cuda_tools, "_pip_tool_folders", lambda: [tool.parent])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if Path("/usr/local/cuda/bin/cuobjdump").is_file():
        pytest.skip("a system cuobjdump comes first here")
    assert find_cuobjdump() == str(tool)


def test_missing_cuobjdump_degrades_to_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(cuda_tools, "_pip_tool_folders", lambda: [])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if Path("/usr/local/cuda/bin/cuobjdump").is_file():
        pytest.skip("a system cuobjdump is installed here")
    report = disassemble(str(tmp_path / "kernel.so"))
    assert report.kernels == ()
    assert report.error is not None and "nvidia-cuda-cuobjdump" in report.error


def test_failing_cuobjdump_reports_its_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = folder / "cuobjdump"
    message = "cuobjdump fatal   : Could not find executable file 'nvdisasm'"
    tool.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write({message!r})\nsys.exit(1)\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    report = disassemble(str(tmp_path / "kernel.so"))
    assert report.error is not None and "nvdisasm" in report.error


@pytest.mark.nvcc
def test_real_cuobjdump_on_a_compiled_probe(tmp_path: Path) -> None:
    if find_cuobjdump(nvcc=_which("nvcc")) is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    so = tmp_path / "probe.so"
    subprocess.run(
        ["nvcc", "--shared", "-Xcompiler", "-fPIC", "-O3", "-arch=sm_90a", "-o", str(so), str(DATA / "probe.cu")],
        check=True,
        capture_output=True,
    )
    report = disassemble(str(so), nvcc=_which("nvcc"))
    assert report.error is None, report.error
    vecadd = next(k for k in report.kernels if k.mangled == "_Z6vecaddPKfS0_Pfl")
    assert vecadd.widths("global_load") == {32: 2}


def _which(name: str) -> str | None:
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if (Path(folder) / name).is_file():
            return str(Path(folder) / name)
    return None
