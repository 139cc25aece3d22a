"""optiml.bench.runner: an error of the machine (no GPU, no nvcc) stops the suite with that error and
records no row for the task it hit, so the same command runs it later; a broken task stays a row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.bench import BenchConfig, BenchRow, run_bench
from optiml.bench import runner as bench_runner
from optiml.cli import app
from optiml.errors import NoGPUError, TaskError, ToolchainError


class IdleWorker:
    """A GPU thread's worker for jobs that run nothing on it: only stopped at the end."""

    def stop(self) -> None:
        pass


def write_tasks(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text("# a task file (the fake job never reads it)\n", encoding="utf-8")
    return [folder / f"{name}.py" for name in names]


def verified(path: Path) -> BenchRow:
    return BenchRow(path.stem, str(path), "verified", best_ms=0.1, baselines_ms={"eager": 0.2})


@pytest.mark.parametrize("error", [NoGPUError("no CUDA GPU is visible"), ToolchainError("nvcc not found")])
def test_a_machine_error_stops_the_suite_and_records_nothing_for_its_task(tmp_path: Path, error: Exception) -> None:
    paths = write_tasks(tmp_path / "suite", ["a", "b", "c", "d"])
    out = tmp_path / "out"
    ran: list[str] = []

    def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
        ran.append(path.stem)
        if path.stem == "b":
            raise TaskError(f"{path.name}: syntax error on line 2")  # the task's fault: a row, the suite goes on
        if path.stem == "c":
            raise error
        return verified(path)

    with pytest.raises(type(error), match=str(error)):
        run_bench(paths, BenchConfig(), out, job=job, make_worker=lambda gpu: IdleWorker())
    assert ran == ["a", "b", "c"]  # d never started
    rows = json.loads((out / "bench.json").read_text())["rows"]
    assert [(r["task"], r["status"]) for r in rows] == [("a", "verified"), ("b", "failed")]
    ran.clear()
    again = run_bench(paths, BenchConfig(), out, job=lambda p, w, g: ran.append(p.stem) or verified(p),
                      make_worker=lambda gpu: IdleWorker())  # fmt: skip
    assert ran == ["c", "d"]  # the machine is fixed: c runs, a and b stay as recorded
    assert [r.task for r in again] == ["a", "b", "c", "d"]


def test_a_worker_that_cannot_start_stops_the_suite(tmp_path: Path) -> None:
    paths = write_tasks(tmp_path / "suite", ["a"])

    def make_worker(gpu: int | None) -> IdleWorker:
        raise NoGPUError(f"CUDA device {gpu} is not visible")

    with pytest.raises(NoGPUError, match="CUDA device 3 is not visible"):
        run_bench(paths, BenchConfig(gpus=(3,)), tmp_path / "out", job=lambda *a: verified(paths[0]),
                  make_worker=make_worker)  # fmt: skip
    assert not (tmp_path / "out" / "bench.json").exists()


def test_the_cli_ends_in_one_line_and_exit_2_without_a_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tasks(tmp_path / "suite", ["a", "b"])

    def no_gpu_job(config: BenchConfig, out_dir: Path):  # type: ignore[no-untyped-def]
        def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
            raise NoGPUError("no CUDA GPU is visible: evaluation needs one (run `optiml doctor`)")

        return job

    monkeypatch.setattr(bench_runner, "optimize_job", no_gpu_job)
    monkeypatch.setattr(bench_runner, "_worker_for", lambda gpu: IdleWorker())
    result = CliRunner().invoke(app, ["bench", str(tmp_path / "suite"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "error: no CUDA GPU is visible" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out" / "bench.json").exists()  # no task was recorded as failed for want of a GPU


def test_the_state_says_where_and_when_it_was_measured(tmp_path: Path) -> None:
    """A suite's figures mean little without the GPU and the date: both are in bench.json and bench.md."""
    paths = write_tasks(tmp_path / "suite", ["a", "b"])
    out = tmp_path / "out"

    def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
        row = verified(path)
        row.device = "NVIDIA H200"
        return row

    run_bench(paths, BenchConfig(), out, job=job, make_worker=lambda gpu: IdleWorker())
    state = json.loads((out / "bench.json").read_text())
    assert state["started_at"].startswith("20") and "T" in state["started_at"] and state["optiml"]
    assert [r["device"] for r in state["rows"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert (out / "bench.md").read_text().startswith("Measured on NVIDIA H200;")
