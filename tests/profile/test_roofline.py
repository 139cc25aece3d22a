"""Roofline arithmetic, datasheet fallback, the per-GPU cache, and task bytes from shapes alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.profile.roofline import (
    Peaks,
    Roofline,
    cache_path,
    datasheet_peaks,
    load_cached,
    problem_bytes,
    save_cached,
)
from optiml.task import load_task

H200 = datasheet_peaks("NVIDIA H200")
N = 2048


def test_datasheet_lookup_by_name() -> None:
    assert H200 is not None and H200.dram_bandwidth == 4.8e12 and H200.fp32_flops == 67e12
    assert H200.source.startswith("datasheet")
    sxm = datasheet_peaks("NVIDIA H100 80GB HBM3")
    pcie = datasheet_peaks("NVIDIA H100 PCIe")
    assert sxm is not None and pcie is not None and sxm.dram_bandwidth > pcie.dram_bandwidth
    a100 = datasheet_peaks("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.dram_bandwidth == pytest.approx(2.039e12)
    assert a100.gpu == "NVIDIA A100-SXM4-80GB"
    assert datasheet_peaks("NVIDIA GeForce RTX 4090") is None


def test_compute_roof_follows_the_dtype() -> None:
    assert H200 is not None
    # fp32 accuracy: the faster of the FMA rate and 3xTF32 on tensor cores (a sixth of the half rate)
    assert H200.compute_peak("float32") == H200.fp16_tensor_flops / 6 > H200.fp32_flops
    assert H200.compute_peak("bfloat16") == H200.bf16_tensor_flops
    assert H200.compute_peak("float16") == H200.fp16_tensor_flops
    assert H200.compute_peak("float64") == H200.fp64_flops


def test_matmul_is_compute_bound_and_the_naive_kernel_far_below_the_roof() -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=2.0 * N**3, min_bytes=3 * N * N * 4)
    assert roofline.intensity == pytest.approx(2 * N / 12)
    roof = 989e12 / 6  # fp32 accuracy at 3xTF32 on tensor cores, above the 67 TFLOP/s FMA rate
    assert roofline.ridge == pytest.approx(roof / 4.8e12)
    assert roofline.regime == "compute"
    assert roofline.floor_ms == pytest.approx(2 * N**3 / roof * 1e3)
    naive_ms = 3.129312  # the recorded matmul_naive
    assert roofline.fraction(naive_ms) == pytest.approx(0.033, abs=0.001)


def test_copy_like_task_is_memory_bound() -> None:
    assert H200 is not None
    roofline = Roofline(H200, "float32", flops=0.0, min_bytes=2 * 8192 * 8192 * 4)
    assert roofline.regime == "memory"
    assert roofline.compute_floor_ms is None
    assert roofline.floor_ms == pytest.approx(2 * 8192 * 8192 * 4 / 4.8e12 * 1e3)
    assert roofline.fraction(None) is None
    unknown = Roofline(H200, "float32", flops=None, min_bytes=None)
    assert unknown.floor_ms is None and unknown.regime is None and unknown.intensity is None


def test_cache_round_trip(tmp_path: Path) -> None:
    peaks = Peaks("NVIDIA H200", 4.1e12, 60e12, 700e12, 710e12, 50e12, source="measured 2026-11-30")
    path = save_cached(tmp_path, peaks)
    assert path == cache_path(tmp_path, "NVIDIA H200") == tmp_path / "NVIDIA_H200.json"
    assert load_cached(tmp_path, "NVIDIA H200") == peaks
    assert load_cached(tmp_path, "NVIDIA H100") is None
    path.write_text("{not json", encoding="utf-8")
    assert load_cached(tmp_path, "NVIDIA H200") is None


def test_problem_bytes_from_shapes_alone(tmp_path: Path) -> None:
    task_file = tmp_path / "scale.py"
    task_file.write_text(
        "import torch\nimport torch.nn as nn\nM = 1000\nN = 300\n"
        "class Model(nn.Module):\n    def forward(self, x, y):\n        return x @ y, x.sum(1)\n"
        "def get_inputs():\n    return [torch.randn(M, N), torch.randn(N, 7)]\n"
        "def get_init_inputs():\n    return []\n",
        encoding="utf-8",
    )
    task = load_task(task_file)
    assert problem_bytes(task) == (1000 * 300 + 300 * 7 + 1000 * 7 + 1000) * 4


def test_problem_bytes_is_none_when_the_model_cannot_run_on_meta(tmp_path: Path) -> None:
    task_file = tmp_path / "host.py"
    task_file.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.tensor(x.tolist())\n"
        "def get_inputs():\n    return [torch.randn(4)]\n"
        "def get_init_inputs():\n    return []\n",
        encoding="utf-8",
    )
    assert problem_bytes(load_task(task_file)) is None
