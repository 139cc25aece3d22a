"""optiml.cli.app: a usage error (unknown option or command, a bad or missing value) is one red line
with the command's usage, like every other error; help and version are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_cli_help_and_paths import one_line_error
from typer.testing import CliRunner

from optiml.cli import app

ROOT = Path(__file__).resolve().parents[2]
TASK = str(ROOT / "tasks" / "silu.py")
runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["optimize", TASK, "--evals", "many"], "Invalid value for '--evals'"),
        (["optimize", TASK, "--max-llm-calls", "0"], "Invalid value for '--max-llm-calls'"),
        (["eval", TASK], "Missing argument 'KERNEL'; usage: optiml eval [OPTIONS] TASK KERNEL"),
        (["runs", "--bogus"], "No such option: --bogus; usage: optiml runs [OPTIONS]"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_a_usage_error_is_one_line_with_the_usage(args: list[str], expected: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    line = one_line_error(result.output)
    assert expected in line and "--help` for more" in line and "╭" not in result.output


def test_help_version_and_a_bare_optiml_still_work() -> None:
    assert runner.invoke(app, ["--version"]).exit_code == 0
    helped = runner.invoke(app, ["eval", "--help"])
    assert helped.exit_code == 0 and "Usage:" in helped.output
    bare = runner.invoke(app, [])
    assert bare.exit_code == 2 and "optimize" in bare.output  # the command list, as typer shows it


def test_the_exit_status_of_a_command_is_kept() -> None:
    result = runner.invoke(app, ["check-task", str(ROOT / "no-such-task.py")])
    assert result.exit_code == 2 and "no such task file" in one_line_error(result.output)
