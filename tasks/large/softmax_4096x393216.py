"""Softmax over the rows of a float32 4096 x 393216 matrix (6 GiB): KernelBench level 1's softmax size."""

import torch
import torch.nn as nn

M = 4096
N = 393216

OPTIML = {
    "description": "torch.softmax over dimension 1 (each row of N values) of a float32 M x N matrix (6 GiB).",
    "dtype": "float32",
    # max, subtract, exp, sum and divide: ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, N)]


def get_init_inputs() -> list:
    return []
