"""The program ncu profiles: lean imports, clean failure without a GPU, and (on a GPU) the real thing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from profile_data import SRC

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.profile.ncu import find_ncu
from optiml.profile.profiler import ProfileConfig, Profiler
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus

ROOT = SRC.parent
WORKER_SIDE = {
    "optiml",
    "optiml.errors",
    "optiml.task",
    "optiml.task_runtime",
    "optiml.conv_arithmetic",  # which arithmetic the defaults give each convolution: standard library and torch only
    "optiml.profile",
    "optiml.profile.target",
    "optiml.kernel",
    "optiml.values",
    "optiml.evaluate",
    # the candidate processes' own sandbox and the redaction of their text (issue 39): standard library only
    "optiml.redact",
    "optiml.integrity",
    "optiml.integrity.sandbox",
    "optiml.integrity.candidate_sandbox",
    "optiml.integrity.policy",  # OPTIML_ISOLATION, read with the evaluation settings
    "optiml.integrity.files",
}


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC)}


def test_target_imports_only_worker_side_modules() -> None:
    out = run_python(
        "import json, sys, optiml.profile.target\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('optiml') or m in "
        "('rich', 'openai', 'anthropic', 'jinja2', 'typer', 'httpx'))))"
    )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert {m for m in loaded - WORKER_SIDE if not m.startswith("optiml.evaluate.")} == set()  # the worker's own


def test_peaks_probe_imports_no_torch_until_it_measures() -> None:
    out = run_python("import sys, optiml.peaks.probe; print('torch' in sys.modules)")
    assert out.stdout.strip() == "False"


def test_target_without_a_gpu_fails_in_one_line(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "optiml.profile.target",
            "--task",
            str(ROOT / "tasks" / "silu.py"),
            "--so",
            "x.so",
            "--report",
            str(tmp_path / "events.jsonl"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "profile target: no CUDA device is visible"


def test_peaks_probe_without_a_gpu_fails_in_one_line(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    proc = subprocess.run(
        [sys.executable, "-m", "optiml.peaks.probe", "--out", str(tmp_path / "p.json")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "peaks probe failed: RuntimeError: no CUDA device is visible"


@pytest.mark.gpu
@pytest.mark.nvcc
def test_real_ncu_diagnoses_the_naive_transpose(tmp_path: Path) -> None:
    """On the GPU machine: one real ncu run over the naive transpose and the reference."""
    if find_ncu() is None:
        pytest.skip("ncu is not installed")
    task = load_task(ROOT / "tasks" / "transpose.py")
    naive = task.naive_kernel_path
    assert naive is not None
    kernel = KernelSource.from_file(naive)
    profiler = Profiler(
        task,
        Compiler(CompilerConfig(cache_dir=tmp_path / "kernels")),
        ProfileConfig(roofline_cache_dir=tmp_path / "roofline", measure_peaks=False),
    )
    candidate, reference = profiler.profile(kernel, reference=True)
    assert candidate.ok, candidate.errors
    assert reference.ok, reference.errors
    assert candidate.kernels[0].short_name == "transpose_kernel"
    time_ms = candidate.totals.duration_ms
    diagnosis = profiler.diagnose(kernel, EvalResult(status=EvalStatus.OK))
    assert diagnosis.bottlenecks[0].name == "uncoalesced_stores", diagnosis.render()
    assert time_ms is not None and time_ms > 0


@pytest.mark.gpu
@pytest.mark.nvcc
def test_real_ncu_profiles_candidates_in_the_light_target(tmp_path: Path) -> None:
    """On the GPU machine: candidates alone go to the torch-free target; a failing one is told apart."""
    if find_ncu() is None:
        pytest.skip("ncu is not installed")
    task = load_task(ROOT / "tasks" / "transpose.py")
    naive = task.naive_kernel_path
    assert naive is not None
    kernel = KernelSource.from_file(naive)
    failing = kernel.with_code(kernel.code.replace("if (rows == 0 || cols == 0) return 0;", "return 7;"))
    assert failing.code != kernel.code
    profiler = Profiler(
        task,
        Compiler(CompilerConfig(cache_dir=tmp_path / "kernels")),
        ProfileConfig(roofline_cache_dir=tmp_path / "roofline", measure_peaks=False),
    )
    first, broken, again = profiler.profile([kernel, failing, kernel.with_code(kernel.code + "\n// copy\n")])
    assert isinstance(profiler.light_case(), Path), profiler.light_case()
    assert first.ok and again.ok, (first.errors, again.errors)
    assert not any("torch target" in note for note in first.notes), first.notes
    assert [k.short_name for k in first.kernels] == ["transpose_kernel"]
    assert not broken.ok and "returned 7" in broken.errors[0]
    profiler.close()


@pytest.mark.gpu
@pytest.mark.nvcc
def test_real_ncu_with_the_evaluators_lock_waits_for_its_turn(tmp_path: Path) -> None:
    """On the GPU machine: with the evaluator's lock, the case dump and the light target start while the
    lock is held elsewhere (a timing), wait for it, and profile once it is free; the lock is free after."""
    if find_ncu() is None:
        pytest.skip("ncu is not installed")
    task = load_task(ROOT / "tasks" / "transpose.py")
    assert task.naive_kernel_path is not None
    kernel = KernelSource.from_file(task.naive_kernel_path)
    lock = threading.Lock()
    profiler = Profiler(
        task,
        Compiler(CompilerConfig(cache_dir=tmp_path / "kernels")),
        ProfileConfig(roofline_cache_dir=tmp_path / "roofline", measure_peaks=False),
        gpu_lock=lock,
    )
    lock.acquire()
    threading.Timer(3.0, lock.release).start()
    [profile] = profiler.profile(kernel)
    assert profile.ok, profile.errors
    assert not any("torch target" in note for note in profile.notes), profile.notes
    assert [k.short_name for k in profile.kernels] == ["transpose_kernel"]
    assert profiler.gpu_waited_s > 0 and profiler.gpu_held_s > 0
    assert not lock.locked()
    profiler.close()
