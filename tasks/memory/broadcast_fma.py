"""Three-input broadcast: x * y + z with x [M, N], y [1, N] (per column) and z [M, 1] (per row)."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Elementwise x * y + z of float32 inputs x [M, N], y [1, N] broadcast over rows and z [M, 1]"
        " broadcast over columns, giving a float32 M x N matrix."
    ),
    "dtype": "float32",
    # a multiply and an add per output element.
    "flops": "2*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return x * y + z


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N), torch.randn(1, N), torch.randn(M, 1)]


def get_init_inputs() -> list:
    return []
