"""The report's small parts: stored diagnosis text read back, source diffs, fast_p curves."""

from __future__ import annotations

from optiml.bench.metrics import BenchRow
from optiml.kernel.source import KernelSource
from optiml.profile.diagnosis import diagnose
from optiml.profile.roofline import Roofline, datasheet_peaks
from optiml.report.bench_data import fast_p_curve
from optiml.report.diff import source_diff
from optiml.report.evidence import parse_evidence
from optiml.store import ProfileRecord


def test_a_diagnosis_without_counters_reads_back_as_unknown_with_what_is_missing() -> None:
    peaks = datasheet_peaks("NVIDIA H200")
    assert peaks is not None
    diagnosis = diagnose(profile=None, static=None, roofline=Roofline(peaks, "float32", 1e6, 8 << 20), time_ms=0.5)
    evidence = parse_evidence(
        ProfileRecord("d", diagnosis.proxy_score, diagnosis.roofline_fraction, diagnosis.render())
    )
    assert evidence.bound == "unknown" and evidence.summary.startswith("unknown (no hardware counters")
    assert "vs floor" in evidence.roofline and "peaks: datasheet" in evidence.roofline
    assert any(m.startswith("hardware counters") for m in evidence.missing)
    assert evidence.roofline_fraction == diagnosis.roofline_fraction
    assert not evidence.metrics
    assert [f.text for f in evidence.findings] == [b.render().split("\n")[0] for b in diagnosis.bottlenecks[:5]]


def test_text_the_parser_does_not_know_is_kept() -> None:
    text = "Bound: compute at SM (91.0% of peak)\nBottlenecks: none found in the available evidence.\nsomething new"
    evidence = parse_evidence(ProfileRecord("d", 0.9, None, text))
    assert evidence.bound == "compute" and not evidence.findings
    assert evidence.other == ("Bottlenecks: none found in the available evidence.", "something new")


def test_a_diff_counts_blank_lines_and_flags() -> None:
    before = KernelSource(code="a\n\nb\nc\n", flags=("-O3",))
    after = KernelSource(code="a\nb\nc2\n", flags=("-O3", "--use_fast_math"))
    diff = source_diff(before, after)
    assert (diff.added, diff.removed) == (1, 2)
    assert [(line.kind, line.text) for line in diff.lines] == [
        ("hunk", "@@ -1,4 +1,3 @@"),
        ("ctx", "a"),
        ("del", ""),
        ("ctx", "b"),
        ("del", "c"),
        ("add", "c2"),
    ]
    assert diff.flags_changed and not diff.empty
    assert source_diff(before, before).empty


def row(task: str, best: float | None, eager: float) -> BenchRow:
    status = "verified" if best is not None else "failed"
    return BenchRow(task=task, file=f"{task}.py", status=status, best_ms=best, baselines_ms={"eager": eager})


def test_fast_p_is_a_step_function_over_all_tasks() -> None:
    rows = (row("a", 1.0, 2.0), row("b", 1.0, 1.5), row("c", 1.0, 1.5), row("d", None, 1.0))
    assert fast_p_curve(rows, "eager") == [(0.0, 0.75), (1.5, 0.75), (1.5, 0.25), (2.0, 0.25), (2.0, 0.0)]
    assert fast_p_curve(rows, "compile") == []
