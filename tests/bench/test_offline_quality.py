"""benchmarks/offline_quality.py's summary: the judge's ratios and, beside them, the user's clock (issue 38)."""

from __future__ import annotations

import pytest

from benchmark_scripts import benchmark_module


def _row(task: str, eager: float, user: float | None, agreement: float | None) -> dict:
    row = {"task": task, "status": "verified", "speedup_vs_eager": eager, "roofline_fraction": 0.5}
    row.update(speedup_vs_compile=eager / 2, speedup_vs_reference={"eager": eager})
    row.update(user_speedup_vs_eager=user, user_speedup_vs_compile=None if user is None else user / 2)
    row.update(user_speedup_vs_fastest=user, agreement=agreement)
    return row


def test_the_summary_carries_both_clocks_and_their_agreement() -> None:
    rows = [_row("a", 2.0, 1.0, 1.05), _row("b", 0.5, 4.0, 0.9), {"task": "c", "status": "failed"}]
    summary = benchmark_module("offline_quality").summarize(rows)
    assert summary["verified"] == 2 and summary["not_verified"] == ["c"]
    assert summary["geomean_vs_eager"] == pytest.approx(1.0) and summary["user_geomean_vs_eager"] == pytest.approx(2.0)
    assert summary["user_geomean_vs_compile"] == pytest.approx(1.0)
    assert summary["median_agreement"] == pytest.approx(0.975) and summary["max_agreement_error"] == pytest.approx(0.1)
    assert "user_geomean_vs_eager_tf32" not in summary  # no row measured it


def test_rows_without_the_user_s_clock_leave_its_figures_out() -> None:
    summary = benchmark_module("offline_quality").summarize([_row("a", 2.0, None, None)])
    assert summary["geomean_vs_eager"] == pytest.approx(2.0)
    assert not [key for key in summary if key.startswith("user_") or "agreement" in key]
