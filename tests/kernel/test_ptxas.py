"""Parsing recorded nvcc output (captured on the H200 machine and here)."""

from __future__ import annotations

from pathlib import Path

from optiml.kernel.ptxas import parse_diagnostics, parse_resources

DATA = Path(__file__).resolve().parents[1] / "profile" / "data"


def test_parses_recorded_ptxas_report() -> None:
    resources = {r.name.split("(")[0]: r for r in parse_resources((DATA / "ptxas.txt").read_text())}
    assert set(resources) >= {"vecadd", "transpose_naive", "matmul_naive", "smem_conflict"}
    assert resources["smem_conflict"].shared_bytes == 4096
    assert resources["smem_conflict"].barriers == 1
    assert all(r.registers > 0 and r.arch == "sm_90" for r in resources.values())


def test_lmem_spills_and_cmem() -> None:
    log = """ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_90a'
ptxas info    : Function properties for _Z3fooPf
    512 bytes stack frame, 64 bytes spill stores, 32 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 8 bytes lmem, 368 bytes cmem[0], 4 bytes cmem[2]
"""
    [res] = parse_resources(log)
    assert (res.registers, res.shared_bytes, res.local_bytes, res.constant_bytes) == (255, 2048, 8, 372)
    assert (res.stack_bytes, res.spill_stores, res.spill_loads) == (512, 64, 32)
    assert res.spills


def test_diagnostics_from_nvcc_gcc_ptxas_and_linker() -> None:
    log = "\n".join(
        [
            '/tmp/x/kernel.cu(12): error: identifier "foo" is undefined',
            '/tmp/x/kernel.cu(3): warning #177-D: variable "y" was declared but never referenced',
            "/tmp/x/kernel.cu:40:7: error: expected ';' before '}' token",
            "ptxas error   : Entry function '_Z1kv' uses too much shared data (0x40000 bytes, 0xc000 max)",
            "/usr/bin/ld: kernel.o: undefined reference to `cublasCreate_v2'",
            "/usr/local/cuda/include/foo.h(7): error: bad header",
        ]
    )
    diags = parse_diagnostics(log)
    assert [(d.severity, d.line) for d in diags] == [
        ("error", 12),
        ("warning", 3),
        ("error", 40),
        ("error", None),
        ("error", None),
        ("error", None),
    ]
    assert diags[2].column == 7
    assert "too much shared data" in diags[3].message
    assert "cublasCreate_v2" in diags[4].message
    assert diags[5].message.startswith("/usr/local/cuda/include/foo.h(7)")
