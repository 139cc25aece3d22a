"""Masked prefix sum: torch.cumsum(x * mask, dim=1) with a boolean mask input, along matrix rows."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Inclusive prefix sum along dimension 1 of x * mask for a float32 M x N matrix x and a bool M x N"
        " mask (masked-out elements contribute 0), same-shape float32 output."
    ),
    "dtype": "float32",
    # Loosened atol: running sums of ~N/2 kept values of std 1 reach magnitudes ~70 and pass through
    # zero often, so rtol does not help there. A sequential fp32 scan differs from a blocked/tree scan
    # by up to ~4e-3 at N=100003; 1e-2 is far below the size of any single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    # mask multiply and the scan's add: ~2 floating-point operations per element.
    "flops": "2*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * mask, dim=1)


def get_inputs() -> list[torch.Tensor]:
    # The bool mask keeps its dtype (only floating inputs are cast): one byte per element.
    return [torch.randn(M, N), torch.rand(M, N) > 0.5]


def get_init_inputs() -> list:
    return []
