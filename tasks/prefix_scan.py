"""Prefix scan: torch.cumsum along the last dimension of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": "Inclusive prefix sum (cumsum) along the last dimension of a float32 M x N matrix.",
    "dtype": "float32",
    # Loosened atol: running sums of N=8192 values of std 1 reach magnitudes ~100 and the scan
    # passes through zero often, so rtol does not help there. A sequential fp32 scan differs from
    # a blocked/tree scan by up to ~1e-3; 1e-2 keeps a 10x margin yet is far below the size of any
    # single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 50001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
