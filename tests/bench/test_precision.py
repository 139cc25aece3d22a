"""``optiml bench --precision``: float32 tasks run from copies whose OPTIML carries the chosen precision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.bench import runner as bench_runner
from optiml.bench.metrics import BenchRow
from optiml.bench.precision import CONVOLUTION, at_precision, copies_folder, with_precision
from optiml.cli import app
from optiml.errors import OptimlError
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]
BODY = """import torch
import torch.nn as nn
{meta}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 10, 10{dtype})]


def get_init_inputs():
    return []
"""


def _write(folder: Path, name: str, meta: str = "", dtype: str = "") -> Path:
    path = folder / f"{name}.py"
    path.write_text(BODY.format(meta=meta, dtype=dtype), encoding="utf-8")
    return path


def test_a_kernelbench_file_gets_the_precision_added(tmp_path: Path) -> None:
    source = _write(tmp_path, "19_conv")
    [copy] = at_precision([source], "tf32", tmp_path / "copies")
    assert copy != source and copy.name == source.name and copy.read_text().startswith(source.read_text())
    task = load_task(copy)
    assert task.name == load_task(source).name and task.meta.precision == "tf32" and task.meta.atol == 1e-2


def test_the_file_s_own_dict_keeps_its_other_keys(tmp_path: Path) -> None:
    meta = 'OPTIML = {\n    "dtype": "float32",\n    "atol": 3e-3,\n    "shape_sets": [{"B": 1}],\n}\nB = 2'
    source = _write(tmp_path, "conv", meta)
    (tmp_path / "conv.naive.cu").write_text("// the task's own kernel\n")
    [copy] = at_precision([source], "tf32", tmp_path / "copies")
    task = load_task(copy)
    assert task.meta.precision == "tf32" and task.meta.atol == 3e-3 and len(task.meta.shape_sets) == 1
    assert (copy.parent / "conv.naive.cu").read_text() == "// the task's own kernel\n"
    assert copy.read_text().count("OPTIML") == 1 and "B = 2" in copy.read_text()
    again = at_precision([source], "tf32", tmp_path / "copies")  # a resumed run writes the same file
    assert again == [copy] and load_task(copy).digest == task.digest


def test_other_tasks_run_as_they_are(tmp_path: Path) -> None:
    half = _write(tmp_path, "half", 'OPTIML = {"dtype": "float16"}', ", dtype=torch.float16")
    already = _write(tmp_path, "already", 'OPTIML = {"precision": "tf32"}')
    broken = tmp_path / "broken.py"
    broken.write_text("class Model(:\n")
    assert at_precision([half, already, broken], "tf32", tmp_path / "copies") == [half, already, broken]
    assert not (tmp_path / "copies").exists()
    exact = at_precision([already], "exact", tmp_path / "copies")[0]
    assert load_task(exact).meta.precision == "exact"


def test_an_unknown_precision_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(OptimlError, match="--precision 'fp8': expected one of exact, tf32"):
        at_precision([_write(tmp_path, "conv")], "fp8", tmp_path)
    result = CliRunner().invoke(
        app, ["bench", str(ROOT / "tasks" / "conv2d.py"), "--precision", "fp8", "-o", str(tmp_path / "b")]
    )
    assert result.exit_code == 2 and result.output.startswith("error: --precision 'fp8'"), result.output


def test_only_tasks_with_a_convolution_are_copied(tmp_path: Path) -> None:
    """PyTorch's defaults differ from exact fp32 only in convolutions; tf32 would loosen the others' tolerance."""
    matmul = tmp_path / "matmul.py"
    matmul.write_text(BODY.format(meta="", dtype="").replace("nn.Conv2d(4, 8, 3)", "nn.Linear(10, 8)"))
    assert at_precision([matmul], "tf32", tmp_path / "copies") == [matmul]
    for text in ("F.conv2d(x, w)", "nn.ConvTranspose3d(", "torch.conv1d(", "aten.convolution("):
        assert CONVOLUTION.search(text), text
    assert not CONVOLUTION.search("self.convolve = 1; deconv = conv2dx")


def test_the_copies_live_in_the_bench_s_folder(tmp_path: Path) -> None:
    assert copies_folder(tmp_path, "tf32") == tmp_path / "tasks-tf32"
    assert "OPTIML = {'precision': 'tf32'}" in with_precision("x = 1", "tf32")


def test_the_bench_runs_the_copy_and_records_the_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job is handed the copy (a task file at tf32) and the state file says which precision the run chose."""
    (tmp_path / "suite").mkdir()
    conv = _write(tmp_path / "suite", "conv")
    handed: list[Path] = []

    class Idle:
        def request(self, message: dict, timeout_s: float = 0.0) -> dict:
            return {"name": "none"}

        def stop(self) -> None:
            return None

    def job_for(config, out_dir):  # type: ignore[no-untyped-def]
        def job(path: Path, worker: object, gpu: object) -> BenchRow:
            handed.append(path)
            return BenchRow(path.stem, str(path), "verified", best_ms=0.1)

        return job

    monkeypatch.setattr(bench_runner, "optimize_job", job_for)
    monkeypatch.setattr(bench_runner, "_worker_for", lambda gpu: Idle())
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", str(tmp_path / "suite"), "-o", str(out), "--precision", "tf32"])
    assert result.exit_code == 0, result.output
    [path] = handed
    assert path == out / "tasks-tf32" / "suite" / "conv.py" and load_task(path).meta.precision == "tf32"
    assert load_task(conv).meta.precision == "exact"  # the user's file is left as it was
    assert json.loads((out / "bench.json").read_text())["config"]["precision"] == "tf32"
