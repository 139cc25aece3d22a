"""``triu``/``tril`` of a matrix product: fused into the GEMM epilogue, checked on the CPU emulator.

The epilogue knows each output element's row and column, so the triangle costs nothing beyond the
product; anywhere else (a triangle of an input, say) the planner's kernel refuses it in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_gemm_template import EMULATED, emulated_library, needs_gxx, run_emulated

from optiml.errors import TemplateError
from optiml.graph.capture import capture_all
from optiml.task import Task, load_task
from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan

TASK = """import torch
import torch.nn as nn

M, N, K = 40, 48, 24
OPTIML = {{"shape_sets": [{{"M": 37, "N": 45, "K": 29}}, {{"M": 70, "N": 9, "K": 33}}]}}


class Model(nn.Module):
    def forward(self, a, b):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

CASES = {
    "triu": ("torch.triu(a @ b)", "torch.randn(M, K), torch.randn(K, N)"),
    "triu_above": ("torch.triu(torch.relu(a @ b), diagonal=3)", "torch.randn(M, K), torch.randn(K, N)"),
    "tril_batched": ("torch.tril(torch.bmm(a, b), diagonal=-2) * 2", "torch.randn(3, M, K), torch.randn(3, K, N)"),
}
CONFIGS = [
    GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=4, tn=4),
    GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8),
]


def _task(folder: Path, name: str, body: str, inputs: str) -> Task:
    path = folder / f"{name}.py"
    path.write_text(TASK.format(body=body, inputs=inputs))
    return load_task(path)


def _kernels(task: Task) -> TemplateKernels:
    return TemplateKernels(task, make_plan(list(capture_all(task))), EMULATED)


def test_the_triangle_fuses_into_the_product(tmp_path: Path) -> None:
    task = _task(tmp_path, "triu", *CASES["triu"])
    assert _kernels(task).describe().startswith("gemm[matmul triu]")


@needs_gxx
def test_triangles_of_products_match_torch_on_the_emulator(tmp_path: Path) -> None:
    from optiml.evaluate.runtime import TaskRuntime

    tasks = [_task(tmp_path, name, body, inputs) for name, (body, inputs) in CASES.items()]
    units, plan = [], []
    for task in tasks:
        kernels = _kernels(task)
        default = kernels.default()
        for config in [default[0], *CONFIGS]:
            units.append(kernels.render([config, *default[1:]]).code)
            plan.append((task, config))
    library = emulated_library(tmp_path / "emu", units)
    failures = []
    for k, (task, config) in enumerate(plan):
        runtime = TaskRuntime(task, "cpu")
        for shape_set in range(task.num_shape_sets):
            case = runtime.case(5 + shape_set, shape_set)
            (got,) = run_emulated(library, k, case.abi_inputs, case.expected)
            want = case.expected[0].double().numpy().reshape(-1)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                failures.append(
                    f"{task.name} {config.label()} shape set {shape_set}: max error {np.nanmax(np.abs(got - want))}"
                )
    assert not failures, "\n".join(failures)


def test_a_triangle_of_an_input_is_refused_in_one_line(tmp_path: Path) -> None:
    task = _task(tmp_path, "triu_input", "torch.triu(a) + b", "torch.randn(M, N), torch.randn(M, N)")
    with pytest.raises(TemplateError, match="triu needs each element's row and column"):
        _kernels(task).render(_kernels(task).default())
