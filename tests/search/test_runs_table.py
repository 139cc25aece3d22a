"""`optiml runs` keeps every run on one line at any common width (issue 16, item 9)."""

from __future__ import annotations

import pytest
from rich.console import Console

from optiml.cli.views.runs import render_runs
from optiml.search import Budgets, SearchConfig, list_runs, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.store import RunStore
from optiml.task import Task


@pytest.mark.parametrize("width", [80, 100, 120, 140, 160, 220])
def test_each_run_is_one_line_with_its_id_and_status_whole(task: Task, store: RunStore, width: int) -> None:
    config = SearchConfig(strategy="greedy", budgets=Budgets(max_evaluations=4))
    ids = []
    for seed in (0, 1):
        outcome = run_search(
            task,
            landscape_kernel(),
            LandscapeEvaluator(Landscape(seed=seed)),
            [KnobProposer(seed)],
            None,
            store,
            config,
        )
        ids.append(outcome.run_id)
    long_reason = "proposers keep failing (3 in a row); last: proposer llm failed: LLMError: connection refused"
    store.update_run(ids[0], stop_reason=long_reason)
    console = Console(record=True, width=width)
    console.print(render_runs(list_runs(store)))
    text = console.export_text()
    lines = [line for line in text.splitlines() if line.strip()]
    for run_id in ids:
        [row] = [line for line in lines if run_id in line]  # the id is whole, on exactly one line
        assert "finished" in row and len(row.rstrip()) <= width
    assert len(lines) == 3 + len(ids)  # title, header, rule, one line per run
    if width >= 220:
        assert long_reason in text
