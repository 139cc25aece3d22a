"""GELU, tanh approximation: F.gelu(x, approximate="tanh") of a float32 matrix (elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Elementwise tanh-approximated GELU 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) of a float32 M x N matrix."
    ),
    "dtype": "float32",
    # cube (2), scale and add (2), scale (1), tanh (1), add one, halve and multiply by x (3): ~9 per element.
    "flops": "9*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
