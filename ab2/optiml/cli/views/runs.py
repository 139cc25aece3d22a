"""Rich views of stored runs: ``optiml runs``'s table and ``optiml show RUN``'s best path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from optiml.cli.views.search import render_path, text_row
from optiml.report.llm_spend import LLMSpend, spend_rows
from optiml.search.queries import RunPath, RunSummary

#: Column sets of ``optiml runs``, richest first; the first that fits the terminal on one line per run
#: is used ("reason" is the status with the stop reason, cut with "…" where it is long).
RUNS_LAYOUTS = (
    ("run", "task", "strategy", "evals", "root", "best", "speedup", "started", "reason"),
    ("run", "task", "strategy", "evals", "root", "best", "speedup", "started", "status"),
    ("run", "task", "strategy", "evals", "root", "best", "speedup", "status"),
    ("run", "task", "strategy", "evals", "speedup", "status"),
    ("run", "task", "speedup", "status"),
)
_SHRINKING = {"task": 10, "reason": 24}  # columns cut with "…" to fit, and the least they keep
_COLUMN_PAD = 3  # a column's padding and separator in box.SIMPLE_HEAD


class RunsTable:
    """``optiml runs``: one row per stored run, newest first, fitted to the terminal, one line a run.
    Ids never wrap or shrink (they are copied into ``optiml show`` and ``resume``), nor does a status."""

    def __init__(self, summaries: Sequence[RunSummary]) -> None:
        self.summaries = list(summaries)

    def _cells(self, s: RunSummary) -> dict[str, str]:
        run = s.run
        return {
            "run": run.id,
            "task": run.task_name,
            "strategy": run.strategy,
            "evals": str(s.evaluations),
            "root": f"{s.root_ms:.4f} ms" if s.root_ms is not None else "-",
            "best": f"{s.best_ms:.4f} ms" if s.best_ms is not None else "-",
            "speedup": f"{s.speedup:.2f}x" if s.speedup is not None else "-",
            "started": datetime.fromtimestamp(run.created_at).strftime("%Y-%m-%d %H:%M"),
            "status": run.status,
            "reason": f"{run.status}: {run.stop_reason}" if run.stop_reason else run.status,
        }

    def layout(self, width: int) -> tuple[str, ...]:
        """The richest column set whose fixed columns, and shrinking ones at their least, fit ``width``."""
        rows = [self._cells(s) for s in self.summaries]
        for columns in RUNS_LAYOUTS:
            needed = 0
            for column in columns:
                widest = max([len(column), *(len(r[column]) for r in rows)])
                least = _SHRINKING.get(column)
                needed += (min(widest, least) if least is not None else widest) + _COLUMN_PAD
            if needed <= width:
                return columns
        return RUNS_LAYOUTS[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = self.layout(options.max_width)
        table = Table(title="Runs", title_justify="left", box=box.SIMPLE_HEAD)
        for column in columns:
            numeric = column in {"evals", "root", "best", "speedup"}
            # task names and stop reasons are cut with "…" rather than wrapped; the rest keep their width
            name = "status" if column == "reason" else column
            table.add_column(name, justify="right" if numeric else "left", no_wrap=column not in _SHRINKING)
        for s in self.summaries:
            cells = self._cells(s)
            table.add_row(*(Text(cells[c], no_wrap=True, overflow="ellipsis") for c in columns))
        yield table


def render_runs(summaries: Sequence[RunSummary]) -> RunsTable:
    return RunsTable(summaries)


def render_run_path(path: RunPath, spend: LLMSpend | None = None) -> RenderableType:
    """``optiml show RUN``: the best kernel so far and the edits that led to it."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold cyan")
    head.add_column()
    text_row(head, "run", f"{path.run.id} ({path.run.status}) · {path.run.task_name} · {path.run.strategy}")
    if path.root_ms is not None:
        text_row(head, "root", f"{path.root_ms:.4f} ms")
    if path.best_ms is not None and path.speedup is not None:
        state = "confirmed" if path.confirmed else "unconfirmed"
        best = f"{path.best_ms:.4f} ms, {path.speedup:.2f}x vs root ({state}), kernel {path.best_digest}"
        text_row(head, "best", best)
    for label, text in spend_rows(spend) if spend is not None else ():
        text_row(head, label, text)
    return Group(head, render_path(path.steps))
