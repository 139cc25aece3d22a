"""The closing summary of ``optiml bench`` in the terminal: the per-task table, then the suite metrics.

The Markdown file (bench.md) holds every column; the terminal gets the columns that fit its width,
most telling first (task, status, speedups, best time, roofline), so a task's name is never cut to
one letter and an ellipsis; each failure's reason follows the table on a line of its own.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from optiml.bench.metrics import BenchRow

#: (header, cell of a row), in the order columns are dropped last to first on a narrow console.
_COLUMNS = (
    ("× eager", lambda r: _ratio(r.speedup("eager"))),
    ("× compile", lambda r: _ratio(r.speedup("compile"))),
    ("best ms", lambda r: _ms(r.best_ms)),
    ("roofline", lambda r: f"{r.roofline_fraction:.0%}" if r.roofline_fraction is not None else ""),
    ("eager ms", lambda r: _ms(r.baselines_ms.get("eager"))),
    ("compile ms", lambda r: _ms(r.baselines_ms.get("compile"))),
    ("× eager TF32", lambda r: _ratio(r.speedup("eager_tf32"))),
    ("evals", lambda r: str(r.evaluations)),
)
_CELL = 11  # the width a numeric column takes, padding included


def bench_summary(rows: list[BenchRow], metrics: dict[str, Any], width: int) -> Group:
    """The table of ``rows`` with as many numeric columns as ``width`` holds, and the metrics."""
    task_width = max([len("task"), *(len(r.task) for r in rows)]) + 3
    room = max(0, width - task_width - 12)  # the status column: "verified", "no kernel", "failed"
    shown = _COLUMNS[: max(2, room // _CELL)]
    table = Table(show_edge=False)
    table.add_column("task", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for header, _ in shown:
        table.add_column(header, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(r.task, r.status, *(cell(r) for _, cell in shown))
    reasons = [Text(f"{r.task}: {r.status}: {r.reason}") for r in rows if not r.verified and r.reason]
    summary = Table(show_edge=False, show_header=False)
    summary.add_column("metric")
    summary.add_column("value", justify="right", overflow="fold")
    for key, value in metrics.items():
        if isinstance(value, float):
            text = f"{value:.3f}"
        elif isinstance(value, list):
            text = ", ".join(map(str, value)) or "none"
        else:
            text = str(value)
        summary.add_row(key, text)
    return Group(table, *reasons, summary)


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else ""


def _ratio(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else ""
