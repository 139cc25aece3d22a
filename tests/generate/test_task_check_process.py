"""optiml.generate.task_check: a task that ends or kills the check process gets a message about the
task, not runpy's warning about how the process was started."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.errors import TaskError
from optiml.generate.task_check import validate_task_file

TASK = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    {body}
    return [torch.rand(4)]


def get_init_inputs():
    return []
"""


def test_a_task_that_calls_sys_exit_is_named(tmp_path: Path) -> None:
    path = tmp_path / "quits.py"
    path.write_text(TASK.format(body="import sys; sys.exit(3)"), encoding="utf-8")
    with pytest.raises(TaskError) as caught:
        validate_task_file(path, timeout_s=120)
    assert str(caught.value) == f"{path}: the task called sys.exit(3) while it was checked"


def test_a_task_that_kills_the_interpreter_says_how_the_process_ended(tmp_path: Path) -> None:
    path = tmp_path / "crashes.py"
    path.write_text(TASK.format(body="import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), encoding="utf-8")
    with pytest.raises(TaskError) as caught:
        validate_task_file(path, timeout_s=120)
    message = str(caught.value)
    assert "the check process was killed by SIGKILL before it replied" in message, message
    assert "RuntimeWarning" not in message and "runpy" not in message and "\n" not in message
