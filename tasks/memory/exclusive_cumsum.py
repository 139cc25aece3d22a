"""Exclusive prefix sum: torch.cumsum(x, 1) - x along the rows of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Exclusive prefix sum along dimension 1 of a float32 M x N matrix, computed as cumsum(x, 1) - x"
        " (out[i, j] = sum of x[i, :j], so out[i, 0] = 0), same-shape output."
    ),
    "dtype": "float32",
    # Loosened atol: running sums of N=8192 values of std 1 reach magnitudes ~100 and pass through
    # zero often, so rtol does not help there. A sequential fp32 scan differs from a blocked/tree scan
    # (and from the reference's subtract-after-scan rounding) by up to ~4e-3 at N=100003; 1e-2 is far
    # below the size of any single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    # the scan's add and the subtract: ~2 floating-point operations per element.
    "flops": "2*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, 1) - x


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
