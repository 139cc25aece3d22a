"""Leaky ReLU: F.leaky_relu(x, negative_slope=0.01) of a float32 matrix (elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": "Elementwise leaky ReLU (x if x > 0 else 0.01 * x) of a float32 M x N matrix.",
    "dtype": "float32",
    # a comparison and a multiply per element.
    "flops": "2*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=0.01)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
