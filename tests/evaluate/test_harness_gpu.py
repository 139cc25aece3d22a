"""End-to-end harness on a real GPU: starter kernels pass, broken kernels fail with the right status."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.harness import MIN_SAMPLE_MS
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import EvalStatus

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
STARTERS = sorted(p.name.removesuffix(".naive.cu") for p in (ROOT / "tasks").glob("*.naive.cu"))
FAST = EvalConfig(min_trials=5, max_trials=20, timing_seconds=0.3)

SILU_OK = (ROOT / "tasks" / "silu.naive.cu").read_text() if (ROOT / "tasks" / "silu.naive.cu").exists() else ""


@pytest.mark.parametrize("name", STARTERS)
def test_starter_naive_kernel_is_verified_and_timed(name: str) -> None:
    task = load_task(ROOT / "tasks" / f"{name}.py")
    with Evaluator(task, FAST) as evaluator:
        result = evaluator.evaluate(KernelSource.from_file(ROOT / "tasks" / f"{name}.naive.cu"))
    assert result.status is EvalStatus.OK, result.message
    assert result.verify is not None and result.verify.passed
    assert len(result.verify.trials) >= 3 + (task.num_shape_sets - 1)
    assert result.timing is not None and result.timing.median_ms > 0
    assert "eager" in result.reference


def _silu_variant(body: str) -> KernelSource:
    """The silu task with a custom optiml_forward body (kernels that misbehave on purpose)."""
    return KernelSource(
        '#include "optiml.h"\n#include <cstdlib>\n'
        "__global__ void spin(volatile float* out) { while (out[0] != 12345.0f) { } }\n"
        "__global__ void oob(float* y, long n) { y[n * 64 + threadIdx.x * 1000000] = 1.f; }\n"
        "OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no,"
        " void* ws, size_t wb, cudaStream_t s) {\n" + body + "\n}\n"
    )


def test_crash_hang_and_error_are_contained_and_worker_is_replaced() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    config = EvalConfig(min_trials=5, max_trials=10, timing_seconds=0.2, timeout_s=20, screen=False)
    with Evaluator(task, config) as evaluator:
        aborted = evaluator.evaluate(_silu_variant("abort(); return 0;"))
        assert aborted.status is EvalStatus.CRASH, aborted.message
        assert "SIGABRT" in aborted.message

        hung = evaluator.evaluate(_silu_variant("spin<<<1, 1, 0, s>>>((volatile float*)out[0].data); return 0;"))
        assert hung.status is EvalStatus.TIMEOUT, hung.message

        oob = evaluator.evaluate(
            _silu_variant("oob<<<64, 256, 0, s>>>((float*)out[0].data, optiml_numel(&out[0])); return 0;")
        )
        assert oob.status in (EvalStatus.RUNTIME_ERROR, EvalStatus.CRASH), oob.message

        failing = evaluator.evaluate(_silu_variant("return 7;"))
        assert failing.status is EvalStatus.RUNTIME_ERROR
        assert "returned 7" in failing.message

        unwritten = evaluator.evaluate(_silu_variant("return 0;"))
        assert unwritten.status is EvalStatus.WRONG_ANSWER
        assert "NaN" in unwritten.message

        # after all that, an honest kernel still evaluates — in the same judge: every fault above hit
        # only its candidate's own process (and CUDA context), never the judge's
        fine = evaluator.evaluate(KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu"))
        assert fine.status is EvalStatus.OK, fine.message
        assert evaluator.worker.starts == 1


def test_the_judge_reports_its_round_trip_and_every_eager_baseline() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    with Evaluator(task, FAST) as evaluator:
        facts = evaluator.prepare()
        result = evaluator.evaluate(KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu"))
    # pipe, device-wide sync and context switches, per call: ~0.3 ms on an idle H100 or H200, 2.4 ms read with
    # four test workers sharing one H100 (2026-12-05)
    assert 0 < facts.round_trip_ms < 10.0
    assert {"eager", "eager_tf32"} <= set(result.reference)
    assert result.timing is not None and result.timing.stop in ("tight", "time", "trials")
    assert result.timing.wall_median_ms > 0


def test_a_candidate_clearly_slower_than_the_incumbent_stops_timing_early() -> None:
    """The second candidate needs a binary of its own: an equal binary's verdict would be reused."""
    task = load_task(ROOT / "tasks" / "silu.py")
    naive = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    with Evaluator(task, EvalConfig(min_trials=5, max_trials=60, timing_seconds=5.0, timing_precision=1e-6)) as ev:
        first = ev.evaluate(naive)
        assert first.ok and first.timing is not None
        # An incumbent far below any call the judge can report, with no spread: even a series whose samples sit
        # on the clamp (harness.MIN_SAMPLE_MS, when other test workers made the calibration longer than the
        # windows) is clearly slower. A third of the first's median was not: on an H100 shared by four workers
        # (2026-12-05) the second series read identical clamped samples and stopped "tight".
        fastest = MIN_SAMPLE_MS / 10
        ev.incumbent = dataclasses.replace(first.timing, median_ms=fastest, q1_ms=fastest, q3_ms=fastest)
        second = ev.evaluate(KernelSource(naive.code + "\n__device__ int optiml_second_candidate = 2;\n"))
    assert second.ok and second.timing is not None
    assert second.timing.stop == "slower" and second.timing.trials <= first.timing.trials


def test_compile_error_is_a_result_with_the_compiler_message() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    with Evaluator(task, FAST) as evaluator:
        result = evaluator.evaluate(_silu_variant("return undefined_thing;"))
    assert result.status is EvalStatus.COMPILE_ERROR
    assert "undefined_thing" in result.feedback()


def test_retime_interleaves_and_returns_one_timing_per_kernel() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    naive = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    with Evaluator(task, FAST) as evaluator:
        timings = evaluator.retime([naive, naive.with_flags(("-DOPTIML_VARIANT=1",))], rounds=3)
    assert len(timings) == 2
    assert all(t.trials >= 9 for t in timings)
    first, second = timings
    ratio = first.median_ms / second.median_ms
    # the same kernel twice: equal within noise (their quartile ranges overlap where other test workers
    # share the GPU and widen them; one -n 8 run read a ratio outside 0.8-1.25, 2026-12-02)
    overlap = first.q1_ms <= second.q3_ms and second.q1_ms <= first.q3_ms
    assert 0.8 < ratio < 1.25 or overlap, (first, second)


def test_retime_times_references_in_the_same_rounds() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    naive = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    with Evaluator(task, FAST) as evaluator:
        evaluator.prepare()
        eager_at_start = evaluator.reference["eager"]
        retimed = evaluator.retime_interleaved([naive], rounds=3, references=("eager",), settle=2)
    (kernel,) = retimed.kernels
    eager = retimed.references["eager"]
    assert kernel.trials == len(retimed.samples[0]) >= 9
    assert len(retimed.window_calls) == 1 and retimed.window_calls[0] >= 1
    assert eager.trials == len(retimed.reference_samples["eager"]) >= 9
    # the same eager call as the prepare step timed, in another minute: the same time within noise
    assert 0.5 < eager.median_ms / eager_at_start.median_ms < 2.0, (eager, eager_at_start)
