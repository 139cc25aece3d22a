"""`optiml eval --compile-only`: screen and compile with ptxas resources, no GPU (issue 16, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.cli import app
from optiml.evaluate.evaluator import compile_check
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import EvalStatus

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "silu.py"
NAIVE = ROOT / "tasks" / "silu.naive.cu"
runner = CliRunner()


def test_compile_only_result_is_not_called_verified() -> None:
    from optiml.values import CompileResult, EvalResult

    compiled = CompileResult(ok=True, so_path="k.so", digest="d", arch="sm_90a", seconds=0.1, cached=True)
    feedback = EvalResult(status=EvalStatus.OK, compile=compiled).feedback()
    assert feedback.startswith("compiles for sm_90a") and "not yet verified or timed" in feedback


@pytest.mark.nvcc
def test_a_kernel_that_compiles_exits_0_with_its_resources(tmp_path: Path, kernel_cache: Path) -> None:
    result = runner.invoke(app, ["eval", str(TASK), str(NAIVE), "--compile-only"], terminal_width=200)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "compiled" in out and "yes" in out and "resources" in out and "regs" in out
    assert "not checked" in out and "--compile-only" in out  # says plainly that nothing ran
    as_json = runner.invoke(app, ["eval", str(TASK), str(NAIVE), "--compile-only", "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["compile_only"] is True and data["status"] == "ok" and data["timing"] is None
    assert data["compile"]["resources"] and data["compile"]["resources"][0]["registers"] > 0


@pytest.mark.nvcc
def test_a_kernel_that_does_not_compile_exits_1_with_the_error(tmp_path: Path, kernel_cache: Path) -> None:
    broken = tmp_path / "broken.cu"
    broken.write_text(NAIVE.read_text().replace("return optiml_check_launch();", "return undefined_thing;"))
    result = runner.invoke(app, ["eval", str(TASK), str(broken), "--compile-only"], terminal_width=200)
    assert result.exit_code == 1, result.output
    assert "undefined_thing" in result.output and "Traceback" not in result.output


@pytest.mark.nvcc
def test_screening_still_applies(tmp_path: Path, kernel_cache: Path) -> None:
    sneaky = tmp_path / "sneaky.cu"
    sneaky.write_text("#include <stdlib.h>\n" + NAIVE.read_text().replace("(void)workspace;", 'system("id");', 1))
    kernel = KernelSource.from_file(sneaky)
    result = compile_check(load_task(TASK), kernel, Compiler(CompilerConfig()))
    if result.status is not EvalStatus.REJECTED:
        pytest.skip("the naive kernel has no line this test can put a system call into")
    cli = runner.invoke(app, ["eval", str(TASK), str(sneaky), "--compile-only"])
    assert cli.exit_code == 1 and "rejected" in cli.output


def test_compile_only_and_compile_exclude_each_other() -> None:
    result = runner.invoke(app, ["eval", str(TASK), str(NAIVE), "--compile-only", "--compile"])
    assert result.exit_code == 2 and "--compile-only" in result.output


@pytest.mark.nvcc
def test_eval_without_a_gpu_points_to_compile_only(kernel_cache: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = runner.invoke(app, ["eval", str(TASK), str(NAIVE)])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output and "--compile-only" in result.output
