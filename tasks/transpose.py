"""Matrix transpose: out = x.t().contiguous() of a float32 matrix (pure data movement)."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": "Transpose of a float32 M x N matrix into a contiguous N x M matrix.",
    "dtype": "float32",
    "flops": "0",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 4099, "N": 33}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
