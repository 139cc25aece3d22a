"""Row sort in float32: torch.sort(x, dim=1).values. No template covers a sort: tests use it as the
task the planner refuses in one line (with a shipped naive kernel beside it)."""

import torch
import torch.nn as nn

M = 64
N = 100

OPTIML = {
    "description": "The values of torch.sort(x, dim=1) of a float32 [M, N] matrix (ascending).",
    "dtype": "float32",
    # the result is a permutation of the input's rows: exact.
    "flops": "M*N*N",
    "shape_sets": [{"M": 3, "N": 17}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=1).values


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
