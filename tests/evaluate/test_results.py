"""Timing statistics, speedup bands and the JSON round trip of results."""

from __future__ import annotations

from optiml.values import (
    CompileDiagnostic,
    CompileResult,
    EvalResult,
    EvalStatus,
    KernelResources,
    Speedup,
    TimingStats,
    TrialCheck,
    VerifyReport,
)


def test_quantiles_and_spread() -> None:
    stats = TimingStats.from_samples([4.0, 1.0, 3.0, 2.0, 5.0], wall_ms=[5.0, 6.0, 7.0])
    assert (stats.median_ms, stats.q1_ms, stats.q3_ms, stats.min_ms, stats.max_ms) == (
        3.0,
        2.0,
        4.0,
        1.0,
        5.0,
    )
    assert stats.spread_ms == 1.0 and stats.trials == 5 and stats.wall_median_ms == 6.0


def test_speedup_is_significant_only_outside_the_noise() -> None:
    ref = TimingStats.from_samples([10.0, 10.2, 9.8, 10.1, 9.9])
    fast = TimingStats.from_samples([5.0, 5.1, 4.9, 5.05, 4.95])
    noisy = TimingStats.from_samples([9.0, 12.0, 8.0, 11.0, 9.5])
    assert Speedup.between(ref, fast).significant
    assert Speedup.between(ref, fast).value == 2.0
    assert not Speedup.between(ref, noisy).significant


def test_result_round_trips_through_json_dict() -> None:
    result = EvalResult(
        status=EvalStatus.WRONG_ANSWER,
        message="wrong",
        kernel_digest="abc",
        compile=CompileResult(
            ok=True,
            so_path="/x.so",
            digest="abc",
            arch="sm_90a",
            seconds=0.4,
            cached=False,
            diagnostics=(CompileDiagnostic("warning", "w", 3),),
            resources=(KernelResources(name="k", arch="sm_90a", registers=32),),
        ),
        verify=VerifyReport(passed=False, trials=(TrialCheck(1, 0, "native", False, 1.0, 2.0, 3, 4, 0, "m"),)),
        timing=TimingStats.from_samples([1.0, 2.0]),
        reference={"eager": TimingStats.from_samples([3.0])},
        warnings=["w"],
        phase_seconds={"compile": 0.4},
    )
    again = EvalResult.from_dict(result.to_dict())
    assert again == result
    assert again.speedup("eager") is not None
    assert "wrong_answer" in again.feedback()


def test_feedback_for_compile_error_carries_the_compiler_text() -> None:
    compiled = CompileResult(
        ok=False,
        so_path=None,
        digest="d",
        arch="sm_90a",
        seconds=0.1,
        cached=False,
        diagnostics=(CompileDiagnostic("error", 'identifier "q" is undefined', 7),),
    )
    result = EvalResult(status=EvalStatus.COMPILE_ERROR, compile=compiled)
    assert 'line 7: identifier "q" is undefined' in result.feedback()
