"""The scripts under ``benchmarks/`` as modules, for tests of their pure parts (no GPU)."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` imported (it imports its neighbours, such as ``result_file``, by name)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def run_benchmark_script(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/NAME.py ARGS`` as a user runs it (``PYTHONPATH=src``), its output captured."""
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent / "src")}
    command = [sys.executable, str(BENCHMARKS / f"{name}.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def assert_ptx_assembles(ptx: Path, tmp_path: Path, *, no_warnings: bool = False) -> None:
    """``ptxas`` accepts a probe's PTX for sm_90 where it is installed (nvcc --ptx does not check inline PTX)."""
    if shutil.which("ptxas") is None:
        return
    assembled = subprocess.run(
        ["ptxas", "-arch=sm_90", str(ptx), "-o", str(tmp_path / "probe.cubin")], capture_output=True, text=True
    )
    assert assembled.returncode == 0, assembled.stderr[-3000:]
    if no_warnings:
        assert "warning" not in assembled.stderr.lower(), assembled.stderr[-3000:]


def assert_exits_2_without_a_gpu(name: str) -> None:
    """``benchmarks/NAME.py --quick`` on a machine without a GPU: exit status 2, one line naming the script."""
    run = run_benchmark_script(name, "--quick")
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    assert lines[0].startswith(f"{name}:") and "GPU" in lines[0]


def dumped_source(name: str, probe: ModuleType, tmp_path: Path) -> str:
    """``benchmarks/NAME.py --dump-source``'s CUDA half (checked equal to the module's, its C++ wrapper beside it,
    and free of torch's headers), as text."""
    target = tmp_path / "out" / "probe.cu"
    run = run_benchmark_script(name, "--dump-source", str(target))
    assert run.returncode == 0, run.stderr
    assert target.read_text() == probe.kernel_source()
    assert target.with_suffix(".cpp").read_text() == probe.TORCH_WRAPPER
    assert "#include <torch" not in target.read_text()  # nvcc builds it without torch's headers
    return target.read_text()
