"""Where the roofline's peaks come from: configured, cached per GPU, measured, or datasheet (labelled)."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest
from profile_data import plain_launch

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.peaks.probe import FMA_PROBE_SOURCE
from optiml.profile.profiler import ProfileConfig, Profiler
from optiml.profile.roofline import Peaks, save_cached
from optiml.task import Task, load_task
from optiml.values import CompileResult

ROOT = Path(__file__).resolve().parents[2]


class NoCompiler:
    """The FMA probe cannot be built: the measurement falls back to SGEMM for FP32."""

    nvcc = None

    def compile(self, kernel: KernelSource) -> CompileResult:
        return CompileResult(False, None, kernel.digest, "sm_90", 0.0, False)


@pytest.fixture
def task() -> Task:
    return load_task(ROOT / "tasks" / "matmul.py")


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str | None) -> None:
    folder = tmp_path / "smi"
    folder.mkdir()
    if name is not None:
        smi = folder / "nvidia-smi"
        smi.write_text(f"#!{sys.executable}\nprint({name!r})\n", encoding="utf-8")
        smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{Path(sys.executable).parent}")


def make(task: Task, tmp_path: Path, **config: object) -> Profiler:
    settings = ProfileConfig(roofline_cache_dir=tmp_path / "roofline", **config)  # type: ignore[arg-type]
    return Profiler(task, NoCompiler(), settings, launch=plain_launch)  # type: ignore[arg-type]


def test_configured_peaks_win(task: Task, tmp_path: Path) -> None:
    peaks = Peaks("lab GPU", 1e12, 1e13)
    assert make(task, tmp_path, peaks=peaks).peaks() is peaks


def test_no_gpu_assumes_the_h200_datasheet(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, None)
    peaks = make(task, tmp_path).peaks()
    assert peaks.dram_bandwidth == 4.8e12
    assert "no GPU visible" in peaks.source and peaks.source.startswith("datasheet")


def test_cached_measurement_is_used(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "NVIDIA H100 80GB HBM3")
    measured = Peaks("NVIDIA H100 80GB HBM3", 3.0e12, 55e12, 700e12, 700e12, 50e12, source="measured 2026-11-30")
    save_cached(tmp_path / "roofline", measured)
    assert make(task, tmp_path).peaks() == measured


def test_datasheet_when_measurement_is_off(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "NVIDIA H100 80GB HBM3")
    peaks = make(task, tmp_path, measure_peaks=False).peaks()
    assert peaks.gpu == "NVIDIA H100 80GB HBM3"
    assert peaks.dram_bandwidth == 3.35e12
    assert "measurement disabled" in peaks.source


def test_failed_measurement_falls_back_and_says_why(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the measurement would succeed")
    fake_smi(tmp_path, monkeypatch, "NVIDIA A100-SXM4-80GB")
    profiler = make(task, tmp_path)
    peaks = profiler.peaks()
    assert peaks.fp32_flops == 19.5e12
    assert "peak measurement failed" in peaks.source and "no CUDA device" in peaks.source
    assert not (tmp_path / "roofline").exists()  # a failure is not cached
    roofline = profiler.roofline()
    assert roofline.flops == 2 * 2048**3 and roofline.regime == "compute"


@pytest.mark.nvcc
def test_fma_probe_builds_and_exports_its_entry_point(tmp_path: Path) -> None:
    built = Compiler(CompilerConfig(cache_dir=tmp_path)).compile(KernelSource(code=FMA_PROBE_SOURCE))
    assert built.ok, built.error_summary()
    assert built.so_path is not None
    assert hasattr(ctypes.CDLL(built.so_path), "optiml_fma_peak")
    (loop,) = [r for r in built.resources if "optiml_fma_loop" in r.name]
    assert not loop.spills
