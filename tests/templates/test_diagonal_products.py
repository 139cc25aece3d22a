"""``diag(v) @ B`` and ``A @ diag(v)``: traced as row or column scaling, never a dense diagonal matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_gemm_template import EMULATED, emulated_library, needs_gxx, run_emulated

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.task import Task, load_task
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan

TASK = """import torch
import torch.nn as nn

N, M = 40, 24
OPTIML = {{"shape_sets": [{{"N": 7, "M": 33}}]}}


class Model(nn.Module):
    def forward(self, a, b):
        return {body}


def get_inputs():
    return [torch.randn(N), torch.randn({b_shape})]


def get_init_inputs():
    return []
"""

CASES = {
    "rows": ("torch.diag(a) @ b", "N, M"),
    "columns": ("torch.relu(b @ torch.diag(a))", "M, N"),
    "both": ("(torch.diag(a) @ torch.diag(a)) @ b", "N, M"),
}


def _task(folder: Path, name: str, body: str, b_shape: str) -> Task:
    path = folder / f"{name}.py"
    path.write_text(TASK.format(body=body, b_shape=b_shape))
    return load_task(path)


def test_a_diagonal_factor_becomes_an_element_wise_product(tmp_path: Path) -> None:
    graph = capture_all(_task(tmp_path, "rows", *CASES["rows"]))[0]
    ops = [node.op for node in graph.nodes]
    assert "matmul" not in ops and "mul" in ops


def test_a_diagonal_matrix_used_otherwise_is_a_one_line_error(tmp_path: Path) -> None:
    task = _task(tmp_path, "added", "torch.diag(a) + b", "N, N")
    with pytest.raises(UnsupportedOpError, match=r"diagonal matrix .* other than as a factor of a matrix product"):
        capture_all(task)


@needs_gxx
def test_diagonal_products_match_torch_on_the_emulator(tmp_path: Path) -> None:
    from optiml.evaluate.runtime import TaskRuntime

    tasks = [_task(tmp_path, name, *spec) for name, spec in CASES.items()]
    units = []
    for task in tasks:
        kernels = TemplateKernels(task, make_plan(list(capture_all(task))), EMULATED)
        units.append(kernels.render(kernels.default()).code)
    library = emulated_library(tmp_path / "emu", units)
    for k, task in enumerate(tasks):
        runtime = TaskRuntime(task, "cpu")
        for shape_set in range(task.num_shape_sets):
            case = runtime.case(3 + shape_set, shape_set)
            (got,) = run_emulated(library, k, case.abi_inputs, case.expected)
            want = case.expected[0].double().numpy().reshape(-1)
            assert np.allclose(got, want, rtol=1e-5, atol=1e-5), f"{task.name} shape set {shape_set}"
