"""A value between two kernels whose size no tensor dim equals at every shape set (a pooled, convolved or
concatenated dim) is sized by the op's own formula over its input's sizes, and the kernels stay right
on the emulator at every shape set (was: "the workspace size depends on an output's shape")."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

OPTIML = {{"shape_sets": [{{"H": 9, "W": 6, "C": 5}}, {{"H": 7, "W": 11, "C": 2}}]}}
H, W, C = 8, 10, 3


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)
        self.up = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x, y):
        return {body}


def get_inputs():
    return [torch.randn(2, 3, H, W), torch.randn(2, C, H, W)]


def get_init_inputs():
    return []
"""

CASES = [
    "F.max_pool2d(x * 2, 2) + 1",
    "F.max_pool2d(x - 1, 3, stride=2, ceil_mode=True) * 3",  # ceil mode: the last window's rule
    "F.avg_pool2d(x, 2, stride=1, padding=1) * y.mean()",
    "F.max_pool2d(torch.relu(self.conv(x)), 2)",  # a strided conv's output feeds a pool
    "self.up(x).sum(dim=1)",  # a transposed conv's output feeds a reduction
    # the concatenated dim is the parts' sum; the cat is computed inside the reduction (nothing between kernels)
    "torch.cat([x, y], dim=1).sum(dim=1)",
]
FUSED = {"torch.cat([x, y], dim=1).sum(dim=1)"}


@needs_gxx
def test_values_sized_by_their_op_are_right_at_every_shape_set(tmp_path: Path) -> None:
    units = []
    for k, body in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"derived_{k}", TASK.format(body=body)))
        code = kernels.render(kernels.default()).code
        between = "ws_off_v" in code
        assert between != (body in FUSED), f"{body}: {kernels.describe()}"
        units.append((kernels.task, body, code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=17, tol=1e-4)
    assert not failures, "\n".join(failures)
