"""Cumulative sum along the rows of a float32 32768 x 32768 matrix (4 GiB)."""

import torch
import torch.nn as nn

M = 32768
N = 32768

OPTIML = {
    "description": "torch.cumsum over dimension 1 (each row's prefix sums) of a float32 M x N matrix (4 GiB).",
    "dtype": "float32",
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}],
}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, N)]


def get_init_inputs() -> list:
    return [1]
