"""The overlapped tail with the installed nvcc: the shared object holds nvcc's fatbinary, the binary digest
and the diagnostics are serial nvcc's, and relocatable device code keeps nvcc's own tail."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tests.kernel.test_compiler import SCALE
from tests.kernel.test_nvcc_steps import BROKEN

from optiml.kernel.compiler import KEEP_DIR, OUTPUT_NAME, SOURCE_NAME, Compiler, CompilerConfig, nvcc_command
from optiml.kernel.identity import binary_digest, elf_sections
from optiml.kernel.nvcc_steps import NvccSteps, dryrun, module_id, parallel_script, parse_dryrun
from optiml.kernel.ptxas import parse_resources
from optiml.kernel.source import KernelSource

pytestmark = pytest.mark.nvcc

#: fails only in the host compile (gcc's ``error`` attribute: cudafe++ and cicc accept it)
HOST_COMPILE_ERROR = SCALE.replace(
    "OPTIML_EXPORT int", '__attribute__((error("host-only failure"))) void host_trap();\nOPTIML_EXPORT int'
).replace("return optiml_check_launch();", "host_trap(); return optiml_check_launch();")
#: fails only in ptxas (256 KiB of shared memory)
PTXAS_ERROR = SCALE.replace(
    "if (i < n) y[i] = 2.0f * x[i];",
    "__shared__ float big[65536]; big[threadIdx.x] = x[i]; __syncthreads(); if (i < n) y[i] = big[threadIdx.x ^ 1];",
)
#: fails only in cicc (cudafe++ leaves device restrictions to it)
CICC_ERROR = SCALE.replace("__global__ void", "int host_only(int v) { return v + 1; }\n__global__ void").replace(
    "2.0f * x[i]", "2.0f * x[i] + host_only(1)"
)


def _timeless(log: str) -> str:
    return re.sub(r"Compile time = [0-9.]+ ms", "", log)


def _steps(folder: Path, flags: tuple[str, ...] = ()) -> NvccSteps:
    folder.mkdir(parents=True, exist_ok=True)
    command = nvcc_command("nvcc", "sm_90a", flags)
    listing = subprocess.run(dryrun(command), cwd=folder, capture_output=True, text=True, timeout=60)
    steps = parse_dryrun(listing.stdout + listing.stderr)
    if steps is None:
        pytest.skip("this nvcc's -dryrun listing has another shape: it builds serially, as nvcc itself")
    return steps


def _build(folder: Path, code: str, *, overlapped: bool) -> subprocess.CompletedProcess[str]:
    """``code`` built in ``folder`` by the overlapped script, or by nvcc itself; the intermediates kept."""
    folder.mkdir(parents=True)
    (folder / SOURCE_NAME).write_text(code)
    (folder / KEEP_DIR).mkdir()
    if overlapped:
        script = parallel_script(_steps(folder), module_id("0123456789abcdef01234567", SOURCE_NAME), KEEP_DIR)
        argv = ["sh", "-c", script]
    else:
        argv = nvcc_command("nvcc", "sm_90a")
    return subprocess.run(argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


def test_the_installed_nvcc_gets_the_overlapped_tail_unless_device_code_is_relocatable(tmp_path: Path) -> None:
    assert _steps(tmp_path).split is not None
    for flags in (("-rdc=true",), ("-ewp",)):
        steps = _steps(tmp_path, flags)
        assert steps.split is None, flags


def test_the_shared_object_holds_the_fatbinary_and_the_binary_digest_is_nvccs(tmp_path: Path) -> None:
    built = _build(tmp_path / "overlapped", SCALE, overlapped=True)
    serial = _build(tmp_path / "nvcc", SCALE, overlapped=False)
    assert built.returncode == 0 and serial.returncode == 0, built.stdout + serial.stdout
    keep = tmp_path / "overlapped" / KEEP_DIR
    sections = {
        name: content for name, _, _, content in elf_sections((tmp_path / "overlapped" / OUTPUT_NAME).read_bytes())
    }
    assert sections[".nv_fatbin"] == (keep / "kernel.fatbin").read_bytes()  # the fatbinary alone: no device link's
    assert (keep / "kernel.cubin").read_bytes() in sections[".nv_fatbin"]
    assert len(sections[".nvFatBinSegment"]) == 24  # one __fatBinC_Wrapper_t, registered at load
    assert not (keep / "kernel_dlink.o").exists()
    assert parse_resources(built.stdout) == parse_resources(serial.stdout)
    digests = [
        binary_digest(folder / KEEP_DIR, "kernel", (), ()) for folder in (tmp_path / "overlapped", tmp_path / "nvcc")
    ]
    assert digests[0] == digests[1]


@pytest.mark.parametrize(
    "code", [BROKEN, CICC_ERROR, PTXAS_ERROR, HOST_COMPILE_ERROR], ids=["cudafe", "cicc", "ptxas", "host-compile"]
)
def test_a_failing_step_reads_as_in_serial_nvcc(tmp_path: Path, code: str) -> None:
    results = {}
    for overlapped in (True, False):
        config = CompilerConfig(arch="sm_90a", cache_dir=tmp_path / str(overlapped), parallel_steps=overlapped)
        compiler = Compiler(config)
        results[overlapped] = compiler.compile(KernelSource(code))
        if overlapped:
            [steps] = compiler._listings.values()
            if steps is None or steps.split is None:
                pytest.skip("this nvcc's listing does not allow the overlapped tail")
    fast, slow = results[True], results[False]
    assert not fast.ok and not slow.ok
    assert fast.diagnostics == slow.diagnostics and any(d.severity == "error" for d in fast.diagnostics)
    assert fast.resources == slow.resources
    assert _timeless(fast.log) == _timeless(slow.log)  # nvcc's output, in nvcc's order


def test_relocatable_device_code_builds_with_nvccs_tail(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    result = compiler.compile(KernelSource(SCALE, flags=("-rdc=true",)))
    assert result.ok, result.log
    [steps] = compiler._listings.values()
    assert steps is None or steps.split is None
