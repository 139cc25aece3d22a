"""A group's own workspace (a GEMM's) sized by an output dim is re-expressed over the inputs, in
optiml_workspace_bytes and optiml_forward alike (was: "the workspace size depends on an output's shape")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TASK = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(y.view(y.shape[0], -1))
def get_inputs():
    return [torch.rand(24, 2, 8, 8)]
def get_init_inputs():
    return []
"""

LAYOUT = re.compile(r"ws_total \+= .*;")


def _layout(code: str, function: str, end: str) -> list[str]:
    body = code[code.index(function) :]
    return LAYOUT.findall(body[: body.index(end)])


def test_a_gemm_workspace_sized_by_the_batch_reads_the_input_batch(tmp_path: Path) -> None:
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    path = tmp_path / "conv_fc.py"
    path.write_text(TASK, encoding="utf-8")
    kernels = template_kernels(load_task(path))
    assert kernels.describe().endswith("gemm[matmul add]")
    codes = [kernels.render(config).code for config in kernels.seeds(2)]
    gemm_sized = [code for code in codes if "_ws_bytes(" in code]
    if not gemm_sized:
        pytest.skip("no seed gives the GEMM a workspace of its own")
    for code in gemm_sized:
        sizing = _layout(code, "optiml_workspace_bytes(const optiml_tensor* inputs", "return (size_t)ws_total")
        forward = _layout(code, "optiml_forward(const optiml_tensor* inputs", "if (ws_total > 0")
        assert sizing and sizing == forward  # one layout: the workspace the forward uses is the one sized
        assert not any("outputs[" in line for line in sizing)
        assert any("inputs[0].shape[0]" in line and "_ws_bytes(" in line for line in sizing)  # M = the batch
