"""benchmarks/compile_clock_suspects.py: where no GPU is, each task is a row naming both failures, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark_scripts import benchmark_module

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_gpu_a_task_is_a_row_with_the_judge_s_and_the_child_s_reasons() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script measures instead")
    module = benchmark_module("compile_clock_suspects")
    row = module.measure(str(ROOT / "tasks" / "silu.py"), trials=2, processes=2)
    assert row["task"] == "silu"
    assert "judge" not in row and row["judge_error"]  # the judge needs a GPU
    assert "user" not in row and row["user_error"]  # so does the child's torch.compile on CUDA
    assert "user_again_error" not in row  # the first process's failure ends the row: no second try
    assert set(module.SETTINGS) == {"plain", "judge_flush", "side_stream", "two_inputs", "cpu_load", "warm"}
