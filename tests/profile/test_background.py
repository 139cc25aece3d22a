"""Advisory profiling: submissions return at once, batches share a launch, the GPU lock is respected."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from profile_data import SRC

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.profile.background import DiagnosisQueue
from optiml.profile.ncu import find_ncu
from optiml.profile.profiler import ProfileConfig, Profiler
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus, TimingStats

pytestmark = pytest.mark.nvcc

ROOT = SRC.parent
TIMED = EvalResult(status=EvalStatus.OK, timing=TimingStats(1.0, 0.9, 1.1, 0.8, 1.2, 10))


@pytest.fixture
def profiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Profiler:
    monkeypatch.setenv("PATH", f"{tmp_path / 'no-ncu'}:/usr/bin:/bin:/usr/local/bin")  # nvcc stays, ncu goes
    monkeypatch.delenv("CUDA_HOME", raising=False)
    if find_ncu() is not None:
        pytest.skip("ncu is installed here: this test wants the static fallback")
    task = load_task(ROOT / "tasks" / "silu.py")
    assert task.naive_kernel_path is not None
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "kernels"))
    compiler.compile(KernelSource.from_file(task.naive_kernel_path))  # warm the cache: the test times the queue
    config = ProfileConfig(roofline_cache_dir=tmp_path / "roofline", measure_peaks=False, light_target=False)
    return Profiler(task, compiler, config)


def _naive(profiler: Profiler) -> KernelSource:
    assert profiler.task.naive_kernel_path is not None
    return KernelSource.from_file(profiler.task.naive_kernel_path)


def test_submissions_return_at_once_and_every_one_gets_a_diagnosis(profiler: Profiler) -> None:
    queue = DiagnosisQueue(profiler, batch=2, max_wait_s=0.2)
    start = time.perf_counter()
    futures = [queue.submit(_naive(profiler), TIMED) for _ in range(3)]
    assert time.perf_counter() - start < 0.1
    diagnoses = [f.result(timeout=600) for f in futures]
    assert all(any("ncu (Nsight Compute) not found" in m for m in d.missing_evidence) for d in diagnoses)
    assert all(d.static is not None and d.static.kernels[0].resources for d in diagnoses)
    queue.close()


def test_a_held_gpu_lock_delays_profiling_until_released(profiler: Profiler) -> None:
    lock = threading.Lock()
    queue = DiagnosisQueue(profiler, batch=1, max_wait_s=0.0, gpu_lock=lock)
    with lock:  # an evaluation is timing
        future = queue.submit(_naive(profiler), TIMED)
        time.sleep(0.5)
        assert not future.done()
    diagnosis = future.result(timeout=180)
    assert diagnosis.static is not None
    queue.close()


def test_closing_without_waiting_cancels_what_has_not_started(profiler: Profiler) -> None:
    queue = DiagnosisQueue(profiler, batch=5, max_wait_s=60.0)
    future = queue.submit(_naive(profiler), TIMED)
    queue.close(wait=False)
    assert future.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        queue.submit(_naive(profiler), TIMED)
