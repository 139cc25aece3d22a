"""The optimize workflow (:mod:`optiml.workflow`) on the terminal: a spinner per long step, the root
candidates, and the live panel of the search, with Ctrl-C saying how to resume the run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from optiml.cli.views.generation import render_generation
from optiml.cli.views.search import LiveView
from optiml.evaluate.evaluator import TaskFacts
from optiml.generate.offline import OfflineRoot
from optiml.generate.root import LLMRoot, Root
from optiml.search import SearchConfig
from optiml.search.events import EventSink
from optiml.session import Session
from optiml.workflow import WorkflowView

PREPARING = "preparing the task: inputs, reference outputs, reference timing"


class ConsoleView(WorkflowView):
    """``optiml optimize`` and ``optiml resume``: how verification judges the task (with ``notes``), the
    root candidates, the root, then the search's live panel. ``store``: the run store a Ctrl-C during the
    search tells the user to resume from (on ``err``)."""

    offline_status = "generating root candidates from the op graph's templates"
    offline_title = "[bold]root candidates[/bold] (no LLM)"

    def __init__(
        self, console: Console, *, err: Console | None = None, store: Path | None = None, notes: bool = True
    ) -> None:
        self.console = console
        self.err = err or console
        self.store = store
        self.notes = notes

    def preparing(self) -> contextlib.AbstractContextManager[object]:
        return self.console.status(PREPARING)

    def prepared(self, facts: TaskFacts) -> None:
        if self.notes:  # how verification judges this task: distributions, tolerances, floor
            for note in facts.notes:
                self.console.print(f"[dim]judged by: {escape(note)}[/dim]", highlight=False)

    def making_offline_root(self) -> contextlib.AbstractContextManager[object]:
        return self.console.status(self.offline_status)

    def offline_root(self, outcome: OfflineRoot) -> None:
        self.console.print(f"{self.offline_title}: {outcome.summary()}", highlight=False)

    def generated_root(self, generated: LLMRoot) -> None:
        if generated.outcome is None:
            self.console.print(f"[yellow]LLM generation failed[/yellow]: {generated.error}", highlight=False)
        else:
            self.console.print(render_generation(generated.outcome))

    def root_chosen(self, root: Root) -> None:
        self.console.print(f"root: {root.label} ({root.time_ms:.4f} ms)", highlight=False)

    @contextlib.contextmanager
    def searching(self, session: Session, config: SearchConfig | None) -> Iterator[EventSink | None]:
        if config is not None:  # a new run (a resumed one keeps its own strategy and says nothing here)
            self.console.print(
                f"optimizing [bold]{session.task.name}[/bold] with {config.strategy}, proposers: "
                f"{', '.join(session.proposer_names)}"
                + ("" if session.llm else " [dim](no LLM configured: offline proposer only)[/dim]")
            )
        with LiveView(self.console) as view:
            try:
                yield view
            except KeyboardInterrupt:
                if self.store is None:
                    raise
                self.err.print(
                    f"[yellow]interrupted[/yellow]: resume with `optiml resume RUN --store {self.store}` "
                    "(see `optiml runs`)"
                )
                raise typer.Exit(130) from None


class TemplateRootView(ConsoleView):
    """``optiml generate --reference`` without an LLM: the template kernels, judged; no search follows."""

    offline_status = "generating kernels from the op graph's templates (no LLM configured)"
    offline_title = "[bold]template kernels[/bold]"

    def __init__(self, console: Console) -> None:
        super().__init__(console, notes=False)
