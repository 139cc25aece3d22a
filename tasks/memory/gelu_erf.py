"""GELU, exact erf form: F.gelu(x) of a float32 matrix (elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 4096
N = 16384

OPTIML = {
    "description": "Elementwise exact GELU 0.5*x*(1+erf(x/sqrt(2))) of a float32 M x N matrix.",
    "dtype": "float32",
    # scale (1), erf (1), add one (1), multiply by x (1), halve (1): ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
