"""The `optiml profile` report: rich rendering and JSON, from a recorded transpose profile."""

from __future__ import annotations

import json

import pytest
from profile_data import single_profile
from rich.console import Console

from optiml.cli.views.profile import render_report
from optiml.profile.diagnosis import diagnose
from optiml.profile.ncu_csv import NcuRow
from optiml.profile.report import ProfileReport, report_to_json
from optiml.profile.roofline import Roofline, datasheet_peaks
from optiml.profile.static import StaticAnalysis
from optiml.values import EvalResult, EvalStatus, TimingStats


@pytest.fixture
def report(raw_rows: dict[str, NcuRow], probe_static: StaticAnalysis) -> ProfileReport:
    peaks = datasheet_peaks("NVIDIA H200")
    assert peaks is not None
    timing = TimingStats(median_ms=0.98, q1_ms=0.97, q3_ms=0.99, min_ms=0.96, max_ms=1.0, trials=20)
    reference = TimingStats(median_ms=0.30, q1_ms=0.29, q3_ms=0.31, min_ms=0.29, max_ms=0.32, trials=20)
    result = EvalResult(status=EvalStatus.OK, timing=timing, reference={"eager": reference})
    diagnosis = diagnose(
        profile=single_profile(raw_rows["transpose_naive"]),
        static=probe_static,
        roofline=Roofline(peaks, "float32", flops=0.0, min_bytes=2 * 8192 * 8192 * 4),
        time_ms=result.time_ms,
    )
    return ProfileReport(task="transpose", kernel_digest="0123456789abcdef", evaluation=result, diagnosis=diagnosis)


def test_rich_report_shows_metrics_roofline_and_diagnosis(report: ProfileReport) -> None:
    console = Console(record=True, width=160, color_system=None)
    render_report(report, console)
    text = console.export_text()
    assert "transpose · kernel 0123456789ab · ok · 0.9800 ms · 0.31x vs eager" in text
    assert "Nsight Compute metrics" in text and "transpose_naive (100%)" in text
    assert "4 / 32" in text  # sectors/request, loads / stores
    assert "Roofline" in text and "memory-bound" in text
    assert "uncoalesced global stores" in text
    assert "Bound: memory at L2" in text


def test_json_report(report: ProfileReport) -> None:
    data = json.loads(report_to_json(report))
    assert data["status"] == "ok"
    assert data["speedup_vs_eager"] == pytest.approx(0.30 / 0.98)
    assert data["diagnosis"]["bound"] == "memory"
    assert data["diagnosis"]["bottlenecks"][0]["name"] == "uncoalesced_stores"
    assert data["diagnosis"]["profile"]["kernels"][0]["name"].startswith("transpose_naive")


def test_failed_candidate_report_says_what_is_missing(probe_static: StaticAnalysis) -> None:
    result = EvalResult(status=EvalStatus.WRONG_ANSWER, message="wrong answer (seed 1000): 12 of 64 elements off")
    diagnosis = diagnose(
        profile=None,
        static=probe_static,
        roofline=None,
        time_ms=None,
        missing=("hardware counters (candidate is wrong_answer: only verified kernels are profiled)",),
    )
    console = Console(record=True, width=160, color_system=None)
    render_report(ProfileReport("transpose", "ff", result, diagnosis), console)
    text = console.export_text()
    assert "wrong_answer" in text and "12 of 64 elements off" in text
    assert "Nsight Compute metrics" not in text
    assert "only verified kernels are profiled" in text
