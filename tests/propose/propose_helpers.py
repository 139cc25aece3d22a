"""Helpers for the proposer tests: the starter suite's kernels, our own kernels, and small tasks."""

from __future__ import annotations

from pathlib import Path

from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
DATA = Path(__file__).resolve().parent / "data"

#: tasks/*.naive.cu, the starter suite's baselines
SUITE_KERNELS = sorted(TASKS.glob("*.naive.cu"))
#: kernels written for these tests: literal launches, missing qualifiers, shared memory, aliasing
DATA_KERNELS = sorted(DATA.glob("*.cu"))
#: the task our own (elementwise, fp32) data kernels borrow where one is needed
SILU_TASK = TASKS / "silu.naive.cu"

TASK_TEMPLATE = """
import torch
import torch.nn as nn

N = 1024
OPTIML = {{"dtype": "float32", "rtol": {rtol}, "atol": {atol}}}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""


def read_kernel(path: Path) -> KernelSource:
    return KernelSource.from_file(path)


def suite_task(kernel_path: Path) -> Task:
    """The task a starter-suite kernel belongs to (``x.naive.cu`` -> ``x.py``)."""
    return load_task(kernel_path.with_name(kernel_path.name.removesuffix(".naive.cu") + ".py"))


def make_task(folder: Path, rtol: float = 1e-4, atol: float = 1e-4) -> Task:
    """A small elementwise task with the given tolerances, written to ``folder``."""
    path = folder / f"relu_{rtol:g}_{atol:g}.py"
    path.write_text(TASK_TEMPLATE.format(rtol=rtol, atol=atol), encoding="utf-8")
    return load_task(path)
