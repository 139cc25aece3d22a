"""The physics floor's compute roof (threat class 6): which peak bounds a task, never below the datasheet."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.evaluate.evaluator import TaskFacts
from optiml.evaluate.roofs import compute_roof, roof_rate
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.profile.roofline import TFLOP, datasheet_peaks
from optiml.task import TaskMeta, load_task

MATMUL = Path(__file__).resolve().parents[1] / "adversarial" / "tasks" / "matmul.py"


def test_the_roof_follows_dtype_and_tolerance() -> None:
    rates = {"fp32": 67e12, "fp16_tensor": 989e12, "bf16_tensor": 989e12, "fp64": 67e12}
    args = tuple(rates.values())
    # tight fp32: TF32 alone is screened out, but split products on tensor cores beat the FMA rate honestly
    assert roof_rate(TaskMeta(dtype="float32"), *args) == 989e12 / 4
    assert roof_rate(TaskMeta(dtype="float32"), 67e12, 0.0, 0.0, 0.0) == 67e12  # no tensor cores: the FMA rate
    assert roof_rate(TaskMeta(dtype="float32", atol=1e-2, rtol=1e-2), *args) == 989e12 / 2  # TF32 allowed
    assert roof_rate(TaskMeta(dtype="float16", atol=1e-2, rtol=1e-2), *args) == 989e12
    assert roof_rate(TaskMeta(dtype="float64", atol=1e-7, rtol=1e-7), *args) == 67e12


def test_the_floor_takes_the_slower_of_bytes_and_flops() -> None:
    facts = TaskFacts(
        input_bytes=2 * 2048 * 2048 * 4,
        output_bytes=2048 * 2048 * 4,
        flops=2 * 2048.0**3,
        bandwidth=4.3e12,
        prepare_seconds=1.0,
        peak_flops=67e12,
    )
    assert facts.floor_ms == pytest.approx(2 * 2048.0**3 / 67e12 * 1e3)  # 0.256 ms: compute-bound
    blind = TaskFacts(facts.input_bytes, facts.output_bytes, facts.flops, facts.bandwidth, 1.0)
    assert blind.floor_ms == pytest.approx(3 * 2048 * 2048 * 4 / 4.3e12 * 1e3)  # 0.012 ms: what a fake hid under


def test_the_roof_is_never_below_the_datasheet(tmp_path: Path) -> None:
    """Without a GPU (CI) the target machine's datasheet; with one, the measured peak where it is higher."""
    roof = compute_roof(load_task(MATMUL), Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path)))
    sheet = datasheet_peaks("NVIDIA H200")
    assert sheet is not None and roof.flops_per_s >= sheet.fp32_flops == 67 * TFLOP
    assert "TFLOP/s for float32" in roof.source and ("datasheet" in roof.source or "measured" in roof.source)
