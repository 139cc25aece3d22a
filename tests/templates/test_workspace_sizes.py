"""The workspace is sized from the inputs alone: optiml_workspace_bytes never sees the outputs."""

from __future__ import annotations

from pathlib import Path

TASK = """
import torch
import torch.nn as nn
K = 48
M = 40
N = 56
OPTIML = {"shape_sets": [{"K": 33, "M": 21, "N": 17}]}
class Model(nn.Module):
    def forward(self, a, b):
        y = a.t() @ b
        return y * 2, y.sum(1)
def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]
def get_init_inputs():
    return []
"""


def test_a_stored_value_shaped_like_an_output_is_sized_from_the_inputs(tmp_path: Path) -> None:
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    path = tmp_path / "tmm.py"
    path.write_text(TASK, encoding="utf-8")
    kernels = template_kernels(load_task(path))
    assert kernels.describe() == "gemm[matmul mul] → reduce[sum]"  # y is written by one kernel, read by the next
    code = kernels.render(kernels.default()).code
    sizing = code[code.index("optiml_workspace_bytes(const optiml_tensor* inputs") :]
    assert "outputs[" not in sizing.split("return")[0]
    assert "inputs[0].shape[1]" in sizing and "inputs[1].shape[1]" in sizing  # M and N, from a and b


def test_inputs_only_resolver_never_names_an_output() -> None:
    from optiml.graph.capture import capture_all
    from optiml.graph.sizes import SizeResolver
    from optiml.task import load_task

    root = Path(__file__).resolve().parents[2]
    graphs = capture_all(load_task(root / "tasks" / "softmax.py"))
    out = graphs[0].outputs[0]
    assert SizeResolver(graphs).dim(out, 1) == "outputs[0].shape[1]"
    assert SizeResolver(graphs, inputs_only=True).dim(out, 1) == "inputs[0].shape[1]"
