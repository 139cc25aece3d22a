"""On a GPU: every starter task's naive kernel, exported as a KernelBench ModelNew, computes what Model does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from optiml.export.kernelbench import render_model_new
from optiml.kernel.source import KernelSource
from optiml.task import load_task

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

TASKS = Path(__file__).resolve().parents[2] / "tasks"
STARTERS = sorted(p.name.removesuffix(".naive.cu") for p in TASKS.glob("*.naive.cu"))


def import_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", STARTERS)
def test_exported_model_new_matches_the_reference_on_the_gpu(
    name: str, tmp_path: Path, kernel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    task = load_task(TASKS / f"{name}.py")
    out = tmp_path / f"{name}_model_new.py"
    out.write_text(render_model_new(task, KernelSource.from_file(TASKS / f"{name}.naive.cu")), encoding="utf-8")
    module = import_file(out)

    # exact FP32 like OptiML's harness (cuDNN would otherwise run the reference conv in TF32)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    torch.manual_seed(0)
    reference = module.Model(*module.get_init_inputs()).cuda()
    torch.manual_seed(0)
    model_new = module.ModelNew(*module.get_init_inputs()).cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        expected = reference(*inputs)
        got = model_new(*inputs)
        again = model_new(*inputs)  # the built library is reused
    torch.cuda.synchronize()
    torch.testing.assert_close(got, expected, atol=task.meta.atol, rtol=task.meta.rtol)
    torch.testing.assert_close(again, expected, atol=task.meta.atol, rtol=task.meta.rtol)
