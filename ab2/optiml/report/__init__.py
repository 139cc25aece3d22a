"""The HTML trajectory report: one self-contained page per stored run or bench result.

:func:`load_run_report` reads a run from the run store (its task, tree, best path with diffs,
gains and profiler evidence, curves, failures, LLM spend) and :func:`render_run_html` lays it
out; :func:`load_bench_report` and :func:`render_bench_html` do the same for a `bench.json`. Each
page has everything inlined (style, script, the Plotly bundle), so it opens from disk offline.
"""

from optiml.report.bench_data import BenchReport, bench_file, load_bench_report
from optiml.report.html import render_bench_html, render_run_html
from optiml.report.run_data import RunReport, load_run_report

__all__ = [
    "BenchReport",
    "RunReport",
    "bench_file",
    "load_bench_report",
    "load_run_report",
    "render_bench_html",
    "render_run_html",
]
