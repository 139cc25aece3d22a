"""`optiml bench`'s closing summary fits the terminal: whole task names, whole failure reasons, and the
numeric columns that fit (speedups first), the rest in bench.md."""

from __future__ import annotations

from rich.console import Console

from optiml.bench.metrics import BenchRow, suite_metrics
from optiml.cli.views.bench import bench_summary

BASELINES = {"eager": 0.2130, "compile": 0.1977}
REASON = "TemplateError: no template for aten.sort.default (configure an LLM)"
ROWS = [
    BenchRow("cross_entropy_vocab", "x.py", "verified", best_ms=0.1999, baselines_ms=BASELINES, floor_ms=0.064),
    BenchRow("layernorm_affine", "y.py", "failed", reason=REASON),
]


def shown(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(bench_summary(ROWS, suite_metrics(ROWS), console.width))
    return console.export_text()


def test_a_narrow_terminal_keeps_names_reasons_and_the_speedups() -> None:
    text = shown(80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "cross_entropy_vocab" in text and "layernorm_affine" in text
    assert f"layernorm_affine: failed: {REASON}" in " ".join(text.split())  # whole, after the table
    assert "1.07×" in text and "× eager" in text  # 0.2130 / 0.1999
    assert "eager TF32" not in text  # dropped for width; bench.md has it


def test_a_wide_terminal_shows_every_column_and_the_metrics() -> None:
    text = shown(200)
    for header in ("best ms", "eager ms", "compile ms", "× compile", "roofline", "× eager TF32", "evals"):
        assert header in text
    assert "32%" in text  # roofline: 0.064 / 0.1999
    assert "correctness" in text and "0.500" in text
