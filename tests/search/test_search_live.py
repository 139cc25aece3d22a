"""The live view and summary tables, rendered into a recording console."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console, RenderableType
from search_helpers import KnobProfiler

from optiml.cli.views.runs import render_run_path, render_runs
from optiml.cli.views.search import LiveView, render_progress, render_summary
from optiml.search import Budgets, SearchConfig, SearchEvent, best_path, list_runs, run_search
from optiml.search.events import EventKind, Progress
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.search.outcome import PathStep, SearchOutcome
from optiml.store import RunStore
from optiml.task import Task
from optiml.values import Edit, Speedup, TimingStats


def text(renderable: RenderableType, width: int = 160) -> str:
    console = Console(record=True, width=width)
    console.print(renderable)
    return console.export_text()


PROGRESS = Progress(
    run_id="20261130-120000-abcdef",
    strategy="mcts",
    budgets=Budgets(max_evaluations=100, max_seconds=600, max_cost_usd=1.0),
    evaluations=12,
    in_flight=2,
    elapsed_s=75,
    cost_usd=0.3,
    root_ms=3.0,
    best_ms=2.0,
    best_depth=3,
    nodes=14,
    status_counts={"ok": 9, "compile_error": 2, "wrong_answer": 1},
    reference_ms={"eager": 4.0, "compile": 2.5},
    duplicates=5,
    not_applied=1,
)


def timing(ms: float) -> TimingStats:
    return TimingStats(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms * 1.02, 50)


def test_progress_shows_budgets_best_references_and_failures() -> None:
    out = text(render_progress(PROGRESS, ["evaluated  [tiling] TILE 1 → 2 → 2.0 ms"]))
    assert "12 / 100  (2 in flight)" in out
    assert "1:15 / 10:00" in out and "$0.30 / $1.00" in out
    assert "2.0000 ms  1.50x vs root  2.00x vs PyTorch eager  1.25x vs torch.compile" in out
    assert "3: compile_error 2, wrong_answer 1" in out
    assert "14 nodes, 5 duplicates skipped, 1 not applied" in out
    assert "[tiling] TILE 1 → 2" in out  # brackets from proposers are text, not markup


def test_progress_without_limits_or_a_best_yet() -> None:
    empty = Progress("r", "greedy", Budgets(None, None, None), 0, 1, 0.0, 0.0, None, None, 0, 1)
    out = text(render_progress(empty))
    assert "0  (1 in flight)" in out and "best so far" not in out and "failures     0: none" in out


def outcome(confirmed: bool) -> SearchOutcome:
    edit = Edit("search_replace", "...", "tiling", "tile rows by [32] in shared memory", "llm:gpt")
    return SearchOutcome(
        run_id="r1",
        task_name="softmax",
        strategy="mcts",
        stop_reason="evaluation budget spent (60 evaluations)",
        root_digest="root",
        root_timing=timing(3.0),
        best_digest="best",
        best_kernel=landscape_kernel(),
        best_result=None,  # type: ignore[arg-type]
        best_timing=timing(1.5),
        confirmed=confirmed,
        speedup=Speedup.between(timing(3.0), timing(1.5)),
        reference_speedups={"eager": Speedup.between(timing(4.5), timing(1.5))},
        path=(PathStep(edit, "best", 1.5, 3.0),),
        status_counts={"ok": 50, "timeout": 10},
        evaluations=60,
        elapsed_s=120,
        cost_usd=0.42,
        roofline_fraction=0.61,
        root_roofline_fraction=0.3,
        note="" if confirmed else "no candidate beat the root beyond the noise when re-timed",
    )


def row(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if f"│ {label} " in line)


def test_summary_shows_times_speedups_roofline_and_the_path() -> None:
    out = text(render_summary(outcome(confirmed=True)))
    assert "3.0000 ms ± 0.0300" in row(out, "baseline (root)")
    assert "1.5000 ms ± 0.0150  confirmed by interleaved re-timing" in row(out, "best")
    assert "2.00x  [1.96–2.04]" in row(out, "speedup vs root")
    assert "3.00x" in row(out, "speedup vs PyTorch eager")
    assert "61% of the bound (root 30%)" in row(out, "roofline")
    assert "60 (30.0/min); failures: timeout 10" in row(out, "evaluations")
    assert "2:00, $0.42" in row(out, "time, LLM cost")
    step = row(out, "1")
    assert "[tiling] tile rows by [32] in shared memory" in step and "llm:gpt" in step and "2.00x" in step


def test_the_summary_says_when_and_on_which_clock_the_references_were_timed() -> None:
    start = outcome(confirmed=True)
    shown = text(render_summary(replace(start, reference_timings={"eager": timing(4.5)})), width=160)
    assert "(4.5000 ms, timed at the start; the judge's clock)" in row(shown, "speedup vs PyTorch eager")
    retimed = replace(start, reference_timings={"eager": timing(4.5)}, references_retimed=True)
    shown = text(render_summary(retimed), width=160)
    assert "(4.5000 ms, re-timed with the best; the judge's clock)" in row(shown, "speedup vs PyTorch eager")


def test_an_unconfirmed_summary_says_why() -> None:
    out = text(render_summary(outcome(confirmed=False)))
    assert "unconfirmed: no candidate beat the root beyond the noise when re-timed" in out


def test_stored_runs_and_paths_render(task: Task, store: RunStore) -> None:
    config = SearchConfig(parallel_evaluations=1, parallel_proposals=1, budgets=Budgets(20))
    result = run_search(
        task,
        landscape_kernel(),
        LandscapeEvaluator(Landscape(seed=0)),
        [KnobProposer(0)],
        KnobProfiler(),
        store,
        config,
    )
    runs = text(render_runs(list_runs(store)), width=220)
    assert result.run_id in runs and "scale" in runs and "finished: evaluation budget spent" in runs
    assert f"{result.speedup.value:.2f}x" in runs
    narrow = text(render_runs(list_runs(store)), width=80)  # an 80-column terminal: fewer columns, ids whole
    assert result.run_id in narrow and "scale" in narrow and f"{result.speedup.value:.2f}x" in narrow
    assert "finished" in narrow and "…" not in narrow
    path = best_path(store, result.run_id)
    assert path.best_digest == result.best_digest and len(path.steps) == len(result.path)
    shown = text(render_run_path(path), width=220)
    assert "(confirmed)" in shown and result.path[0].edit.summary(80) in shown


def test_live_view_draws_the_latest_progress_and_events() -> None:
    console = Console(record=True, width=140, force_terminal=False)
    with LiveView(console) as view:
        view(SearchEvent(EventKind.EVALUATED, "root: 3.0 ms", PROGRESS))
        view(SearchEvent(EventKind.TICK, "", PROGRESS))
        view(SearchEvent(EventKind.WARNING, "proposer llm failed: timeout", PROGRESS))
    out = console.export_text()
    assert "root: 3.0 ms" in out and "proposer llm failed: timeout" in out and "12 / 100" in out
