"""SiLU: elementwise y = x * sigmoid(x) over a float32 matrix (memory bound: 8 bytes per element)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": "Elementwise SiLU activation y = x * sigmoid(x) of a float32 M x N matrix.",
    "dtype": "float32",
    # exp, add, divide and multiply: ~4 floating-point operations per element.
    "flops": "4*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 1, "N": 7}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
