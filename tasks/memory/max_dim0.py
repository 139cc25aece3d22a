"""Column max: torch.max(x, dim=0).values of a float32 matrix (reduction over the outer dimension)."""

import torch
import torch.nn as nn

M = 16384
N = 8192

OPTIML = {
    "description": (
        "Maximum over dimension 0 (the M rows, an outer-dimension / column reduction) of a float32 M x N"
        " matrix, giving N values (values only, no indices)."
    ),
    "dtype": "float32",
    # one comparison per element; the result is an input element, so it is exact.
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 100003, "N": 3}, {"M": 37, "N": 65536}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=0).values


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
