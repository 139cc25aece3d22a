"""CLI rough edges a new user hits (issue 16, items 6, 8 and 9): help text, output paths, -n, doctor."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.cli import app

ROOT = Path(__file__).resolve().parent.parent
TASK = str(ROOT / "tasks" / "silu.py")
KERNEL = str(ROOT / "tasks" / "silu.naive.cu")
runner = CliRunner()


def one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    return lines[0]


@pytest.mark.parametrize("command", ["eval", "check-task", "export", "propose", "optimize", "show", "init-kernel"])
def test_help_shows_flags_as_flags_and_arguments_by_name(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], terminal_width=160)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output  # a flag takes no value
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage
    expected = {"show": "RUN", "optimize": "TASK"}.get(command, "TASK")
    assert expected in usage


def test_eval_help_names_task_and_kernel() -> None:
    result = runner.invoke(app, ["eval", "--help"], terminal_width=160)
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert usage.strip().endswith("[OPTIONS] TASK KERNEL")
    assert "--compile-only" in result.output and "--json " in result.output


def test_init_kernel_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.cu"
    result = runner.invoke(app, ["init-kernel", TASK, "-o", str(target)])
    assert result.exit_code == 2
    line = one_line_error(result.output)
    assert str(target) in line and "does not exist" in line


def test_init_kernel_onto_a_folder_even_with_force_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init-kernel", TASK, "-o", str(tmp_path), "--force"])
    assert result.exit_code == 2 and "is a folder" in one_line_error(result.output)


def test_export_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "x.py"
    store = str(tmp_path / "runs.db")
    result = runner.invoke(app, ["export", TASK, KERNEL, "-o", str(target), "--store", store, "--unverified"])
    assert result.exit_code == 2 and "does not exist" in one_line_error(result.output)
    assert not Path(store).exists()


def test_show_checks_its_kernel_out_before_anything_else(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "b.cu"
    result = runner.invoke(app, ["show", "some-run", "--store", str(tmp_path / "r.db"), "--kernel-out", str(target)])
    assert result.exit_code == 2 and "does not exist" in one_line_error(result.output)


def test_optimize_checks_its_output_before_the_search(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    target = tmp_path / "missing" / "best.cu"
    result = runner.invoke(app, ["optimize", TASK, "-o", str(target), "--evals", "2", "--store", str(store)])
    assert result.exit_code == 2 and str(target) in one_line_error(result.output)
    assert not store.exists()  # nothing ran: no GPU check, no run


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_output_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        result = runner.invoke(app, ["init-kernel", TASK, "-o", str(folder / "x.cu")])
    finally:
        folder.chmod(stat.S_IRWXU)
    assert result.exit_code == 2 and "not writable" in one_line_error(result.output)


@pytest.mark.parametrize("count", ["0", "-3"])
def test_propose_needs_at_least_one_proposal(tmp_path: Path, count: str) -> None:
    result = runner.invoke(app, ["propose", TASK, KERNEL, "-n", count, "-o", str(tmp_path / "p")])
    assert result.exit_code == 2 and "-n must be at least 1" in one_line_error(result.output)
    assert not (tmp_path / "p").exists()


def test_doctor_finds_cuobjdump_where_the_profiler_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from optiml.doctor import tool_check
    from optiml.profile.sass import find_cuobjdump

    tool = tmp_path / "bin" / "cuobjdump"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "cuobjdump" else real_which(name))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))  # not on PATH, as the [dev] extra's wheel is not either
    check = tool_check("cuobjdump", "SASS analysis", None)
    assert check.ok and check.detail == str(tool)
    assert find_cuobjdump(None) == str(tool)  # the profiler's own lookup agrees
