"""Rich views of a search: the live panel while it runs and the final summary.

The ``render_*`` functions are pure (data in, renderable out), so they are tested on a CPU with
``Console(record=True)``; :class:`LiveView` only wires them to ``rich.live.Live``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from optiml.report.llm_spend import LLMSpend, spend_rows
from optiml.search.events import EventKind, Progress, SearchEvent
from optiml.search.outcome import PathStep, SearchOutcome
from optiml.values import Speedup, TimingStats

REFERENCE_NAMES = {
    "eager": "PyTorch eager",
    "eager_tf32": "PyTorch eager (default settings: TF32 convolutions)",
    "compile": "torch.compile",
}


def _reference_order(names: Sequence[str]) -> list[str]:
    """PyTorch eager first, then torch.compile, then anything else by name."""
    return [n for n in REFERENCE_NAMES if n in names] + sorted(n for n in names if n not in REFERENCE_NAMES)


def text_row(table: Table, *cells: str | Text) -> None:
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
    text_row(grid, "evaluations", _of(str(progress.evaluations), max_evals) + f"  ({progress.in_flight} in flight)")
    max_time = _duration(budgets.max_seconds) if budgets.max_seconds is not None else None
    text_row(grid, "elapsed", _of(_duration(progress.elapsed_s), max_time))
    max_cost = f"${budgets.max_cost_usd:.2f}" if budgets.max_cost_usd is not None else None
    text_row(grid, "LLM cost", _of(f"${progress.cost_usd:.2f}", max_cost))
    if progress.root_ms is not None:
        text_row(grid, "root", f"{progress.root_ms:.4f} ms")
    if progress.best_ms is not None and progress.best_speedup is not None:
        best = Text(f"{progress.best_ms:.4f} ms  ")
        best.append(f"{progress.best_speedup:.2f}x vs root", style="bold green")
        for name in _reference_order(list(progress.reference_ms)):
            speedup = progress.reference_speedup(name)
            if speedup is not None:
                best.append(f"  {speedup:.2f}x vs {REFERENCE_NAMES.get(name, name)}")
        best.append(f"  (depth {progress.best_depth}, not yet re-timed)", style="dim")
        text_row(grid, "best so far", best)
    text_row(grid, "failures", f"{progress.failures}: {_counts(progress.status_counts)}")
    text_row(
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
        text_row(table, str(index), step.edit.summary(80), step.edit.proposer, f"{step.time_ms:.4f} ms", gain)
    if not steps:
        text_row(table, "", "(none: the root is the best)", "", "", "")
    return table


def render_summary(outcome: SearchOutcome, spend: LLMSpend | None = None) -> RenderableType:
    """The final table: baseline vs best, speedups with their bands, roofline, budgets, path; with
    ``spend``, the run's LLM calls, tokens and dollars and what each verified candidate cost."""
    table = Table(
        title=f"OptiML result · {outcome.task_name} · run {outcome.run_id}", title_justify="left", show_header=False
    )
    table.add_column("", style="bold cyan", no_wrap=True)
    table.add_column("")
    text_row(table, "baseline (root)", _timing(outcome.root_timing))
    verdict = "confirmed by interleaved re-timing" if outcome.confirmed else f"unconfirmed: {outcome.note}"
    best = Text(_timing(outcome.best_timing) + "  ")
    best.append(verdict, style="green" if outcome.confirmed else "yellow")
    text_row(table, "best", best)
    text_row(table, "speedup vs root", _speedup(outcome.speedup))
    for name in _reference_order(list(outcome.reference_speedups)):
        speedup = _speedup(outcome.reference_speedups[name])
        reference = outcome.reference_timings.get(name)
        if reference is not None:
            when = "re-timed with the best" if outcome.references_retimed else "timed at the start"
            speedup.append(f"  ({reference.median_ms:.4f} ms, {when}; the judge's clock)", style="dim")
        text_row(table, f"speedup vs {REFERENCE_NAMES.get(name, name)}", speedup)
    if outcome.roofline_fraction is not None:
        root = outcome.root_roofline_fraction
        was = f" (root {root:.0%})" if root is not None else ""
        text_row(table, "roofline", f"{outcome.roofline_fraction:.0%} of the bound{was}")
    text_row(
        table,
        "evaluations",
        f"{outcome.evaluations} ({outcome.evaluations_per_minute:.1f}/min); failures: {_counts(outcome.status_counts)}",
    )
    text_row(table, "time, LLM cost", f"{_duration(outcome.elapsed_s)}, ${outcome.cost_usd:.2f}")
    for label, text in spend_rows(spend) if spend is not None else ():
        text_row(table, label, text)
    text_row(table, "strategy, stop", f"{outcome.strategy}: {outcome.stop_reason}")
    text_row(table, "best kernel", outcome.best_digest)
    return Group(table, render_path(outcome.path))


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
