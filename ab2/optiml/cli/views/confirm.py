"""Show a generated task to the user, who accepts it, edits it, or rejects it.

Nothing is optimized against a reference the user has not seen: ``optiml generate`` calls
:func:`confirm_task` after :func:`~optiml.generate.task_gen.generate_task_from_request` and goes
on only with the task it returns. Prompting and editing are injected, so the loop is testable.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.syntax import Syntax

from optiml.errors import TaskError
from optiml.generate.errors import GenerationError
from optiml.generate.task_check import TaskCheck, validate_task_file
from optiml.task import Task

Ask = Callable[..., str]
Edit = Callable[[Path], None]
Check = Callable[[Path], TaskCheck]

_QUESTION = "Optimize against this reference? [a]ccept, [e]dit, [r]eject"


def open_in_editor(path: Path) -> None:
    """Open ``path`` in the user's $VISUAL / $EDITOR (default ``vi``) and wait for it to close."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=False)
    except OSError as exc:
        raise GenerationError(
            f"cannot start the editor {editor!r} ({exc}); set $EDITOR, or edit {path} yourself"
        ) from exc


def confirm_task(
    path: Path,
    console: Console,
    ask: Ask = typer.prompt,
    edit: Edit = open_in_editor,
    check: Check = validate_task_file,
) -> Task | None:
    """Show the task at ``path`` until the user accepts (the task) or rejects it (None).

    The file is checked (``check``, by default :func:`validate_task_file`) before it is shown and
    after every edit; a task that fails its checks cannot be accepted, only edited or rejected.
    """
    task: Task | None = None
    problem = ""
    shown = _load(path, check)
    if isinstance(shown, TaskCheck):
        task = shown.task
    else:
        problem = shown
    while True:
        console.print(Syntax(path.read_text(encoding="utf-8"), "python", line_numbers=True, word_wrap=True))
        if problem:
            console.print(f"[red]this file does not pass its checks:[/red] {problem}", highlight=False)
        else:
            console.print(f"[green]checked:[/green] {path} runs, is seeded and deterministic on the CPU")
        choice = ask(_QUESTION, default="a").strip().lower()[:1]
        if choice == "a":
            if task is not None:
                return task
            console.print("[yellow]fix the file first ([e]dit) or reject it ([r]eject)[/yellow]")
        elif choice == "e":
            edit(path)
            shown = _load(path, check)
            task, problem = (shown.task, "") if isinstance(shown, TaskCheck) else (None, shown)
        elif choice == "r":
            return None
        else:
            console.print("[yellow]answer a, e or r[/yellow]")


def _load(path: Path, check: Check) -> TaskCheck | str:
    try:
        return check(path)
    except TaskError as exc:
        return str(exc)
