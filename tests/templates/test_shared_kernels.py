"""Blocks a network repeats compile once: a kernel whose device code equals an earlier one's (but for
its prefix and the names of its temporaries) launches the earlier kernel, and the results stay right."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.convs = nn.ModuleList([nn.Conv2d(4, 4, 3, padding=1) for _ in range(2)])

    def forward(self, x, y):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        for conv in self.convs:
            y = torch.relu(conv(y))
        return x, y


def get_inputs():
    return [torch.randn(8, 16), torch.randn(2, 4, 6, 6)]


def get_init_inputs():
    return []
"""


@needs_gxx
def test_repeated_blocks_share_their_kernels_and_stay_right(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "repeated", TASK))
    assert kernels.describe().count("gemm[") == 3 and kernels.describe().count("conv[") == 2, kernels.describe()
    code = kernels.render(kernels.default()).code
    assert code.count("the same kernel as") == 3, "the 2nd and 3rd Linear and the 2nd conv reuse a kernel"
    failures = emulator_mismatches(tmp_path / "emu", [(kernels.task, "repeated", code)], seed=19, tol=1e-4)
    assert not failures, "\n".join(failures)
