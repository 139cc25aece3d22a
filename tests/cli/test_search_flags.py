"""optiml.cli.search: optimize's and resume's flags are checked first and named in one line; resume,
runs and show never create a run store they were not given."""

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
    ("flags", "expected"),
    [
        (["--evals", "0"], "--evals must be at least 1 (the evaluation budget, the root included), got 0"),
        (["--evals", "-5"], "--evals must be at least 1"),
        (["--minutes", "0"], "--minutes must be a positive number (minutes), got 0"),
        (["--minutes", "-1"], "--minutes must be a positive number (minutes), got -1"),
        (["--minutes", "nan"], "--minutes must be a positive number (minutes), got nan"),
        (["--budget-usd", "-1"], "--budget-usd must be a number >= 0 (USD), got -1"),
        (["--profile-margin", "-0.5"], "--profile-margin must be a number >= 0, got -0.5"),
        (["--strategy", "beam"], "--strategy 'beam': choose one of mcts, greedy, best-of-n"),
        (["--proposer", "magic"], "--proposer 'magic': choose one of auto, heuristic, llm, mix"),
    ],
)
def test_optimize_names_the_bad_flag_before_loading_anything(tmp_path: Path, flags: list[str], expected: str) -> None:
    store = tmp_path / "runs.db"
    result = runner.invoke(app, ["optimize", str(tmp_path / "missing.py"), *flags, "--store", str(store)])
    assert result.exit_code == 2
    assert expected in one_line_error(result.output)  # the flag, not the missing task: checked first
    assert not store.exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--evals", "0"], "--evals must be at least 1"),
        (["--minutes", "-2"], "--minutes must be a positive number"),
        (["--proposer", "magic"], "--proposer 'magic'"),
    ],
)
def test_resume_names_the_bad_flag(tmp_path: Path, flags: list[str], expected: str) -> None:
    result = runner.invoke(app, ["resume", "some-run", *flags, "--store", str(tmp_path / "runs.db")])
    assert result.exit_code == 2 and expected in one_line_error(result.output)


@pytest.mark.parametrize("command", [["resume", "some-run"], ["show", "some-run"], ["runs"]])
def test_a_missing_store_is_one_line_and_stays_missing(tmp_path: Path, command: list[str]) -> None:
    store = tmp_path / "sub" / "runs.db"
    result = runner.invoke(app, [*command, "--store", str(store)])
    assert result.exit_code == 2
    assert "no run store yet" in one_line_error(result.output)
    assert not store.exists() and not store.parent.exists()  # resume used to create an empty one


@pytest.mark.parametrize("command", [["resume", "some-run"], ["show", "some-run"], ["runs"], ["report", "some-run"]])
def test_a_folder_given_as_the_store_is_one_line(tmp_path: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--store", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path}: is a folder, not a run store file" in one_line_error(result.output)


def test_propose_into_a_file_is_refused_before_proposing(tmp_path: Path) -> None:
    target = tmp_path / "taken.cu"
    target.write_text("// mine\n", encoding="utf-8")
    result = runner.invoke(app, ["propose", TASK, str(ROOT / "tasks" / "silu.naive.cu"), "-o", str(target)])
    assert result.exit_code == 2
    assert f"{target}: is a file; -o takes the folder" in one_line_error(result.output)
    assert target.read_text(encoding="utf-8") == "// mine\n"


def test_structural_proposals_for_a_hand_written_kernel_say_why_there_are_none(tmp_path: Path) -> None:
    kernel = str(ROOT / "tasks" / "silu.naive.cu")
    args = ["propose", TASK, kernel, "--proposer", "structural", "-o", str(tmp_path / "p")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "is not a template kernel (no OptiML plan marker)" in result.output
    assert "try --proposer heuristic" in result.output and "Traceback" not in result.output


def test_resume_without_a_gpu_stops_before_the_search_and_records_nothing(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from optiml.kernel.source import KernelSource
    from optiml.search import SearchConfig
    from optiml.store import RunStore
    from optiml.task import load_task

    task, store = load_task(TASK), tmp_path / "runs.db"
    with RunStore(store) as runs:
        root = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
        run = runs.create_run(
            task_name=task.name,
            task_path=str(task.path),
            task_digest=task.digest,
            strategy="greedy",
            config_json=SearchConfig().to_json(),
            root=root,
        )
    result = runner.invoke(
        app, ["resume", run.id, "--store", str(store), "--no-profile", "-o", str(tmp_path / "best.cu")]
    )
    assert result.exit_code != 0 and "no CUDA GPU is visible" in one_line_error(result.output)
    with RunStore(store) as runs:
        assert runs.edits(run.id) == [] and runs.nodes(run.id) == []  # the search never started
