"""The CLI, invoked in-process: help, task checks, skeletons, and one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("eval", "init-kernel", "check-task", "doctor"):
        assert command in result.output


def test_check_task_on_a_starter_task() -> None:
    result = runner.invoke(app, ["check-task", str(ROOT / "tasks" / "layernorm.py")])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "shape sets: 3" in result.output


def test_bad_task_is_one_red_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Model:\n  pass\n")
    result = runner.invoke(app, ["check-task", str(bad)])
    assert result.exit_code == 2
    assert "get_inputs" in result.output
    assert "Traceback" not in result.output


@pytest.mark.nvcc
def test_init_kernel_writes_a_skeleton_that_names_every_argument(tmp_path: Path) -> None:
    out = tmp_path / "k.cu"
    result = runner.invoke(app, ["init-kernel", str(ROOT / "tasks" / "layernorm.py"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "inputs[1]  parameter/buffer ln_weight" in text
    assert "optiml_forward" in text
    again = runner.invoke(app, ["init-kernel", str(ROOT / "tasks" / "layernorm.py"), "-o", str(out)])
    assert again.exit_code == 2 and "--force" in again.output


def test_eval_with_missing_kernel_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(ROOT / "tasks" / "silu.py"), str(tmp_path / "none.cu")])
    assert result.exit_code == 2
    assert "no such kernel file" in result.output


def test_eval_of_a_non_candidate_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.cu"
    plain.write_text("__global__ void k() {}\n")
    result = runner.invoke(app, ["eval", str(ROOT / "tasks" / "silu.py"), str(plain)])
    assert result.exit_code == 2
    assert "optiml_forward" in result.output and "init-kernel" in result.output
