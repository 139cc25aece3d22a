"""The task of a stored run: its reference source, and whether the file still is what the run used."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optiml.errors import OptimlError
from optiml.store import RunRecord
from optiml.task import Task, load_task


@dataclass(frozen=True)
class TaskInfo:
    name: str
    path: str
    digest: str  # the run's
    source: str | None  # the reference as the file holds it now; None when it cannot be read
    note: str  # why the source is missing or may differ from the run's; "" when it is the run's
    task: Task | None  # the loaded task, only when its digest is the run's (it then sizes the roofline)

    @property
    def description(self) -> str:
        return self.task.meta.description if self.task is not None else ""

    @property
    def dtype(self) -> str:
        return self.task.meta.dtype if self.task is not None else ""


def load_task_info(run: RunRecord) -> TaskInfo:
    """The run's task file, read now; the run store keeps only its path and digest."""
    path = Path(run.task_path)
    try:
        task = load_task(path)
    except OptimlError as exc:
        source = _read(path)
        note = f"the task file cannot be loaded now ({exc})" if path.exists() else f"{path} no longer exists"
        return TaskInfo(run.task_name, run.task_path, run.task_digest, source, note, None)
    if task.digest != run.task_digest:
        note = f"{path} changed since the run (digest {task.digest} now, {run.task_digest} in the run)"
        return TaskInfo(run.task_name, run.task_path, run.task_digest, task.source, note, None)
    return TaskInfo(run.task_name, run.task_path, run.task_digest, task.source, "", task)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
