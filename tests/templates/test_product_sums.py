"""A product summed (or averaged) over its columns is folded into its weight: a column sum and a GEMV, no GEMM."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.graph.capture import capture_all
from optiml.task import Task
from optiml.templates.plan import make_plan

TASK = """import torch
import torch.nn as nn

M, N, K = 24, 40, 56
OPTIML = {{"dtype": "{dtype}", "shape_sets": [{{"M": 24, "N": 40, "K": 56}}, {{"M": 7, "N": 33, "K": 129}}]}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(N, K))
        self.bias = nn.Parameter(torch.randn(N))
        self.shift = nn.Parameter(torch.randn(N))

    def forward(self, x, r):
        y = {body}
        return y


def get_inputs():
    return [torch.rand(M, K), torch.randn(M, 1)]


def get_init_inputs():
    return []
"""

FOLDED = {  # level 2's 14, 18 and 51, and the forms around them
    "scaled_sum": "torch.sum(torch.matmul(x, self.weight.T) / 2, dim=1, keepdim=True) * 1.5",
    "biased_sum": "torch.sum(nn.functional.linear(x, self.weight, self.bias), dim=1, keepdim=True)",
    "shifted_mean": "torch.mean(nn.functional.linear(x, self.weight, self.bias) - self.shift, dim=1, keepdim=True)",
    "flat_sum": "(-(x @ self.weight.T)).sum(dim=-1)",
    "untransposed": "(x @ self.weight.T.contiguous() + self.shift).sum(dim=1)",
    "mean_of_row_shift": "torch.mean(x @ self.weight.T * 3.0 + r, dim=1)",
}
KEPT = {  # not linear in the product, not over its columns, or the product is needed as it is
    "sigmoid_sum": "torch.sigmoid(x @ self.weight.T).sum(dim=1)",
    "row_sum": "(x @ self.weight.T).sum(dim=0)",
    "residual_sum": "(x @ self.weight.T + x[:, :1] * self.shift).sum(dim=1)",
    "constant_sum": "(x @ self.weight.T + 1.0).sum(dim=1)",  # would need N x 1.0: a size, not a constant
    "product_kept": "(x @ self.weight.T).sum(dim=1, keepdim=True) + (x @ self.weight.T)",
    "divided_by_product": "(2.0 / (x @ self.weight.T)).sum(dim=1)",
}


def _task(folder: Path, name: str, body: str, dtype: str = "float32") -> Task:
    return write_task(folder, name, TASK.format(body=body, dtype=dtype))


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_a_linear_chain_to_a_column_sum_folds_into_a_column_sum_of_the_weight_and_a_gemv(
    tmp_path: Path, name: str
) -> None:
    plan = make_plan(list(capture_all(_task(tmp_path, name, FOLDED[name]))))
    graph = plan.graphs[0]
    products = [n for n in graph.nodes if n.op == "matmul"]
    assert len(products) == 1 and graph.type(products[0].outputs[0]).shape[1] == 1, plan.describe()
    weight_sum = graph.producer(products[0].inputs[1])
    assert weight_sum is not None and weight_sum.op in ("sum", "mean") and weight_sum.inputs[0] in graph.inputs
    assert planned(_task(tmp_path, name, FOLDED[name])).seeds()[0][1].variant == "gemv"


@pytest.mark.parametrize("name", sorted(KEPT))
def test_a_product_that_is_not_summed_linearly_over_its_columns_is_left_alone(tmp_path: Path, name: str) -> None:
    plan = make_plan(list(capture_all(_task(tmp_path, name, KEPT[name]))))
    graph = plan.graphs[0]
    shapes = [graph.type(n.outputs[0]).shape for n in graph.nodes if n.op == "matmul"]
    assert shapes and all(shape[1] > 1 for shape in shapes), plan.describe()


def test_a_half_precision_product_is_left_alone(tmp_path: Path) -> None:
    """The half reference rounds the product before summing it: the fold would change what is compared."""
    plan = make_plan(list(capture_all(_task(tmp_path, "half", FOLDED["scaled_sum"], dtype="float16"))))
    assert all(plan.graphs[0].type(n.outputs[0]).shape[1] > 1 for n in plan.graphs[0].nodes if n.op == "matmul")


@needs_gxx
def test_folded_sums_match_torch_on_the_emulator_at_every_shape_set(tmp_path: Path) -> None:
    units = []
    for name, body in FOLDED.items():
        kernels = planned(_task(tmp_path, name, body))
        units += [(kernels.task, f"seed {k}", kernels.render(seed).code) for k, seed in enumerate(kernels.seeds(2))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=2e-4)
    assert not failures, "\n".join(failures)
