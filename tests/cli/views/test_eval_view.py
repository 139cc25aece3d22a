"""`optiml eval`'s table says how the judge's clock read the time, and its JSON carries the same."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from optiml.cli.views.evaluation import eval_to_json, render_eval
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[3]
CLOCK = {"window_end": "device", "window_calls": 5, "round_trip_ms": 0.0421, "claimed_stream_ms": 0.1512}


def _result() -> EvalResult:
    timing = TimingStats(median_ms=0.1530, q1_ms=0.15, q3_ms=0.156, min_ms=0.149, max_ms=0.16, trials=20)
    return EvalResult(EvalStatus.OK, timing=timing, clock=dict(CLOCK))


def test_the_eval_table_says_where_windows_ended_and_what_was_subtracted() -> None:
    console = Console(width=200, record=True, color_system=None)
    render_eval(console, load_task(ROOT / "tasks" / "silu.py"), Path("k.cu"), _result())
    text = " ".join(console.export_text().split())
    assert "windows end on the device, 5 calls a window, 0.0421 ms round trip subtracted" in text
    assert "the candidate's own events read 0.1512 ms a call" in text


def test_the_clock_survives_the_wire_and_the_json() -> None:
    result = _result()
    assert EvalResult.from_dict(result.to_dict()).clock == CLOCK
    assert eval_to_json(load_task(ROOT / "tasks" / "silu.py"), Path("k.cu"), result)["clock"] == CLOCK
