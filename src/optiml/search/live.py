"""Rich views of a search: the live panel while it runs, the final summary, stored runs and paths.

The ``render_*`` functions are pure (data in, renderable out), so they are tested on a CPU with
``Console(record=True)``; :class:`LiveView` only wires them to ``rich.live.Live``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from optiml.evaluate.results import Speedup, TimingStats
from optiml.search.events import EventKind, Progress, SearchEvent
from optiml.search.outcome import PathStep, SearchOutcome
from optiml.search.queries import RunPath, RunSummary
from optiml.search.spend import LLMSpend, spend_rows

REFERENCE_NAMES = {
    "eager": "PyTorch eager",
    "eager_tf32": "PyTorch eager (default settings: TF32 convolutions)",
    "compile": "torch.compile",
}


def _reference_order(names: Sequence[str]) -> list[str]:
    """PyTorch eager first, then torch.compile, then anything else by name."""
    return [n for n in REFERENCE_NAMES if n in names] + sorted(n for n in names if n not in REFERENCE_NAMES)


def _row(table: Table, *cells: str | Text) -> None:
    """Add a row whose plain strings are shown literally (an LLM's "[tiling] …" is not markup)."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _of(value: str, limit: str | None) -> str:
    return f"{value} / {limit}" if limit is not None else value


def _speedup(s: Speedup) -> Text:
    text = Text(f"{s.value:.2f}x", style="bold green" if s.significant else "yellow")
    text.append(f"  [{s.low:.2f}–{s.high:.2f}]", style="dim")
    return text


def _timing(t: TimingStats) -> str:
    return f"{t.median_ms:.4f} ms ± {t.spread_ms:.4f}"


def _counts(counts: dict[str, int]) -> str:
    failures = {status: n for status, n in counts.items() if status != "ok"}
    return ", ".join(f"{status} {n}" for status, n in sorted(failures.items())) or "none"


def render_progress(progress: Progress, recent: Sequence[str] = ()) -> RenderableType:
    """The live panel: budgets spent, best so far, failures by kind, latest events."""
    budgets = progress.budgets
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    max_evals = str(budgets.max_evaluations) if budgets.max_evaluations is not None else None
    _row(grid, "evaluations", _of(str(progress.evaluations), max_evals) + f"  ({progress.in_flight} in flight)")
    max_time = _duration(budgets.max_seconds) if budgets.max_seconds is not None else None
    _row(grid, "elapsed", _of(_duration(progress.elapsed_s), max_time))
    max_cost = f"${budgets.max_cost_usd:.2f}" if budgets.max_cost_usd is not None else None
    _row(grid, "LLM cost", _of(f"${progress.cost_usd:.2f}", max_cost))
    if progress.root_ms is not None:
        _row(grid, "root", f"{progress.root_ms:.4f} ms")
    if progress.best_ms is not None and progress.best_speedup is not None:
        best = Text(f"{progress.best_ms:.4f} ms  ")
        best.append(f"{progress.best_speedup:.2f}x vs root", style="bold green")
        for name in _reference_order(list(progress.reference_ms)):
            speedup = progress.reference_speedup(name)
            if speedup is not None:
                best.append(f"  {speedup:.2f}x vs {REFERENCE_NAMES.get(name, name)}")
        best.append(f"  (depth {progress.best_depth}, not yet re-timed)", style="dim")
        _row(grid, "best so far", best)
    _row(grid, "failures", f"{progress.failures}: {_counts(progress.status_counts)}")
    _row(
        grid,
        "tree",
        f"{progress.nodes} nodes, {progress.duplicates} duplicates skipped, {progress.not_applied} not applied",
    )
    parts: list[RenderableType] = [grid]
    if recent:
        parts.append(Text("\n".join(recent), style="dim", overflow="ellipsis", no_wrap=True))
    title = f"OptiML search · {progress.strategy} · run {progress.run_id}"
    return Panel(Group(*parts), title=title, title_align="left")


def render_path(steps: Sequence[PathStep]) -> Table:
    table = Table(title="Path of edits", title_justify="left", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("edit")
    table.add_column("proposer")
    table.add_column("time", justify="right")
    table.add_column("gain", justify="right")
    for index, step in enumerate(steps, 1):
        gain = Text(f"{step.gain:.2f}x", style="green" if step.gain > 1 else "red")
        _row(table, str(index), step.edit.summary(80), step.edit.proposer, f"{step.time_ms:.4f} ms", gain)
    if not steps:
        _row(table, "", "(none: the root is the best)", "", "", "")
    return table


def render_summary(outcome: SearchOutcome, spend: LLMSpend | None = None) -> RenderableType:
    """The final table: baseline vs best, speedups with their bands, roofline, budgets, path; with
    ``spend``, the run's LLM calls, tokens and dollars and what each verified candidate cost."""
    table = Table(
        title=f"OptiML result · {outcome.task_name} · run {outcome.run_id}", title_justify="left", show_header=False
    )
    table.add_column("", style="bold cyan", no_wrap=True)
    table.add_column("")
    _row(table, "baseline (root)", _timing(outcome.root_timing))
    verdict = "confirmed by interleaved re-timing" if outcome.confirmed else f"unconfirmed: {outcome.note}"
    best = Text(_timing(outcome.best_timing) + "  ")
    best.append(verdict, style="green" if outcome.confirmed else "yellow")
    _row(table, "best", best)
    _row(table, "speedup vs root", _speedup(outcome.speedup))
    for name in _reference_order(list(outcome.reference_speedups)):
        _row(table, f"speedup vs {REFERENCE_NAMES.get(name, name)}", _speedup(outcome.reference_speedups[name]))
    if outcome.roofline_fraction is not None:
        root = outcome.root_roofline_fraction
        was = f" (root {root:.0%})" if root is not None else ""
        _row(table, "roofline", f"{outcome.roofline_fraction:.0%} of the bound{was}")
    _row(
        table,
        "evaluations",
        f"{outcome.evaluations} ({outcome.evaluations_per_minute:.1f}/min); failures: {_counts(outcome.status_counts)}",
    )
    _row(table, "time, LLM cost", f"{_duration(outcome.elapsed_s)}, ${outcome.cost_usd:.2f}")
    for label, text in spend_rows(spend) if spend is not None else ():
        _row(table, label, text)
    _row(table, "strategy, stop", f"{outcome.strategy}: {outcome.stop_reason}")
    _row(table, "best kernel", outcome.best_digest)
    return Group(table, render_path(outcome.path))


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
    _row(head, "run", f"{path.run.id} ({path.run.status}) · {path.run.task_name} · {path.run.strategy}")
    if path.root_ms is not None:
        _row(head, "root", f"{path.root_ms:.4f} ms")
    if path.best_ms is not None and path.speedup is not None:
        state = "confirmed" if path.confirmed else "unconfirmed"
        _row(head, "best", f"{path.best_ms:.4f} ms, {path.speedup:.2f}x vs root ({state}), kernel {path.best_digest}")
    for label, text in spend_rows(spend) if spend is not None else ():
        _row(head, label, text)
    return Group(head, render_path(path.steps))


class LiveView:
    """A live panel fed by search events: ``with LiveView() as view: run_search(..., on_event=view)``."""

    def __init__(self, console: Console | None = None, recent: int = 6) -> None:
        self.console = console or Console()
        self._recent: deque[str] = deque(maxlen=recent)
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        self._live = Live(Text("starting…"), console=self.console, refresh_per_second=4)
        self._live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def __call__(self, event: SearchEvent) -> None:
        if event.kind is not EventKind.TICK and event.message:
            self._recent.append(f"{event.kind.value:>9}  {event.message}")
        if self._live is not None:
            self._live.update(render_progress(event.progress, list(self._recent)))
