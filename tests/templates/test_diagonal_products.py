"""``diag(v) @ B`` and ``A @ diag(v)``: traced as row or column scaling, never a dense diagonal matrix."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.task import Task

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
    return write_task(folder, name, TASK.format(body=body, b_shape=b_shape))


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
    units = []
    for name, spec in CASES.items():
        kernels = planned(_task(tmp_path, name, *spec))
        units.append((kernels.task, "default", kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
