"""The user sees the task and accepts, edits or rejects it; prompting and editing are injected."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from optiml.cli.views.confirm import confirm_task
from optiml.errors import TaskError
from optiml.generate.task_check import TaskCheck
from optiml.task import load_task

TASK = "import torch\nclass Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"


def fake_check(path: Path) -> TaskCheck:
    """Stands in for the sandboxed CPU check: a file containing BROKEN fails it."""
    if "BROKEN" in path.read_text():
        raise TaskError(f"{path}: Model.forward failed: NameError: name 'BROKEN' is not defined")
    return TaskCheck(load_task(path), ())


def answers(*replies: str) -> tuple[Callable[..., str], list[str]]:
    asked: list[str] = []
    queue = list(replies)

    def ask(question: str, default: str = "") -> str:
        asked.append(question)
        return queue.pop(0)

    return ask, asked


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=120, color_system=None), out


def test_accepting_returns_the_task_after_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(TASK)
    ask, asked = answers("a")
    screen, out = console()
    task = confirm_task(path, screen, ask=ask, edit=lambda p: None, check=fake_check)
    assert task is not None and task.name == "softmax"
    assert "class Model:" in out.getvalue() and "checked:" in out.getvalue()
    assert asked == ["Optimize against this reference? [a]ccept, [e]dit, [r]eject"]


def test_an_edit_that_breaks_the_task_cannot_be_accepted_until_fixed(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(TASK)
    edits = iter([TASK.replace("pass", "BROKEN"), TASK.replace("pass", "scale = 2")])

    def edit(p: Path) -> None:
        p.write_text(next(edits))

    ask, asked = answers("e", "accept", "edit", "x", "a")
    screen, out = console()
    task = confirm_task(path, screen, ask=ask, edit=edit, check=fake_check)

    assert task is not None and "scale = 2" in task.source
    text = out.getvalue()
    assert "this file does not pass its checks:" in text and "NameError" in text
    assert "fix the file first" in text and "answer a, e or r" in text
    assert len(asked) == 5


def test_rejecting_returns_none(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(TASK)
    ask, _ = answers("r")
    assert confirm_task(path, console()[0], ask=ask, edit=lambda p: None, check=fake_check) is None
