"""optiml.cli.core: eval's --seeds, --arch, check-task's --max-bytes and export's --store are checked and named
in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_cli_help_and_paths import one_line_error
from typer.testing import CliRunner

from optiml.cli import app

ROOT = Path(__file__).resolve().parents[2]
TASK = str(ROOT / "tasks" / "silu.py")
KERNEL = str(ROOT / "tasks" / "silu.naive.cu")
runner = CliRunner()


@pytest.mark.parametrize("seeds", ["0", "-1"])
@pytest.mark.parametrize("mode", [[], ["--compile-only"]])
def test_eval_refuses_fewer_than_one_seed(seeds: str, mode: list[str]) -> None:
    result = runner.invoke(app, ["eval", TASK, KERNEL, "--seeds", seeds, *mode])
    assert result.exit_code == 2
    assert f"--seeds must be at least 1 (verification trials on the default shape set), got {seeds}" in (
        one_line_error(result.output)
    )


def test_export_with_a_folder_as_the_store_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.py"
    result = runner.invoke(app, ["export", TASK, KERNEL, "-o", str(out), "--store", str(tmp_path)])
    assert result.exit_code == 2
    assert "is a folder; --store takes the run store file" in one_line_error(result.output)
    assert not out.exists()


def test_export_says_when_the_store_does_not_exist(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    result = runner.invoke(app, ["export", TASK, KERNEL, "-o", str(tmp_path / "x.py"), "--store", str(store)])
    assert result.exit_code == 2
    line = one_line_error(result.output)
    assert f"the run store {store} does not exist, so it holds no verified evaluation" in line
    assert "--unverified" in line and not store.exists()


@pytest.mark.parametrize("args", [["eval", TASK, KERNEL], ["profile", TASK, KERNEL], ["optimize", TASK]])
def test_an_architecture_nvcc_would_not_take_is_bad_input(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--arch", "bogus"])
    assert result.exit_code == 2, result.output
    assert "--arch 'bogus': expected an nvcc architecture like sm_90a" in one_line_error(result.output)


def test_check_task_refuses_a_byte_budget_of_nothing() -> None:
    result = runner.invoke(app, ["check-task", TASK, "--max-bytes", "0"])
    assert result.exit_code == 2
    assert "--max-bytes '0': must be at least one byte" in one_line_error(result.output)


def test_eval_user_clock_needs_a_full_run() -> None:
    result = runner.invoke(app, ["eval", TASK, KERNEL, "--compile-only", "--user-clock"])
    assert result.exit_code == 2
    assert "--user-clock runs it, which needs a full run" in one_line_error(result.output)


def test_the_user_clock_line_states_the_verdict_the_time_and_the_ratios() -> None:
    from optiml.cli.views.evaluation import user_clock_line

    measured = {
        "error": "",
        "verdict": {"passed": True, "reason": ""},
        "timings": {"model_new": {"cold": {"median_ms": 3.4186}}},
        "speedups": {"eager": 0.903, "compile": None},
        "agreement": 1.0873,
    }
    line = user_clock_line(measured)
    assert line.startswith("user's process: KernelBench's check passes")
    assert "ModelNew 3.4186 ms (KernelBench's timing)" in line and "0.90x eager" in line
    assert "judge ÷ user 1.087" in line and "compile" not in line
    failed = {**measured, "verdict": {"passed": False, "reason": "max abs diff 7e-4 against the default-settings"}}
    assert "fails (max abs diff 7e-4 against the default-settings)" in user_clock_line(failed)
    assert user_clock_line({"error": "no CUDA GPU"}) == "user's process: not measured (no CUDA GPU)"
