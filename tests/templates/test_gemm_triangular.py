"""``triu``/``tril`` of a matrix product: fused into the GEMM epilogue, checked on the CPU emulator.

The epilogue knows each output element's row and column, so the triangle costs nothing beyond the
product; anywhere else (a triangle of an input, say) the planner's kernel refuses it in one line.
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task
from optiml.templates.base import GroupConfig

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
    return write_task(folder, name, TASK.format(body=body, inputs=inputs))


def test_the_triangle_fuses_into_the_product(tmp_path: Path) -> None:
    task = _task(tmp_path, "triu", *CASES["triu"])
    assert planned(task).describe().startswith("gemm[matmul triu]")


@needs_gxx
def test_triangles_of_products_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name, (body, inputs) in CASES.items():
        kernels = planned(_task(tmp_path, name, body, inputs))
        default = kernels.default()
        for config in [default[0], *CONFIGS]:
            units.append((kernels.task, config.label(), kernels.render([config, *default[1:]]).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-4)
    assert not failures, "\n".join(failures)


def test_a_triangle_of_an_input_is_a_masked_copy_not_an_epilogue(tmp_path: Path) -> None:
    """No product to fuse into: the triangular family's kernel (tests/templates/test_triangular.py)."""
    task = _task(tmp_path, "triu_input", "torch.triu(a) + b", "torch.randn(M, N), torch.randn(M, N)")
    assert planned(task).describe() == "triangular[triu] → pointwise[add]"
