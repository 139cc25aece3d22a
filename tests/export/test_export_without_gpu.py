"""An export used on a machine without a GPU (issue 40): each call fails with one line that says the kernel needs
CUDA tensors — not torch's IndexError from a C++ launcher build, then an ImportError for a half-built module on
the next call. Run as a user runs it: a fresh Python process importing the exported file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from export_helpers import TASKS, unique_namespace, write

from optiml.export.kernelbench import render_model_new
from optiml.export.op import render_op
from optiml.kernel.source import KernelSource
from optiml.task import load_task

#: calls the export twice on CPU tensors and prints each error's type and message, one line each
CALLER = """
import importlib.util, sys, warnings
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("exported", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import torch
call = module.ModelNew(64) if hasattr(module, "ModelNew") else module.op
args = (torch.randn(8, 64),) if hasattr(module, "ModelNew") else (torch.randn(8, 64), torch.randn(64), torch.randn(64))
for _ in range(2):
    try:
        call(*args)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")
"""


def _render(form: str, namespace: str) -> str:
    task = load_task(TASKS / "layernorm.py")
    source = KernelSource.from_file(TASKS / "layernorm.naive.cu")
    return render_model_new(task, source) if form == "modelnew" else render_op(task, source, namespace=namespace)


@pytest.mark.parametrize("form", ["modelnew", "op"])
def test_calls_on_cpu_tensors_fail_with_one_line_each_time(form: str, tmp_path: Path) -> None:
    import torch

    namespace = unique_namespace()
    path = write(tmp_path, f"layernorm_{form}.py", _render(form, namespace))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", CALLER, str(path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    where = "move them to a GPU" if torch.cuda.is_available() else "no CUDA GPU is visible here"
    what = "ModelNew (layernorm)" if form == "modelnew" else f"op {namespace}::layernorm"
    expected = f"RuntimeError: {what}: the kernel runs on CUDA tensors; these are on cpu; "
    assert len(lines) == 2, run.stdout
    for line in lines:
        assert line.startswith(expected) and line.endswith(where), line
    assert not (tmp_path / "cache" / "optiml" / "export").exists() or not any(
        (tmp_path / "cache" / "optiml" / "export").glob("launcher-*")
    ), "a call that cannot run built the C++ launcher"
