"""`optiml bench`: whole suites with KernelBench's metrics (correctness, fast_p, geomean speedups)."""

from optiml.bench.metrics import FAST_P, BenchRow, suite_metrics
from optiml.bench.runner import BenchConfig, run_bench
from optiml.bench.suite import discover_suite

__all__ = ["FAST_P", "BenchConfig", "BenchRow", "discover_suite", "run_bench", "suite_metrics"]
