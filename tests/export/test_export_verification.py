"""What an exported ModelNew says about verification comes from the run store (issue 16, item 3).

CPU only: the store is filled by hand, the export is rendered, read and imported (importing builds
nothing; building and running the kernel is the GPU test's business).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from optiml.cli import app
from optiml.kernel.source import KernelSource
from optiml.store import NodeRecord, RunStore
from optiml.task import Task, load_task
from optiml.values import CompileResult, EvalResult, EvalStatus, TimingStats, TrialCheck, VerifyReport

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "layernorm.py"
KERNEL = ROOT / "tasks" / "layernorm.naive.cu"
runner = CliRunner()


def import_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def store_evaluation(store_path: Path, task: Task, kernel: KernelSource, status: EvalStatus) -> str:
    """A run of ``task`` whose root ``kernel`` was evaluated with ``status``; returns the run id."""
    trials = tuple(
        TrialCheck(seed=seed, shape_set=shape_set, distribution="native", passed=True, max_abs_err=2e-7)
        for seed in (0, 1, 2)
        for shape_set in range(task.num_shape_sets)
    )
    compiled = CompileResult(ok=True, so_path=None, digest=kernel.digest, arch="sm_90a", seconds=1.0, cached=False)
    result = EvalResult(
        status=status,
        kernel_digest=kernel.digest,
        compile=compiled,
        verify=VerifyReport(passed=status is EvalStatus.OK, trials=trials),
        timing=TimingStats.from_samples([3.0, 3.1, 3.2]) if status is EvalStatus.OK else None,
    )
    with RunStore(store_path) as store:
        run = store.create_run(
            task_name=task.name,
            task_path=str(task.path),
            task_digest=task.digest,
            strategy="greedy",
            config_json="{}",
            root=kernel,
        )
        node = NodeRecord(kernel.digest, None, None, 0, 1.0, 1, None, "")
        store.record_evaluation(run.id, node=node, kernel=kernel, result=result, elapsed_s=1.0, cost_usd=0.0)
    return run.id


def export(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    out = tmp_path / "layernorm_model_new.py"
    result = runner.invoke(
        app, ["export", str(TASK), str(KERNEL), "-o", str(out), "--store", str(tmp_path / "runs.db"), *extra]
    )
    return result.exit_code, result.output, out


def test_a_verified_kernel_is_exported_with_what_was_verified(tmp_path: Path) -> None:
    task, kernel = load_task(TASK), KernelSource.from_file(KERNEL)
    run_id = store_evaluation(tmp_path / "runs.db", task, kernel, EvalStatus.OK)
    code, output, out = export(tmp_path)
    assert code == 0, output
    assert f"verified: run {run_id}" in " ".join(output.split())
    text = out.read_text()
    doc = text[: text.index('"""', 3)]
    assert "UNVERIFIED" not in text
    assert f"run {run_id}, evaluated " in doc and "UTC, compiled for sm_90a" in doc
    assert f"kernel digest {kernel.digest}; task digest {task.digest}" in doc
    assert "shape sets 0, 1, 2 of the task's 3" in doc and "9 trials (seeds 0, 1, 2" in doc
    assert f"|out - ref| <= {task.meta.atol:g} + {task.meta.rtol:g} * |ref|" in doc
    module = import_file(out)
    record = module.OPTIML_VERIFICATION
    assert record["run_id"] == run_id and record["shape_sets"] == (0, 1, 2) and record["task_digest"] == task.digest


def test_a_kernel_without_a_verified_record_is_refused(tmp_path: Path) -> None:
    task, kernel = load_task(TASK), KernelSource.from_file(KERNEL)
    store_evaluation(tmp_path / "runs.db", task, kernel, EvalStatus.COMPILE_ERROR)  # evaluated, but it failed
    code, output, out = export(tmp_path)
    assert code == 2 and not out.exists()
    line = " ".join(output.split())
    assert line.startswith("error: ") and "no verified evaluation" in line and "--unverified" in line


def test_a_missing_store_is_not_created_and_means_unverified(tmp_path: Path) -> None:
    code, _, out = export(tmp_path)
    assert code == 2 and not out.exists() and not (tmp_path / "runs.db").exists()


def test_an_edited_task_does_not_inherit_the_old_verification(tmp_path: Path) -> None:
    kernel = KernelSource.from_file(KERNEL)
    edited = tmp_path / "layernorm.py"
    edited.write_text(TASK.read_text().replace("M = 8192", "M = 4096"))
    store_evaluation(tmp_path / "runs.db", load_task(edited), kernel, EvalStatus.OK)  # verified for *another* source
    code, _, _ = export(tmp_path)
    assert code == 2


def test_unverified_export_is_labelled_and_warns(tmp_path: Path) -> None:
    code, output, out = export(tmp_path, "--unverified")
    assert code == 0, output
    assert "warning: UNVERIFIED export" in " ".join(output.split())
    text = out.read_text()
    assert text.splitlines()[2].startswith("UNVERIFIED.") and "verified against the reference by OptiML" not in text
    with pytest.warns(UserWarning, match="exported UNVERIFIED"):
        module = import_file(out)
    assert module.OPTIML_VERIFICATION is None


def test_every_form_states_the_verification_and_refuses_without_one(tmp_path: Path) -> None:
    from export_helpers import unique_namespace

    task, kernel = load_task(TASK), KernelSource.from_file(KERNEL)
    store = str(tmp_path / "runs.db")
    for form, out in (("op", tmp_path / "ln_op.py"), ("cu", tmp_path / "ln.cu")):
        refused = runner.invoke(app, ["export", str(TASK), str(KERNEL), "--as", form, "-o", str(out), "--store", store])
        assert refused.exit_code == 2 and "no verified evaluation" in refused.output and not out.exists()
    run_id = store_evaluation(tmp_path / "runs.db", task, kernel, EvalStatus.OK)
    namespace = unique_namespace()
    op = runner.invoke(
        app,
        [
            "export",
            str(TASK),
            str(KERNEL),
            "--as",
            "op",
            "--namespace",
            namespace,
            "-o",
            str(tmp_path / "ln_op.py"),
            "--store",
            store,
        ],
    )
    assert op.exit_code == 0, op.output
    assert f"registers torch.ops.{namespace}.layernorm" in " ".join(op.output.split())
    module = import_file(tmp_path / "ln_op.py")
    assert module.OPTIML_VERIFICATION["run_id"] == run_id and f"run {run_id}, evaluated " in module.__doc__
    cu = runner.invoke(
        app, ["export", str(TASK), str(KERNEL), "--as", "cu", "-o", str(tmp_path / "ln.cu"), "--store", store]
    )
    assert cu.exit_code == 0, cu.output
    head = (tmp_path / "ln.cu").read_text()[:3000]
    assert f"// run {run_id}, evaluated " in head and "UNVERIFIED" not in head and (tmp_path / "ln.bin").is_file()


def test_options_of_another_form_are_refused(tmp_path: Path) -> None:
    for extra in (
        ["--name", "x"],
        ["--as", "cu", "--namespace", "x"],
        ["--as", "op", "--shape-set", "1"],
        ["--as", "so"],
    ):
        code, output, out = export(tmp_path, "--unverified", *extra)
        assert code == 2 and output.startswith("error: ") and not out.exists(), output
