"""What the user is shown after a generation."""

from __future__ import annotations

import io

from rich.console import Console

from optiml.cli.views.generation import attempt_trail, render_generation
from optiml.generate.outcome import Attempt, GenerationOutcome, ThoughtRecord
from optiml.kernel.source import KernelSource
from optiml.values import EvalResult, EvalStatus, TimingStats


def test_the_table_shows_every_thoughts_path_and_verdict() -> None:
    kernel = KernelSource("// k")
    ok = EvalResult(EvalStatus.OK, timing=TimingStats.from_samples([1.0]))
    samples = ThoughtRecord(
        "direct",
        "s",
        (
            Attempt("direct", 0, 0, "compile_error", "compile_error: x"),
            Attempt("direct", 1, 0, "ok", "verified", kernel=kernel, result=ok),
            Attempt("direct", 0, 1, "wrong_answer", "wrong_answer: y"),
        ),
        3.0,
        chosen=True,
        verdict="chosen: the only thought with a verified kernel",
    )
    silent = ThoughtRecord("fusion_first", "s", (), 0.0, verdict="no attempt")
    assert attempt_trail(samples) == "compile_error → wrong_answer; ok"
    assert attempt_trail(silent) == "—"

    outcome = GenerationOutcome(
        "gen-1", "root", "silu", (samples, silent), "direct", kernel, ok, "direct: chosen", 3.2, 0.0123,
        ("aggregation skipped: it needs two verified candidates, there was one",),
    )  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render_generation(outcome))
    text = out.getvalue()
    assert "generation gen-1 (root, task silu)" in text
    assert "chosen: the only thought with a verified kernel" in text and "no attempt" in text
    assert "aggregation skipped" in text and "root: direct: chosen" in text
    assert "3 candidates, 3.2 s, LLM cost $0.0123" in text


def test_a_failed_generation_says_so() -> None:
    outcome = GenerationOutcome("gen-2", "adapt", "silu", (), None, None, None, "no candidate passed (x)", 1.0, 0.0)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render_generation(outcome))
    assert "no verified kernel: no candidate passed (x)" in out.getvalue()
