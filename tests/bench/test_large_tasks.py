"""tasks/large/: tasks at KernelBench level-1 sizes (issue 38's clock-agreement suite). Each loads, is sized
as its name and docstring say on the meta device (nothing allocated), runs at its small shape set on the
CPU, and has a template plan, so `optiml bench` can verify a kernel for it offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.evaluate.runtime import TaskRuntime
from optiml.task import load_task
from optiml.templates.kernels import TemplateKernels

LARGE = Path(__file__).resolve().parents[2] / "tasks" / "large"
GiB = 1 << 30
#: task -> (bytes of the inputs, bytes of the outputs) at the file's own sizes, and the plan's op class
EXPECTED = {
    "silu_4096x393216": (6 * GiB, 6 * GiB, "pointwise"),
    "softmax_4096x393216": (6 * GiB, 6 * GiB, "reduce"),
    "row_sum_8192x147456": (4.5 * GiB, 8192 * 4, "reduce"),
    "col_sum_147456x8192": (4.5 * GiB, 8192 * 4, "reduce"),
    "rmsnorm_nchw_96x64x512x512": (6 * GiB, 6 * GiB, "reduce"),
    "cumsum_32768x32768": (4 * GiB, 4 * GiB, "scan"),
    "gemm_2048x8192x4096": ((2048 + 4096) * 8192 * 4, 2048 * 4096 * 4, "gemm"),
    "conv2d_16x16x1024x1024_k3": (GiB, 16 * 128 * 1022 * 1022 * 4, "conv"),
}


def nbytes(values: list[object]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def test_the_folder_holds_the_expected_tasks() -> None:
    assert sorted(p.stem for p in LARGE.glob("*.py")) == sorted(EXPECTED)
    over = [name for name, (ins, outs, _) in EXPECTED.items() if ins >= 4 * GiB or outs >= 4 * GiB]
    assert len(over) == 7  # all but the GEMM move 4 GiB or more


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sizes_on_the_meta_device_and_the_small_shape_set_on_the_cpu(name: str) -> None:
    task = load_task(LARGE / f"{name}.py")
    assert task.meta.description and task.meta.flops and task.meta.dtype == "float32"
    meta = TaskRuntime(task, "meta")
    args = meta.make_args(0, 0)
    outputs = meta.run_reference(meta.build_model(0, 0), args)
    inputs_bytes, output_bytes, _ = EXPECTED[name]
    assert nbytes(args) == inputs_bytes and nbytes(outputs) == output_bytes
    cpu = TaskRuntime(task, "cpu")
    small = cpu.make_args(0, 1)
    assert nbytes(small) < 32 << 20
    (out,) = cpu.run_reference(cpu.build_model(0, 1), small)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_templates_plan_each_task(name: str) -> None:
    plan = TemplateKernels.for_task(load_task(LARGE / f"{name}.py")).describe()
    assert plan.startswith(EXPECTED[name][2] + "["), plan
