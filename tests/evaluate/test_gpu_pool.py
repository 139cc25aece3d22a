"""A GPU pool on CPU: two stub judges with different reference times stand in for two GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_wire import StubCompiler, stub_launcher

from optiml.evaluate.client import WorkerClient
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.gpu_pool import GPUPool
from optiml.kernel.source import KernelSource
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pool() -> GPUPool:
    task = load_task(ROOT / "tasks" / "silu.py")
    compiler = StubCompiler()
    members = [
        Evaluator(
            task,
            EvalConfig(screen=False),
            compiler=compiler,
            worker=WorkerClient(launch=stub_launcher("normal", eager)),
            peak_flops=0.0,
        )  # type: ignore[arg-type]
        for eager in (2.0, 2.5)
    ]
    gpus = GPUPool(members, ["GPU 4", "GPU 5"])
    yield gpus
    gpus.close()


def test_evaluations_use_every_gpu_and_report_in_the_primarys_units(pool: GPUPool) -> None:
    assert pool.prepare().round_trip_ms == 0.25
    kernels = [KernelSource(f"// slow_{i}\n__global__ void k{i}() {{}}\n") for i in range(4)]
    results = pool.evaluate_many(kernels)
    assert all(r.ok for r in results) and pool.evaluations[0] >= 1 and pool.evaluations[1] >= 1
    for result in results:
        assert result.reference["eager"].median_ms == 2.0  # the primary's references, whoever timed it
        moved = [w for w in result.warnings if w.startswith("timed on GPU 5")]
        if moved:  # the stub times every candidate at 1.0 ms; GPU 5's eager is 2.5 ms, the primary's 2.0 ms
            assert result.timing.median_ms == pytest.approx(0.8) and "scaled by 0.8000" in moved[0]
            assert result.floor_ms == pytest.approx(0.008)
        else:
            assert result.timing.median_ms == pytest.approx(1.0)
    assert pool.scale(1) == pytest.approx(0.8) and pool.reference is pool.primary.reference
    assert all("judged by a stub" in r.warnings for r in results)  # the judges' verdicts came through


def test_a_pool_needs_a_member() -> None:
    with pytest.raises(ValueError, match="at least one"):
        GPUPool([])
