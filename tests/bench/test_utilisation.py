"""GPU utilisation over a bench run, against a stand-in ``nvidia-smi`` on PATH that speaks the real
tool's CSV loop (``--query-gpu=... --format=csv,noheader,nounits -lms N``)."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest
from test_runner import IdleWorker, verified, write_tasks
from typer.testing import CliRunner

from optiml.bench import runner as bench_runner
from optiml.bench.metrics import BenchRow
from optiml.bench.runner import BenchConfig, run_bench
from optiml.bench.utilisation import UtilisationSampler, describe, physical_indices
from optiml.cli import app

# GPU 0 alternates 0 % and 80 %; GPU 1 reports 50 % and its memory grows; GPU 2 has no utilisation figure.
FAKE_SMI = """#!{python}
import sys, time

args = sys.argv[1:]
assert args[:2] == ["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"], args
assert args[2] == "-lms", args
period = int(args[3]) / 1000
step = 0
while True:
    print(f"0, {{80 if step % 2 else 0}}, 1000", flush=True)
    print(f"1, 50, {{2000 + 10 * step}}", flush=True)
    print("2, [N/A], 10", flush=True)
    step += 1
    time.sleep(period)
"""


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = folder / "nvidia-smi"
    tool.write_text(FAKE_SMI.format(python=sys.executable))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tool


def _sample(gpus: tuple[int | None, ...], seconds: float = 0.6) -> dict:
    sampler = UtilisationSampler(gpus, period_ms=20)
    sampler.start()
    time.sleep(seconds)
    return sampler.stop()


def test_each_bench_gpu_gets_its_mean_busy_share_and_peak_memory(fake_smi: Path) -> None:
    summary = _sample((0, 1))
    assert summary["tool"] == "nvidia-smi" and summary["period_ms"] == 20
    gpu0, gpu1 = summary["gpus"]["0"], summary["gpus"]["1"]
    assert gpu0["samples"] >= 4 and 30 <= gpu0["mean_pct"] <= 50 and 0.3 <= gpu0["busy_fraction"] <= 0.7
    assert gpu1["mean_pct"] == 50.0 and gpu1["busy_fraction"] == 1.0
    assert gpu1["peak_memory_mib"] == 2000 + 10 * (gpu1["samples"] - 1)
    assert "2" not in summary["gpus"]  # not a bench GPU (and "[N/A]" is never read as a figure)
    line = describe(summary)
    assert line.startswith("GPU utilisation (nvidia-smi): GPU 0 ") and "GPU 1 50 % mean" in line


def test_a_gpu_without_a_utilisation_figure_is_not_invented(fake_smi: Path) -> None:
    summary = _sample((2,), seconds=0.2)
    assert "gpus" not in summary and "no samples" in summary["unavailable"]


def test_cuda_indices_go_through_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert physical_indices((None,)) == [0] and physical_indices((0, 2)) == [0, 2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert physical_indices((None,)) == [3] and physical_indices((1,)) == [1] and physical_indices((0, 1)) == [3, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f2c,GPU-11aa")
    assert physical_indices((0,)) is None  # UUIDs: every GPU is reported


def test_without_nvidia_smi_the_summary_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    sampler = UtilisationSampler((0,), command="optiml-no-such-tool")
    sampler.start()
    summary = sampler.stop()
    assert summary == {"tool": "optiml-no-such-tool", "unavailable": "optiml-no-such-tool not found"}
    assert describe(summary) == "GPU utilisation: not measured (optiml-no-such-tool not found)."


def test_a_bench_records_its_wall_time_and_gpu_utilisation(fake_smi: Path, tmp_path: Path) -> None:
    paths = [tmp_path / f"task{i}.py" for i in range(2)]

    def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
        time.sleep(0.3)
        return BenchRow(task=path.stem, file=str(path), status="verified", best_ms=1.0)

    out = tmp_path / "out"
    run_bench(paths, BenchConfig(gpus=(1,)), out, job=job, make_worker=lambda gpu: IdleWorker())
    state = json.loads((out / "bench.json").read_text())
    assert state["wall_s"] >= 0.5
    assert set(state["gpu_utilisation"]["gpus"]) == {"1"} and state["gpu_utilisation"]["gpus"]["1"]["mean_pct"] == 50.0
    report = (out / "bench.md").read_text()
    assert "Suite wall time:" in report and "GPU 1 50 % mean" in report


def test_the_cli_prints_the_suites_wall_time_and_utilisation(
    fake_smi: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tasks(tmp_path / "suite", ["a"])

    def quick_job(config: BenchConfig, out_dir: Path):  # type: ignore[no-untyped-def]
        def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
            time.sleep(0.2)
            return verified(path)

        return job

    monkeypatch.setattr(bench_runner, "optimize_job", quick_job)
    monkeypatch.setattr(bench_runner, "_worker_for", lambda gpu: IdleWorker())
    result = CliRunner().invoke(app, ["bench", str(tmp_path / "suite"), "-o", str(tmp_path / "out"), "--gpus", "0"])
    assert result.exit_code == 0, result.output
    assert "wall time" in result.output and "GPU utilisation (nvidia-smi): GPU 0" in result.output
